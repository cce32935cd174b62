__version__ = "0.1.0"  # the fallback of `loopbot --version` when the package metadata is missing

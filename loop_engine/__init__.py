"""loop_engine: plan -> act -> observe -> evaluate -> recover -> terminate."""

from .errors import *  # noqa: F401,F403
from .types import *  # noqa: F401,F403

# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
CONFIG ?= $(if $(wildcard config.yaml),config.yaml,config.example.yaml)

.PHONY: run test lint bench soak clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/loopbot serve --config $(CONFIG)

test: $(STAMP)
	$(PY) -m pytest -q -m "not soak"

lint: $(STAMP)
	$(VENV)/bin/ruff check loop_engine adapters bot tests bench examples
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) bench/run_all.py

soak: $(STAMP)
	$(PY) -m pytest -q -m soak

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

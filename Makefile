# Switchyard — the two commands: `make demo` and `make test`.
# Works on a fresh machine with Python 3.11 and make; everything else is installed into .venv.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck contracts unit bench clean help

help:
	@echo "make demo   - set up .venv and run the routed agent demo on simulated models"
	@echo "make test   - set up .venv and run ruff, mypy, import contracts and the whole test suite"
	@echo "make bench  - proxy overhead benchmark (see docs/benchmarks.md)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[all,dev,probe]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/switchyard demo

lint: $(STAMP)
	$(BIN)/ruff check switchyard tests benchmarks examples
	$(BIN)/ruff format --check switchyard tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck contracts unit

bench: $(STAMP)
	$(BIN)/python benchmarks/proxy_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

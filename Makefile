# Switchyard — the two commands: `make demo` and `make test`.
# Works on a fresh machine with Python 3.11 and make; everything else is installed into .venv.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck contracts unit bench clean help redis-server

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

# The Redis state backend is tested against a real redis-server (tests/_redis.py).
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's redis-server for the Redis state tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else \
	    echo "make test needs redis-server on PATH for the Redis state tests."; \
	    echo "  Debian/Ubuntu: sudo apt-get install -y redis-server    macOS: brew install redis"; \
	    echo "  (or run with SWITCHYARD_SKIP_REDIS=1 to skip those tests)"; \
	    [ "$$SWITCHYARD_SKIP_REDIS" = 1 ]; \
	  fi; }

unit: $(STAMP) redis-server
	$(BIN)/python -m pytest -q

test: lint typecheck contracts unit

bench: $(STAMP)
	$(BIN)/python benchmarks/proxy_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

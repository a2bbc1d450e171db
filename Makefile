# Two commands for a fresh machine (both idempotent):
#   make demo   install into .venv and run the main job: rlperf study quick (about 5 minutes:
#               PPO on Pong under three runners, an inference benchmark, reports/quick/index.html)
#   make test   install into .venv (and Debian's chromium for the report's browser test),
#               then run the whole test suite
VENV ?= .venv
PYTHON ?= python3
# The local CPU build; `make TORCH=torch` (or any spec) to keep your own build elsewhere.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.rlperf-installed

.PHONY: demo test lint install browser clean-venv

$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build here.
	$(VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(VENV)/bin/python -m pip install --quiet -e ".[atari,envpool,dev,export,ray]"
	touch $(STAMP)

install: $(STAMP)

# Headless Chromium for the report's browser test, from Debian's package when it is missing
# (sudo only when not root). Without apt, or when the install fails, the test skips and says why.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing chromium (apt) for the report's browser test"; \
	  ($$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install \
	    -y -qq --no-install-recommends chromium >/dev/null) \
	  || echo "chromium could not be installed: the browser test will be skipped"; \
	else echo "no apt-get: install chromium yourself, or the browser test will be skipped"; fi

demo: $(STAMP)
	$(VENV)/bin/rlperf study quick

# One pytest worker per core; a folder whose tests share fixtures stays on one worker
# (tests/conftest.py). `$(VENV)/bin/python -m pytest -q` runs them one after the other.
test: $(STAMP) browser
	$(VENV)/bin/python -m pytest -q -n auto --dist loadgroup --no-loadscope-reorder

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

clean-venv:
	rm -rf $(VENV)

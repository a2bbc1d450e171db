# Two commands for a fresh machine (both idempotent):
#   make demo   install into .venv and run the main job (a few minutes of PPO on Pong)
#   make test   install into .venv and run the whole test suite
VENV ?= .venv
PYTHON ?= python3
# The local CPU build; `make TORCH=torch` (or any spec) to keep your own build elsewhere.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.rlperf-installed

.PHONY: demo test lint install clean-venv

$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build here.
	$(VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(VENV)/bin/python -m pip install --quiet -e ".[atari,envpool,dev,export]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rlperf train --preset demo-pong

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

clean-venv:
	rm -rf $(VENV)

# The two commands: `make demo` and `make test`. Each creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lar-installed

.PHONY: demo test install clean bench

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	# the CPU torch build on disk first: anything else would pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev,notebook,eval,bench]"
	# pylate pinned and without its dependencies: unpinned it pulls a CUDA torch via fast-plaid
	$(BIN)/python -m pip install -q --no-deps pylate==1.6.0
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/lar demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_spine.py

clean:
	rm -rf $(VENV) .lar-demo .pytest_cache *.egg-info

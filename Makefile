# The two commands: `make demo` and `make test`. Each creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lar-installed

.PHONY: demo test install clean bench bench-spine chromium

$(STAMP): pyproject.toml constraints.txt
	sh scripts/check_disk.sh . 3300
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

# tests/notebooks/test_browser.py drives Debian's chromium (Playwright's own browser download
# does not work here); installed when missing and we are root, else the test says how
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else echo "make test: the browser test needs Debian's chromium: sudo apt-get install chromium" >&2; fi; }

test: $(STAMP) chromium
	$(BIN)/python -m pytest -q

# the speed goal table (issue 26): lar and its peers side by side; QUICK=1 for a small subset
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(if $(QUICK),--quick,) --out benchmarks/results/$$(date +%F)-speed-run

bench-spine: $(STAMP)
	$(BIN)/python benchmarks/bench_spine.py

clean:
	rm -rf $(VENV) .lar-demo .pytest_cache *.egg-info

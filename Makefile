# The two commands: `make demo` and `make test`. Each creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lar-installed
TORCH_VERSION := 2.13.0
# where `make gpu` gets the CUDA torch wheel: PyPI's torch for Linux x86_64 is the CUDA build
TORCH_INDEX ?= https://pypi.org/simple
PIP_INDEX_ONLY := env -u PIP_FIND_LINKS -u PIP_CONSTRAINT -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null

.PHONY: demo test install gpu clean bench bench-spine chromium

$(STAMP): pyproject.toml constraints.txt
	sh scripts/check_disk.sh . 3300
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	# the CPU torch build on disk first: anything else would pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q -c constraints.txt torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev,notebook,eval,bench]"
	# pylate pinned and without its dependencies: unpinned it pulls a CUDA torch via fast-plaid
	$(BIN)/python -m pip install -q --no-deps pylate==1.6.0
	touch $(STAMP)

install: $(STAMP)

# opt-in, on a GPU machine: the CUDA build of the same torch (with its nvidia-* wheels, ~5 GB)
# in place of the CPU one. Local wheel folders and pip config are bypassed (they may hold the
# CPU build, which pip would take as "torch==$(TORCH_VERSION)" too); the other pins stay.
# `make` and `make test` leave an installed CUDA torch alone; `make clean && make` is CPU again.
gpu: $(STAMP)
	sh scripts/check_disk.sh . 9000
	# the CUDA torch in place (pip puts the CPU one back if this fails), then its nvidia-* wheels
	$(PIP_INDEX_ONLY) $(BIN)/python -m pip install -q --force-reinstall --no-deps \
	  --index-url $(TORCH_INDEX) torch==$(TORCH_VERSION)
	$(PIP_INDEX_ONLY) $(BIN)/python -m pip install -q -c constraints.txt \
	  --index-url $(TORCH_INDEX) torch==$(TORCH_VERSION)
	$(BIN)/python -c "import torch, sys; print('torch', torch.__version__, '- CUDA build', torch.version.cuda, '- GPU seen:', torch.cuda.is_available()); sys.exit(0 if torch.version.cuda else 'make gpu: this torch is not a CUDA build')"

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

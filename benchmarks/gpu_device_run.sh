#!/usr/bin/env bash
# The prepared device run of issue 23: the `gpu` tests, then benchmarks/gpu_bench.py (bandwidth,
# the late scan resident on the device for 1.2 M and 100 M tokens, the same on the CPU,
# eng.search latency). Installs nothing, needs no network: it uses the repository's .venv when
# that has torch, else python3 (a CUDA torch with numpy and pytest). About 5 minutes on an H200.
#
#     bash benchmarks/gpu_device_run.sh           # writes to $OUT, else benchmarks/results/
#     SMOKE=1 bash benchmarks/gpu_device_run.sh   # the CPU smoke run (seconds; no GPU needed)
set -u
cd "$(dirname "$0")/.."
DEST="${OUT:-benchmarks/results}"
mkdir -p "$DEST"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in .venv/bin/python python3 python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch, numpy" 2>/dev/null; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "no python with torch and numpy found" >&2; exit 2; }
DAY="$(date -u +%Y-%m-%d)"
if [ -n "${SMOKE:-}" ]; then NAME="$DAY-gpu-bench-cpu-smoke"; ARGS="--smoke"; else NAME="$DAY-gpu-bench"; ARGS=""; fi
LOG="$DEST/$NAME.log"
export PYTHONPATH="$PWD:$PWD/magics${PYTHONPATH:+:$PYTHONPATH}"
{
  echo "== $(date -u '+%Y-%m-%d %H:%M:%S') UTC, python $PY"
  "$PY" -c "import torch; c = torch.cuda.is_available(); print('torch', torch.__version__, 'cuda build', torch.version.cuda, 'gpu', torch.cuda.get_device_name(0) if c else None)"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  if [ -z "${SMOKE:-}" ]; then
    echo "== pytest -m gpu"
    GPU_TESTS="$(grep -rl "pytest.mark.gpu" tests | sort | tr "\n" " ")"
    timeout 180 "$PY" -m pytest -q -m gpu -rs -p no:cacheprovider $GPU_TESTS
    echo "pytest rc=$?"
  fi
  echo "== benchmarks/gpu_bench.py $ARGS"
  timeout 420 "$PY" benchmarks/gpu_bench.py $ARGS --out "$DEST" --name "$NAME"
  echo "bench rc=$?"
} 2>&1 | tee "$LOG"

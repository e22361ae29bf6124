#!/usr/bin/env bash
# The GPU path, proved on a machine with an NVIDIA GPU, CuPy, numpy, pyarrow and pytest (no Ray):
#   1. `import raymod` works without Ray and CuPy sees a device;
#   2. the GPU half of every op test and the executor / executor-group tests on real CuPy
#      (`-m gpu`; tests that need Ray skip there);
#   3. bench/bench_gpu.py: MLP, LeNet and bucketing-LSTM samples/s on rm.cpu() and rm.gpu(0).
# Run from anywhere:  bash bench/gpu_check.sh [--quick]   (--quick: small bench runs)
# Exits non-zero at the first failing step; writes the bench JSON to bench/results/gpu_check.json.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
quick=("$@")

echo "== 1/3 import raymod without Ray; CuPy and its device"
python - <<'PY'
import importlib.util, sys
import raymod, raymod.context as c
print("raymod", raymod.__version__, "| ray installed:", importlib.util.find_spec("ray") is not None)
if not c.gpu_available():
    sys.exit("CuPy is missing or sees no CUDA device (raymod.context.gpu_available() is False)")
import cupy
print("cupy", cupy.__version__, "|", c.num_gpus(), "device(s):",
      cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
PY

echo "== 2/3 every op test and the executor tests on CuPy (GPU halves: -m gpu)"
python -m pytest -q -p no:cacheprovider -m gpu -o addopts="-ra" \
    tests/ops tests/test_operator.py tests/kvstore/test_kvstore_local.py
echo "== 2/3 executor and executor-group tests (their whole files, CPU and GPU)"
python -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/test_executor.py tests/parallel

echo "== 3/3 throughput, numpy against CuPy"
mkdir -p bench/results
python bench/bench_gpu.py "${quick[@]}" --json-out bench/results/gpu_check.json

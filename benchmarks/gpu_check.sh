#!/usr/bin/env bash
# torchtpu on an NVIDIA GPU: builds the extension against this machine's torch, then runs a short
# test subset and the benchmarks on "tpu" backed by a CUDA PJRT plugin (jax-cuda13-pjrt or
# jax-cuda12-pjrt), with the train step's MFU. Everything it prints also goes to $OUT (default
# ./gpu_check_out).
#
#   bash benchmarks/gpu_check.sh                 # on a GPU machine
#   PLATFORM=cpu BUILD=0 bash benchmarks/gpu_check.sh   # the same steps on the CPU plugin (a dry run)
#
# PYTHON: the interpreter (default python3). Without the xla-cpu-pjrt wheel, the PJRT header's
# folder must be given in TORCHTPU_PJRT_INCLUDE_DIR (the wheel holds the header, never this repo).
# TESTS: the test files to run (default below); MFU_ARGS: the train step's size.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PLATFORM=${PLATFORM:-cuda}
OUT=${OUT:-gpu_check_out}
TESTS=${TESTS:-"tests/python/test_tensors.py tests/python/test_elementwise.py tests/python/test_nn.py tests/python/test_compile.py tests/python/test_kernels.py"}
MFU_ARGS=${MFU_ARGS:-"--width 512 --layers 8 --heads 8 --block 256 --batch 16 --steps 20"}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TORCHTPU_PLATFORM="$PLATFORM"
export PYTHONUNBUFFERED=1
status=0

step() {  # step NAME COMMAND...: runs it, its output kept in $OUT/NAME.log, its status noted
  local name=$1; shift
  echo "== $name: $*"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc"
  [ "$rc" = 0 ] || status=1
}

step versions "$PY" -c "
import importlib.util, torch
print('torch', torch.__version__)
for name in ('jax_plugins.xla_cuda13', 'jax_plugins.xla_cuda12', 'xla_plugins.xla_cpu_pjrt'):
    print(name, 'present' if importlib.util.find_spec(name.split('.')[0]) and
          importlib.util.find_spec(name) else 'absent')"

if [ "${BUILD:-1}" = 1 ]; then
  # In place (torchtpu/*.so), against this machine's torch; no C++ tests without the CPU plugin.
  step build env TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" setup.py -q build_ext --inplace
fi

step device "$PY" -c "
import torch, torchtpu
print(torch.tpu.get_device_name(), torch.tpu.device_count(), 'devices')
print(torchtpu.plugin())
x = torch.randn(256, 256, device='tpu')
print('matmul error', float(((x @ x).cpu() - x.cpu() @ x.cpu()).abs().max()))"

if "$PY" -c "import pytest" 2>/dev/null; then
  # shellcheck disable=SC2086
  step tests "$PY" -m pytest -q -x -p no:cacheprovider $TESTS
else
  echo "== tests: pytest is not installed for $PY; skipped"
  status=1
fi

step op_overhead "$PY" benchmarks/op_overhead.py
# shellcheck disable=SC2086
step mfu_fp32 "$PY" benchmarks/train_mfu.py $MFU_ARGS --dtype fp32 --json "$OUT/mfu_fp32.json"
# shellcheck disable=SC2086
step mfu_bf16 "$PY" benchmarks/train_mfu.py $MFU_ARGS --dtype bf16 --json "$OUT/mfu_bf16.json"
if "$PY" -c "import jax" 2>/dev/null; then
  step kernels "$PY" benchmarks/kernels.py
fi
echo "gpu_check: $([ $status = 0 ] && echo all steps passed || echo some steps failed), logs in $OUT"
exit $status

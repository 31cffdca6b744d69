#!/usr/bin/env bash
# Does torchtpu's C++ build against another torch release? Compiles every file that includes torch
# headers against that release's headers (from its PyPI wheel, downloaded once: ~530 MB for 2.11),
# then checks that the release's libraries define every torch symbol the objects use, as the
# loader will when the extension built there is imported. Torch 2.11 is what the GPU machine has.
#
#   bash tools/check_torch.sh [VERSION]     # default 2.11.0; after `make build` (uses build/)
#
# WORK: where the wheel and the objects go (default /tmp/torchtpu-torch-VERSION).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-2.11.0}
WORK=${WORK:-/tmp/torchtpu-torch-$VERSION}
PY=${PYTHON:-.venv/bin/python}
TORCH="$WORK/torch"
mkdir -p "$WORK/obj"
if [ ! -f build/build.ninja ]; then
  echo "run make build first: build/build.ninja gives the compile flags"; exit 1
fi

if [ ! -f "$TORCH/lib/libtorch_cpu.so" ]; then
  "$PY" -m pip download -q "torch==$VERSION" --no-deps -d "$WORK"
  unzip -q -o "$WORK"/torch-"$VERSION"-*.whl 'torch/include/*' 'torch/lib/libc10.so' \
    'torch/lib/libtorch_cpu.so' 'torch/lib/libtorch.so' 'torch/lib/libtorch_python.so' -d "$WORK"
fi

# The compile commands of build/, with this release's headers; TpuProfiler.cc only where CMake
# would build it (the release has the PrivateUse1 profiler registry).
"$PY" - "$TORCH" "$WORK/obj" > "$WORK/compile.sh" <<'EOF'
import os, re, sys
torch, obj = sys.argv[1:]
ninja = open("build/build.ninja").read()
profiler = os.path.exists(f"{torch}/include/torch/csrc/profiler/standalone/privateuse1_profiler.h")
for src, body in re.findall(r"^build \S+\.o: CXX_COMPILER\S* (\S+\.cc)[^\n]*\n((?:  [^\n]*\n)*)",
                            ninja, re.M):
    flags = dict(re.findall(r"^  (\w+) = (.*)$", body, re.M))
    includes = flags.get("INCLUDES", "")
    if "torch/include" not in includes or ("TpuProfiler" in src and not profiler):
        continue
    includes = re.sub(r"\S*/site-packages/torch/include", f"{torch}/include", includes)
    out = os.path.join(obj, os.path.basename(src) + ".o")
    print(f"g++ -c -O0 -fPIC -std=gnu++17 {flags.get('DEFINES', '')} {includes} {src} -o {out} "
          f"2>&1 | grep -E 'error' | head -5 | sed 's|^|{src}: |'")
EOF
rm -f "$WORK"/obj/*.o
echo "compiling $(wc -l < "$WORK/compile.sh") files against torch $VERSION's headers"
xargs -d '\n' -n 1 -P "$(nproc)" bash -c 'eval "$1"' _ < "$WORK/compile.sh" | tee "$WORK/errors.log"
[ ! -s "$WORK/errors.log" ] || { echo "FAILED: compile errors above"; exit 1; }

# Torch's symbols that the objects use and the release's libraries do not define.
nm -u "$WORK"/obj/*.o | awk '{print $NF}' | sort -u > "$WORK/used"
{ nm --defined-only "$WORK"/obj/*.o build/libtorchtpu_core.a 2>/dev/null
  for lib in c10 torch_cpu torch torch_python; do nm -D --defined-only "$TORCH/lib/lib$lib.so"; done
} | awk 'NF >= 3 {print $NF}' | sort -u > "$WORK/defined"
comm -23 "$WORK/used" "$WORK/defined" | c++filt \
  | grep -E '^(typeinfo for |vtable for )?(c10|at|torch|caffe2)::' > "$WORK/missing" || true
if [ -s "$WORK/missing" ]; then
  echo "FAILED: torch $VERSION's libraries lack these symbols:"; cat "$WORK/missing"; exit 1
fi
echo "torch $VERSION: every file compiles, and its libraries define every torch symbol used"

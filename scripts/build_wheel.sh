#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the cake wheel, kernels embedded, for machines with neither LLVM/MLIR
# nor the CUDA toolkit (the NVIDIA driver only), then checks it:
#
#   scripts/build_wheel.sh [KERNELS_DIR]   # -> dist/cake-0.1.0-cp312-cp312-linux_x86_64.whl
#
# Without KERNELS_DIR it builds the compiler and generates the kernels into
# $CAKE_BUILD_DIR/kernels (default build/, shared with scripts/build.sh); with
# it, it embeds that folder's kernels (cake_kernels.ptx and .manifest from a
# build with the compiler, and .cubin, else ptxas assembles one here).
# Building needs the CUDA toolkit's headers (and ptxas); installing does not.
#
# The extension is built for the Python of CAKE_WHEEL_PYTHON, by default
# python3.12 (the GPU machine's Python), found on PATH or under pyenv, in a
# virtual environment of its own with pybind11, scikit-build-core and the
# torch that scripts/setup.sh pins (without its dependencies: the build reads
# its headers and libraries, it does not import it), against which
# cake/_torch_ops, the C++ eager route, is built; the wheel still depends on
# no torch, and the package loads cake/_torch_ops only under that version.
# Checks: cake/_C needs no library but libc, libm, libstdc++ and libgcc_s
# (the runtime dlopens libcuda.so.1 when first used), cake/_torch_ops those
# and torch's (loaded by torch first), and cake/_C imports from a fresh
# `pip install --no-deps --no-index --target` without loading any LLVM, MLIR
# or CUDA library.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Python to build for: CAKE_WHEEL_PYTHON, else the first python3.12 that
# runs (a pyenv shim may not), on PATH or in pyenv's versions.
find_python() {
  if [[ -n ${CAKE_WHEEL_PYTHON:-} ]]; then
    echo "$CAKE_WHEEL_PYTHON"
    return
  fi
  local candidate
  for candidate in python3.12 \
    $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -rV); do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
}
python=$(find_python)
if [[ -z $python ]] || ! "$python" -c 'import sys' 2>/dev/null; then
  echo "error: no Python 3.12 found; set CAKE_WHEEL_PYTHON to the interpreter to build for" >&2
  exit 1
fi
tag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [[ ! -f $include/Python.h ]]; then
  echo "error: $python has no development headers ($include/Python.h)" >&2
  exit 1
fi

if (($# > 0)); then
  kernels=$(realpath "$1")
else
  source scripts/setup.sh
  build=${CAKE_BUILD_DIR:-build}
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
  ninja -C "$build" cake-kernels
  kernels=$(realpath "$build/kernels")
fi
for file in cake_kernels.ptx cake_kernels.manifest; do
  if [[ ! -f $kernels/$file ]]; then
    echo "error: $kernels/$file not found" >&2
    exit 1
  fi
done

venv=${CAKE_WHEEL_VENV:-$HOME/.cache/cake/wheel-venv-$tag}
if ! "$venv/bin/python" -c "import pybind11, scikit_build_core" 2>/dev/null; then
  echo "build_wheel: creating $venv with $python"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q "pybind11==3.0.1" "scikit-build-core>=0.10"
fi
torch_pin=$(sed -n 's/^TORCH_VERSION=\([^ ]*\).*/\1/p' scripts/setup.sh)
if [[ $("$venv/bin/pip" show torch 2>/dev/null | sed -n 's/^Version: //p') != "$torch_pin"* ]]; then
  echo "build_wheel: installing torch $torch_pin into $venv (headers and libraries only)"
  "$venv/bin/pip" install -q --no-deps "torch==$torch_pin"
fi

mkdir -p dist
rm -f dist/cake-*-"$tag"-*.whl
echo "build_wheel: $tag wheel from the kernels in $kernels"
"$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w dist . \
  -C build-dir="build/wheel-$tag" \
  -C cmake.define.CAKE_ENABLE_COMPILER=OFF \
  -C cmake.define.CAKE_KERNELS_DIR="$kernels" \
  -C cmake.define.CAKE_ENABLE_TORCH_OPS=ON
wheel=$(ls dist/cake-*-"$tag"-*.whl)

# What the extension needs from the system, from its dynamic section.
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
"$python" -m zipfile -e "$wheel" "$check/unpacked"
extension=$(ls "$check"/unpacked/cake/_C*.so)
needed=$(objdump -p "$extension" | awk '/NEEDED/ {print $2}' | sort | tr '\n' ' ')
for library in $needed; do
  case $library in
    libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1) ;;
    *) echo "error: cake/_C needs $library" >&2; exit 1 ;;
  esac
done
torch_ops=$(ls "$check"/unpacked/cake/_torch_ops*.so)
for library in $(objdump -p "$torch_ops" | awk '/NEEDED/ {print $2}'); do
  case $library in
    libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1) ;;
    libc10.so | libtorch.so | libtorch_cpu.so | libtorch_python.so) ;;
    *) echo "error: cake/_torch_ops needs $library" >&2; exit 1 ;;
  esac
done
torch_ops_for=$(sed -n 's/^TORCH_VERSION = "\(.*\)"/\1/p' "$check"/unpacked/cake/_torch_ops_version.py)
versions=$(objdump -T "$extension" | grep -oE '(GLIBC|GLIBCXX)_[0-9.]+' | sort -uV |
  awk -F_ '{max[$1] = $0} END {print max["GLIBC"], max["GLIBCXX"]}')

# A user's install: no dependencies, no index, a fresh folder. cake._C alone
# needs no torch, so the interpreter the wheel is for loads it here, without
# the package's __init__ (which imports torch).
PIP_ROOT_USER_ACTION=ignore "$python" -m pip install -q --no-deps --no-index --no-compile \
  --target "$check/site" "$wheel"
"$python" - "$check"/site/cake/_C*.so <<'EOF'
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("cake._C", sys.argv[1])
extension = importlib.util.module_from_spec(spec)
spec.loader.exec_module(extension)
with open("/proc/self/maps") as maps:
    loaded = {line.split()[-1] for line in maps if ".so" in line}
foreign = [path for path in loaded if any(n in path.lower() for n in ("llvm", "mlir", "cuda"))]
assert not foreign, f"cake._C loaded {foreign}"
reason = extension.unavailable_reason()  # loads the driver, when there is one
print(f"build_wheel: {len(extension.kernels())} kernels embedded; the driver: {reason or 'found'}")
EOF
echo "build_wheel: $wheel"
echo "build_wheel: cake/_C needs $needed(symbol versions up to $versions)"
echo "build_wheel: cake/_torch_ops is for torch $torch_ops_for (other versions: the Python route)"
echo "install it: pip install --no-deps $wheel   (next to torch >= 2.4 with CUDA)"

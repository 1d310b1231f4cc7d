#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the compiler, cake-opt, the kernel library (checked by ptxas) and
# the runtime into build/, then installs the Python package into the
# virtual environment from those kernels (the compiler is not built twice),
# with cake._torch_ops built against the environment's torch.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
ninja -C build
"$CAKE_PYTHON" -m pip install -q --no-build-isolation --no-deps . \
  -C build-dir=build/python-package \
  -C cmake.define.CAKE_ENABLE_COMPILER=OFF \
  -C cmake.define.CAKE_KERNELS_DIR="$PWD/build/kernels" \
  -C cmake.define.CAKE_ENABLE_TORCH_OPS=ON

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what building and testing Cake needs, when it is missing:
# LLVM/MLIR 22 from Debian's packages, CMake and ninja, and a Python virtual
# environment with one pinned torch. Idempotent and quiet when all is there.
# Sourced by the other scripts; it exports CAKE_VENV and CAKE_PYTHON.
set -euo pipefail

CAKE_VENV=${CAKE_VENV:-$HOME/.cache/cake/venv}
TORCH_VERSION=2.11.0 # the GPU machine's version
TRANSFORMERS_VERSION=5.17.0 # the GPU machine's; the drop-in tests train its models
packages=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools cmake ninja-build)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=$([[ $(id -u) == 0 ]] || echo sudo)
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$CAKE_VENV/bin/python" -c "import torch, pybind11, pytest, hypothesis, scikit_build_core" 2>/dev/null; then
  echo "setup: creating $CAKE_VENV (torch $TORCH_VERSION is a large download)"
  python3 -m venv "$CAKE_VENV"
  "$CAKE_VENV/bin/pip" install -q "torch==$TORCH_VERSION" "pybind11==3.0.1" \
    "scikit-build-core>=0.10" pytest hypothesis numpy
fi
if ! "$CAKE_VENV/bin/python" -c "import transformers" 2>/dev/null; then
  echo "setup: installing transformers $TRANSFORMERS_VERSION into $CAKE_VENV"
  "$CAKE_VENV/bin/pip" install -q "transformers==$TRANSFORMERS_VERSION"
fi

if ! command -v ptxas >/dev/null && [[ ! -x /usr/local/cuda/bin/ptxas ]]; then
  echo "setup: no CUDA toolkit found (ptxas, cuda.h); the runtime needs its headers" >&2
  exit 1
fi
export CAKE_VENV CAKE_PYTHON="$CAKE_VENV/bin/python"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tests a wheel of scripts/build_wheel.sh as a user gets it: installed by pip
# into a fresh folder without dependencies or an index (next to the machine's
# own torch, which it must not replace), then the Python tests against it, the
# GPU tests included where a supported GPU is:
#
#   scripts/test_wheel.sh WHEEL [PYTEST_ARGS...]   # default PYTEST_ARGS: all of test/python
#
# CAKE_PYTHON picks the interpreter (default python3: on the GPU machine the
# one with torch, transformers, pytest and hypothesis).
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 1)); then
  echo "usage: scripts/test_wheel.sh WHEEL [PYTEST_ARGS...]" >&2
  exit 1
fi
wheel=$(realpath "$1")
shift
python=${CAKE_PYTHON:-python3}
site=$(mktemp -d "${TMPDIR:-/tmp}/cake-wheel.XXXXXX")
PIP_ROOT_USER_ACTION=ignore "$python" -m pip install -q --no-deps --no-index --no-compile \
  --target "$site" "$wheel"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

# From the tests' folder the source tree's python/ is not on the path, and
# conftest.py takes the installed cake: check that it is the wheel's.
cd test/python
"$python" - "$site" <<'EOF'
import sys

import cake
import cake._C
import torch

for module in (cake, cake._C):
    assert module.__file__.startswith(sys.argv[1]), f"{module.__name__} is {module.__file__}"
supported = cake.is_cake_causal_conv1d_train_supported("cuda")
print(f"test_wheel: cake from {sys.argv[1]}; torch {torch.__version__}; GPU supported: {supported}")
print(f"test_wheel: eager route {cake.eager_route()}")
EOF
"$python" -m pytest -q -rs -p no:cacheprovider "${@:-.}"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every test: the lit suite (IR, passes, PTX through ptxas) and the Python
# tests (GPU tests run when a supported GPU is there, else they are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build.sh

ninja -C build check-cake
# From the repository root the source tree's python/ would shadow the
# installed package and its extension: run pytest from the tests' folder.
(cd test/python && "$CAKE_PYTHON" -m pytest -q -rs .)

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: build everything, show one op going through the pipeline,
# list the kernels that were built, then run a training step through the op
# on a GPU, or on the CPU with the host kernels where there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build.sh

echo "=== examples/causal_conv1d.mlir, tiled and mapped to GPU kernels by cake-opt"
build/bin/cake-opt examples/causal_conv1d.mlir --cake-tile --convert-cake-to-gpu
echo "=== the same, tiled and made host kernels"
build/bin/cake-opt examples/causal_conv1d.mlir --cake-tile=stages=0 --convert-cake-to-host
echo "=== the kernel library (build/kernels), as ptxas reports it"
grep -E "^kernel" build/kernels/cake_kernels.manifest | cut -d' ' -f2-7
grep -E "Used [0-9]+ registers|spill" build/kernels/ptxas.log | sort | uniq -c | sort -rn | head -5
echo "=== a training step"
(cd examples && "$CAKE_PYTHON" train_step.py)

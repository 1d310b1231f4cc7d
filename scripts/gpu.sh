#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Cake on the GPU machine from kernels generated elsewhere, then runs
# the Python tests and the benchmark. Runs from the repository root, offline:
#
#   scripts/gpu.sh [KERNELS_DIR]     # default: build/kernels
#
# The package is built with the compiler off and installed into
# build/gpu-site (a --target folder put on PYTHONPATH), leaving the system's
# torch alone. Logs go to $OUT when it is set, else to build/gpu-logs.
set -euo pipefail

kernels_dir=$(realpath "${1:-build/kernels}")
for file in cake_kernels.ptx cake_kernels.manifest; do
  if [[ ! -f "$kernels_dir/$file" ]]; then
    echo "error: $kernels_dir/$file not found" >&2
    exit 1
  fi
done

repo=$(pwd)
site="$repo/build/gpu-site"
log_dir=${OUT:-$repo/build/gpu-logs}
mkdir -p "$log_dir"
export PYTHONUNBUFFERED=1

# Runs "$@" with its output shown and saved to $log_dir/<name>.log; fails
# when the command fails.
step() {
  local name=$1
  shift
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$log_dir/$name.log"
}

rm -rf "$site"
step build python3 -m pip install --no-build-isolation --no-deps --no-index \
  -q --target "$site" \
  -C cmake.define.CAKE_ENABLE_COMPILER=OFF \
  -C cmake.define.CAKE_KERNELS_DIR="$kernels_dir" \
  .
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

step sanity python3 -c "import cake._C as c; print(c.kernels()[:1], c.is_supported(0), c.unavailable_reason(), c.load_kernels(0))"
# The benchmark runs even when a test fails: one call of the GPU machine
# should bring back both; the script still fails.
status=0
step pytest python3 -m pytest -q -rs test/python || status=$?
# Out-of-bounds accesses that land inside other allocations pass the tests'
# guard bands unseen: memcheck sees them.
step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
  python3 -m pytest -q test/python/test_gpu_correctness.py -k garbage || status=$?
step bench python3 benchmarks/bench_causal_conv1d.py --json "$log_dir/bench.json" \
  || status=$?
step first-call python3 benchmarks/first_call.py --json "$log_dir/first-call.json" \
  || status=$?
exit "$status"

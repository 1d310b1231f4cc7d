#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Cake on the GPU machine from kernels generated elsewhere, then runs
# the Python tests, the sanitizers and the benchmarks. Runs from the
# repository root, offline:
#
#   scripts/gpu.sh [KERNELS_DIR [STEP...]]   # default: build/kernels, all steps
#
# STEPs, after the build: pytest (all of test/python), sanitizers
# (compute-sanitizer's four tools over small selections), bench (every peer),
# host (host time per call), first-call, ab (an A/B of kernel libraries),
# ncu (Nsight Compute's summary of Cake's kernels at every benchmark shape).
# Naming some runs only those, to fit a run in a time limit.
#
# ab times each library of CAKE_AB_LIBRARIES (folders as `cake-kernel-gen -o`
# writes them; `embedded` for the package's own) in the order given, Cake only
# and --quick, then runs test_kernels.py's GPU half on each. Name a library
# twice, first and last, to see how far the GPU drifts within the call.
#
# The benchmark's peers come from the ignored folders .whl and .peers when the
# device call carries them (benchmarks/peers/setup_peers.sh); without them it
# reports the peers as unavailable.
#
# The package is built with the compiler off, cake._torch_ops (the C++ eager
# route) against the machine's torch, and installed into build/gpu-site (a
# --target folder put on PYTHONPATH), leaving the system's torch alone. Logs go to $OUT when it is set, else to build/gpu-logs.
set -euo pipefail

kernels_dir=$(realpath "${1:-build/kernels}")
shift $(($# > 0 ? 1 : 0))
steps=${*:-pytest sanitizers bench host first-call}
for wanted in $steps; do
  case $wanted in
    pytest | sanitizers | bench | host | first-call | ab | ncu) ;;
    *) echo "error: unknown step '$wanted'" >&2; exit 1 ;;
  esac
done
# Whether step $1 was asked for.
wants() { [[ " $steps " == *" $1 "* ]]; }
for file in cake_kernels.ptx cake_kernels.manifest cake_kernels_host.o cake_kernels_host.cpp; do
  if [[ ! -f "$kernels_dir/$file" ]]; then
    echo "error: $kernels_dir/$file not found" >&2
    exit 1
  fi
done
ab_libraries=()
if wants ab; then
  read -ra ab_libraries <<<"${CAKE_AB_LIBRARIES:-}"
  if ((${#ab_libraries[@]} == 0)); then
    echo "error: the ab step needs CAKE_AB_LIBRARIES" >&2
    exit 1
  fi
  for library in "${ab_libraries[@]}"; do
    if [[ $library != embedded && ! -f $library/cake_kernels.ptx ]]; then
      echo "error: $library/cake_kernels.ptx not found" >&2
      exit 1
    fi
  done
fi

repo=$(pwd)
# The device tool stops a command after 600 s: what waits or benchmarks
# plans to be done by this many seconds after the start.
deadline=${CAKE_GPU_DEADLINE_S:-570}
site="$repo/build/gpu-site"
log_dir=${OUT:-$repo/build/gpu-logs}
mkdir -p "$log_dir"
export PYTHONUNBUFFERED=1

# Runs "$@" with its output shown and saved to $log_dir/<name>.log; fails
# when the command fails.
ran=()
step() {
  local name=$1
  shift
  ran+=("$name")
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$log_dir/$name.log"
}

rm -rf "$site"
step build python3 -m pip install --no-build-isolation --no-deps --no-index \
  -q --target "$site" \
  -C cmake.define.CAKE_ENABLE_COMPILER=OFF \
  -C cmake.define.CAKE_KERNELS_DIR="$kernels_dir" \
  -C cmake.define.CAKE_ENABLE_TORCH_OPS=ON \
  .
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

step sanity python3 -c "import cake._C as c; print(c.kernels()[:1], c.is_supported(0), c.unavailable_reason(), c.load_kernels(0))"
step route python3 -c "import cake; route = cake.eager_route(); print('eager route:', route); assert route[0] == 'torch_ops'"
# Before the tests: a peer that must be compiled here builds while they run.
peers_site="$repo/build/peers-site"
if wants bench; then
  step peers benchmarks/peers/setup_peers.sh "$peers_site" || echo "peers: setup failed"
fi
# The benchmark runs even when a test fails: one call of the GPU machine
# should bring back both; the script still fails.
status=0
if wants pytest; then
  step pytest python3 -m pytest -q -rs test/python || status=$?
fi
# compute-sanitizer over small selections (it is slow); memcheck also runs
# the test that reaches each forward configuration. PyTorch's caching
# allocator puts many tensors in one cudaMalloc block, where an access that
# strays from one tensor into another looks legal: without it every tensor is
# an allocation of its own. memcheck sees out-of-bounds accesses that pass the
# garbage test's guard bands; racecheck, initcheck (reads of memory nothing
# wrote) and synccheck run a small forward and backward on every route.
# racecheck and synccheck judge each kernel alone, so they check Cake's only
# (kernel names start with cake_); initcheck must see PyTorch's kernels write
# the inputs, so it checks all.
sanitize() {
  local tool=$1 selection=$2
  shift 2
  step "$tool" env PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    compute-sanitizer --tool "$tool" --error-exitcode 1 "$@" \
    python3 -m pytest -q -p no:cacheprovider test/python/test_kernels.py \
    -k "$selection and cuda"
}
if wants sanitizers; then
  sanitize memcheck "(garbage or forward_launch)" || status=$?
  sanitize racecheck small_forward_backward --kernel-name kns=cake_ || status=$?
  sanitize initcheck small_forward_backward || status=$?
  sanitize synccheck small_forward_backward --kernel-name kns=cake_ || status=$?
fi
if wants bench; then
  # Waits for a causal-conv1d build here (only when the carried one did not
  # import) while that leaves the benchmark 5 minutes.
  SETUP_PEERS_WAIT_S=$((deadline - SECONDS - 300)) step peers-wait \
    benchmarks/peers/setup_peers.sh --wait "$peers_site" || echo "peers: setup failed"
  # Starts no new shape when the last might not end by the deadline.
  step bench env PYTHONPATH="$PYTHONPATH:$peers_site" python3 benchmarks/bench_causal_conv1d.py \
    --json "$log_dir/bench.json" --plot "$log_dir/bench.png" \
    --time-budget $((deadline - SECONDS - 120)) || status=$?
fi
if wants host; then
  step host python3 benchmarks/bench_host_overhead.py --json "$log_dir/host.json" || status=$?
fi
if wants first-call; then
  step first-call python3 benchmarks/first_call.py --json "$log_dir/first-call.json" \
    || status=$?
fi
if wants ab; then
  # The runtime reads an empty CAKE_KERNEL_LIBRARY as unset: the embedded one.
  library_setting() {
    [[ $1 == embedded ]] && echo "CAKE_KERNEL_LIBRARY=" ||
      echo "CAKE_KERNEL_LIBRARY=$(realpath "$1")"
  }
  for i in "${!ab_libraries[@]}"; do
    library=${ab_libraries[$i]}
    step "ab$i-$(basename "$library")" env "$(library_setting "$library")" \
      python3 benchmarks/bench_causal_conv1d.py --quick --no-peers \
      --json "$log_dir/ab$i-$(basename "$library").json" || status=$?
  done
  for i in "${!ab_libraries[@]}"; do
    step "ab$i-tests" env "$(library_setting "${ab_libraries[$i]}")" \
      python3 -m pytest -q -p no:cacheprovider test/python/test_kernels.py -k cuda || status=$?
  done
fi
if wants ncu; then
  # Last: it starts no new shape when the last might not end by the deadline.
  # One forward and backward a shape: ncu replays each launch it profiles.
  step ncu python3 benchmarks/ncu_summary.py --shape all --iters 1 --json "$log_dir/ncu.json" \
    --time-budget $((deadline - SECONDS - 60)) || status=$?
fi
# Each step's verdict once more, last, for whoever keeps only the output's end.
echo "=== summary (logs in $log_dir)"
for name in "${ran[@]}"; do
  verdict=$(grep -E "passed|failed|[0-9] errors?\b|SUMMARY|eager route|target " \
    "$log_dir/$name.log" | tail -n 3 | tr '\n' ' ' || true)
  echo "$name: ${verdict:-(see $name.log)}"
done
exit "$status"

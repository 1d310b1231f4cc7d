#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes the benchmark's peers importable from one folder, offline, from what
# the device call carries (ignored paths, never committed):
#
#   .whl/fla_core-*.whl              fla-core (pure Python; needs torch, triton, einops)
#   .peers/dao/site/                 causal-conv1d built elsewhere by build_dao.py
#   .peers/causal_conv1d-*.tar.gz    its sdist, built here when the above does not import
#
#   benchmarks/peers/setup_peers.sh [SITE]         # SITE defaults to build/peers-site
#   benchmarks/peers/setup_peers.sh --wait [SITE]  # before the benchmark, after a build started
#   PYTHONPATH=SITE:... python3 benchmarks/bench_causal_conv1d.py
#
# The first form installs fla-core and the prebuilt causal-conv1d into SITE
# and checks, in one Python process, that each imports (the prebuilt one only
# when built for this torch). When causal-conv1d does not, it starts building
# it from the sdist in the background (sm_90, into build/peers-dao, log
# build/peers-dao.log; about 6 minutes, the time of one nvcc on
# causal_conv1d_bwd.cu) and returns at once; the --wait form then waits for
# that build (at most SETUP_PEERS_WAIT_S seconds, default 900) and installs it.
# A peer that cannot be had is reported as UNAVAILABLE and left out; the
# script itself does not fail on that, and the benchmark reports it too.
set -uo pipefail

wait_for_build=0
if [[ ${1:-} == --wait ]]; then
  wait_for_build=1
  shift
fi
site=$(realpath -m "${1:-build/peers-site}")
python=${PYTHON:-python3}
dao_build=$(realpath -m build/peers-dao)

say() { echo "setup_peers: $*"; }

# Copies a causal-conv1d site folder (from build_dao.py) into SITE.
add_dao() {
  remove_dao
  [[ -f $1/causal_conv1d_build.json ]] && cp -r "$1"/. "$site"/
}
remove_dao() {
  rm -rf "$site/causal_conv1d" "$site"/causal_conv1d_cuda*.so "$site/causal_conv1d_build.json"
}

# Imports each peer from SITE (torch first) and says what it found. Exits 3
# when causal-conv1d is missing, does not import, or was built for another torch.
check() {
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$python" - "$site" "$@" <<'EOF'
import json, os, sys
import torch

site, peers = sys.argv[1], sys.argv[2:]
dao_ok = True
for peer in peers:
    try:
        if peer == "fla":
            import fla, fla.modules.causal_conv1d, triton
            from fla.backends import GluonBackend
            gluon = "with" if GluonBackend.is_available() else "WITHOUT"
            found = f"fla-core {fla.__version__} (triton {triton.__version__}, {gluon} Gluon backend)"
        else:
            path = os.path.join(site, "causal_conv1d_build.json")
            if not os.path.exists(path):
                raise RuntimeError("no build")
            with open(path) as f:
                built = json.load(f)
            if built["torch"] != torch.__version__:
                raise RuntimeError(f"built for torch {built['torch']}, this is {torch.__version__}")
            import causal_conv1d, causal_conv1d_cuda
            found = f"causal-conv1d {causal_conv1d.__version__} ({built['arch']}, torch {built['torch']})"
        print(f"setup_peers: {peer}: importable, {found}")
    except Exception as error:
        print(f"setup_peers: {peer}: UNAVAILABLE, {type(error).__name__}: {error}")
        dao_ok = dao_ok and peer != "dao"
sys.exit(0 if dao_ok else 3)
EOF
}

mkdir -p "$site"

if ((wait_for_build)); then
  [[ -f $dao_build.started ]] || exit 0 # nothing was started
  limit=$((${SETUP_PEERS_WAIT_S:-900} > 0 ? ${SETUP_PEERS_WAIT_S:-900} : 0))
  start=$SECONDS
  while [[ ! -f $dao_build.status ]] && ((SECONDS - start < limit)); do sleep 2; done
  rm -f "$dao_build.started"
  if [[ ! -f $dao_build.status ]]; then
    say "dao: UNAVAILABLE, its build is still running after $limit s (log $dao_build.log)"
    exit 0
  fi
  say "dao: build finished ($(cat "$dao_build.status")) after waiting $((SECONDS - start)) s"
  add_dao "$dao_build/site"
  if ! check dao; then
    remove_dao
    say "dao: last lines of $dao_build.log:"
    tail -5 "$dao_build.log" | sed 's/^/    /'
  fi
  exit 0
fi

peers=()
wheel=$(ls .whl/fla_core-*.whl 2>/dev/null | sort -V | tail -1)
if [[ -z $wheel ]]; then
  say "fla: UNAVAILABLE, no .whl/fla_core-*.whl (carry .whl)"
elif ! out=$("$python" -m pip install -q --no-deps --no-index --upgrade --target "$site" \
  "$wheel" 2>&1); then
  say "fla: UNAVAILABLE, pip could not install $wheel: $(tail -1 <<<"$out")"
else
  peers+=(fla)
fi
add_dao .peers/dao/site
peers+=(dao)
check "${peers[@]}" && exit 0

remove_dao
sdist=$(ls .peers/causal_conv1d-*.tar.gz 2>/dev/null | sort -V | tail -1)
if [[ -z $sdist ]]; then
  say "dao: UNAVAILABLE, and no .peers/causal_conv1d-*.tar.gz to build it from (carry .peers)"
  exit 0
fi
rm -rf "$dao_build" "$dao_build.status"
mkdir -p "$(dirname "$dao_build")"
touch "$dao_build.started"
# Detached, so that it outlives this script; it writes $dao_build.status last.
setsid bash -c '"$1" benchmarks/peers/build_dao.py "$2" "$3"; echo "exit $?" >"$3.status"' \
  _ "$python" "$sdist" "$dao_build" >"$dao_build.log" 2>&1 </dev/null &
say "dao: building $sdist in the background (log $dao_build.log); run --wait before the benchmark"

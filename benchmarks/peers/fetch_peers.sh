#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a developer's machine (PyPI reachable, no GPU needed): fills the ignored
# folders that a device call carries for the benchmark's peers, from the
# repository root:
#
#   .whl/fla_core-0.6.0-py3-none-any.whl     pip download
#   .peers/causal_conv1d-1.7.0.tar.gz        pip download (the only form PyPI has)
#   .peers/dao/site/                         build_dao.py: the extension for the
#                                            GPU machine's Python 3.12, sm_90
#
#   benchmarks/peers/fetch_peers.sh          # about 7 minutes on 2 cores, niced
#
# Uses the Cake virtual environment's Python and torch (the GPU machine's torch
# version; see scripts/setup.sh) and Python 3.12's headers, found as
# $PY312_INCLUDE or in a pyenv 3.12. Then carry .whl and .peers (with
# build/kernels) in the device call; benchmarks/peers/setup_peers.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/../.."

python=${CAKE_PYTHON:-$HOME/.cache/cake/venv/bin/python}
fla=fla-core==0.6.0
dao=causal-conv1d==1.7.0

include=${PY312_INCLUDE:-}
if [[ -z $include ]]; then
  for candidate in $(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null) \
    $(command -v python3.12 || true); do
    include=$("$candidate" -c 'import sysconfig; print(sysconfig.get_paths()["include"])') &&
      [[ -f $include/Python.h ]] && break
    include=
  done
fi
if [[ ! -f $include/Python.h ]]; then
  echo "fetch_peers: no Python 3.12 headers; set PY312_INCLUDE to the folder of Python.h" >&2
  exit 1
fi

mkdir -p .whl .peers
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform any -d .whl "$fla"
# pip prepares an sdist's metadata even to download it, and causal-conv1d's
# setup.py imports torch (here) and wheel (put on PYTHONPATH for that alone).
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$python" -m pip install -q --target "$tools" wheel
PYTHONPATH=$tools CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE "$python" -m pip download -q --no-deps \
  --no-binary=:all: --no-build-isolation -d .peers "$dao"

sdist=$(ls .peers/causal_conv1d-*.tar.gz | sort -V | tail -1)
built=.peers/dao/site/causal_conv1d_build.json
if "$python" - "$built" "$(basename "$sdist")" <<'EOF' 2>/dev/null; then
import json, sys, torch
built = json.load(open(sys.argv[1]))
sys.exit(not (built["sdist"] == sys.argv[2] and built["torch"] == torch.__version__
              and built["ext_suffix"] == ".cpython-312-x86_64-linux-gnu.so"))
EOF
  echo "fetch_peers: $built is up to date"
else
  nice -n 19 "$python" benchmarks/peers/build_dao.py "$sdist" .peers/dao --jobs 2 \
    --python-include "$include" --ext-suffix .cpython-312-x86_64-linux-gnu.so
fi
du -sh .whl .peers

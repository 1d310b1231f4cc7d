#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Build Dao-AILab causal-conv1d from its sdist into an importable folder.

The sdist's setup.py compiles for ten GPU architectures, first tries to
download a prebuilt wheel (which fails offline with a URLError, not the
HTTPError it catches) and needs the `wheel` package. This script runs the same
compilation itself: nvcc on the three .cu files and the C++ compiler on the
pybind11 binding, with the flags setup.py and torch's BuildExtension would
use, for one architecture, in parallel, then links the extension
causal_conv1d_cuda next to a copy of the package's Python sources:

    OUT/site/causal_conv1d/...
    OUT/site/causal_conv1d_cuda<EXT_SUFFIX>
    OUT/site/causal_conv1d_build.json      (what it was built with)

Put OUT/site on PYTHONPATH. Needs torch (for its headers and libraries: run it
with the Python that has the torch the extension will load into), nvcc and a
C++ compiler. Nothing is downloaded.

The extension can be built on one machine for another Python: pass that
Python's include folder and extension suffix (torch's headers do not depend on
the Python version; its C++ ABI must be the same torch release):

    python benchmarks/peers/build_dao.py .peers/causal_conv1d-1.7.0.tar.gz .peers/dao \\
        --python-include /path/to/include/python3.12 \\
        --ext-suffix .cpython-312-x86_64-linux-gnu.so
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

EXTENSION = "causal_conv1d_cuda"
SOURCES = [
    "csrc/causal_conv1d.cpp",
    "csrc/causal_conv1d_fwd.cu",
    "csrc/causal_conv1d_bwd.cu",
    "csrc/causal_conv1d_update.cu",
]
# setup.py's nvcc flags, less its architecture list, "--threads 4" (which only
# splits work between architectures) and "--ptxas-options=-v" (noise).
SETUP_NVCC_FLAGS = [
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
    "-lineinfo",
]
LIBRARIES = ["c10", "torch", "torch_cpu", "torch_python", "cudart", "c10_cuda", "torch_cuda"]


def extract(sdist: Path, into: Path) -> Path:
    """Unpacks the sdist into `into` and returns its top folder."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(into, filter="data")
    (top,) = into.iterdir()
    return top


def commands(src: Path, objects: Path, args) -> tuple[list[list[str]], list[str]]:
    """(one compile command per source, the link command)."""
    from torch.utils import cpp_extension

    cuda_home = cpp_extension.CUDA_HOME
    if cuda_home is None:
        raise SystemExit("build_dao: no CUDA toolkit found (set CUDA_HOME)")
    includes = [f"-I{src / 'csrc'}"] + [f"-I{p}" for p in cpp_extension.include_paths("cuda")]
    includes.append(f"-I{args.python_include}")
    defines = [f"-DTORCH_EXTENSION_NAME={EXTENSION}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    nvcc_flags = (
        cpp_extension.COMMON_NVCC_FLAGS
        + ["--compiler-options", "-fPIC"]
        + SETUP_NVCC_FLAGS
        + [f"-gencode=arch=compute_{args.arch},code=sm_{args.arch}", "-std=c++17"]
    )
    cxx = os.environ.get("CXX", "c++")
    compiles = []
    for source in SOURCES:
        path = src / source
        obj = objects / (path.name + ".o")
        if path.suffix == ".cu":
            compiles.append(
                [f"{cuda_home}/bin/nvcc", "-c", str(path), "-o", str(obj)]
                + includes
                + defines
                + nvcc_flags
            )
        else:
            compiles.append(
                [cxx, "-c", str(path), "-o", str(obj), "-O3", "-fPIC", "-std=c++17"]
                + includes
                + defines
            )
    link = (
        [cxx, "-shared", "-o", str(objects / (EXTENSION + args.ext_suffix))]
        + [c[c.index("-o") + 1] for c in compiles]
        + [f"-L{p}" for p in cpp_extension.library_paths("cuda")]
        + [f"-l{lib}" for lib in LIBRARIES]
    )
    return compiles, link


def run(command: list[str], log: Path) -> float:
    """Runs command with its output in log; returns seconds, raises on failure."""
    start = time.monotonic()
    with open(log, "w") as f:
        f.write(shlex.join(command) + "\n")
        f.flush()
        result = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise RuntimeError(f"failed ({result.returncode}): {shlex.join(command)}; see {log}")
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sdist", type=Path, help="causal_conv1d-VERSION.tar.gz")
    parser.add_argument("out", type=Path, help="output folder (replaced; src/, obj/, site/)")
    parser.add_argument("--arch", default="90", help="compute capability, digits only (90)")
    parser.add_argument(
        "--python-include",
        default=sysconfig.get_paths()["include"],
        help="Python.h folder of the Python that will import it (default: this one's)",
    )
    parser.add_argument(
        "--ext-suffix",
        default=sysconfig.get_config_var("EXT_SUFFIX"),
        help="extension file suffix of that Python (default: this one's)",
    )
    parser.add_argument("--jobs", type=int, default=len(SOURCES), help="parallel compilers")
    args = parser.parse_args()

    import torch

    out = args.out.resolve()
    if out.exists():
        if set(os.listdir(out)) - {"src", "obj", "site"}:
            raise SystemExit(f"build_dao: {out} holds files it did not write; not replacing it")
        shutil.rmtree(out)
    src = extract(args.sdist.resolve(), out / "src")
    objects = out / "obj"
    objects.mkdir()
    compiles, link = commands(src, objects, args)
    start = time.monotonic()
    # The two large .cu files take minutes each; start them first.
    order = sorted(compiles, key=lambda c: not c[2].endswith(("_fwd.cu", "_bwd.cu")))
    seconds = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            pool.submit(run, c, objects / (Path(c[2]).name + ".log")): Path(c[2]).name
            for c in order
        }
        for future in concurrent.futures.as_completed(futures):
            seconds[futures[future]] = round(future.result(), 1)
            print(f"build_dao: compiled {futures[future]} in {seconds[futures[future]]} s")
    run(link, objects / "link.log")

    site = out / "site"
    site.mkdir()
    shutil.copytree(src / "causal_conv1d", site / "causal_conv1d")
    shutil.copy2(link[link.index("-o") + 1], site)
    with open(site / "causal_conv1d_build.json", "w") as f:
        json.dump(
            {
                "sdist": args.sdist.name,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "arch": f"sm_{args.arch}",
                "python_include": args.python_include,
                "ext_suffix": args.ext_suffix,
                "seconds": seconds,
                "wall_seconds": round(time.monotonic() - start, 1),
                "commands": [shlex.join(c) for c in compiles + [link]],
            },
            f,
            indent=2,
        )
    shutil.rmtree(out / "src")
    shutil.rmtree(objects)
    print(f"build_dao: {site} ({time.monotonic() - start:.0f} s); put it on PYTHONPATH")
    return 0


if __name__ == "__main__":
    sys.exit(main())

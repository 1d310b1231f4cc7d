#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Wall time of a process's first Cake launch, with the cubin and with the PTX.

The first launch in a process loads the kernels into the CUDA context
(docs/kernel-abi.md, "Kernel images"): the embedded sm_90a cubin on compute
capability 9.0, or the PTX, which the driver then compiles. Each measurement
runs in a fresh Python process that imports torch and cake, creates its inputs,
loads the extension and the driver (a support query), synchronizes, then times
the first forward call and a second one, each up to a synchronize:

- cubin: the default on 9.0 (CAKE_KERNEL_IMAGE unset);
- ptx, cold: CAKE_KERNEL_IMAGE=ptx and CUDA_CACHE_DISABLE=1, the JIT every time;
- ptx, cached: CAKE_KERNEL_IMAGE=ptx with a compute cache (CUDA_CACHE_PATH, a
  fresh folder) that a first, untimed process filled: the JIT result reused.

    python benchmarks/first_call.py [--runs N] [--json PATH]

(with cake installed, or PYTHONPATH=python from the source tree). Prints the
median of N processes per mode (default 3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

S, C, DOCS = 4096, 2048, 4

# Runs in the child process; prints one JSON line.
CHILD = f"""
import json, time
import torch
import cake
from cake import _ops

x = torch.randn({S}, {C}, device="cuda").bfloat16()
weight = torch.randn({C}, 4, device="cuda")
bias = torch.randn({C}, device="cuda")
cu = torch.linspace(0, {S}, {DOCS} + 1, device="cuda").int()
assert cake.is_cake_causal_conv1d_train_supported(x.device)
torch.cuda.synchronize()

times = []
for _ in range(2):
    start = time.perf_counter()
    cake.cake_causal_conv1d_train_forward(x, weight, cu, bias=bias)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
image = _ops.require_supported(x.device)[0].load_kernels(torch.cuda.current_device())
print(json.dumps({{"image": image, "first_s": times[0], "second_s": times[1]}}))
"""


def run_child(env_changes: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.pop("CAKE_KERNEL_IMAGE", None)
    env.update(env_changes)
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"child failed ({env_changes}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="processes per mode")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        modes = {
            "cubin": {},
            "ptx, cold": {"CAKE_KERNEL_IMAGE": "ptx", "CUDA_CACHE_DISABLE": "1"},
            "ptx, cached": {"CAKE_KERNEL_IMAGE": "ptx", "CUDA_CACHE_PATH": cache},
        }
        run_child(modes["ptx, cached"])  # fills the cache
        results = {}
        for name, env in modes.items():
            runs = [run_child(env) for _ in range(args.runs)]
            results[name] = {
                "image": runs[0]["image"],
                "env": env if name != "ptx, cached" else {**env, "CUDA_CACHE_PATH": "<fresh>"},
                "first_ms": [r["first_s"] * 1e3 for r in runs],
                "second_ms": [r["second_s"] * 1e3 for r in runs],
            }

    import torch  # only for the device's name, after the children ran

    print(f"first forward call of a process (x [{S}, {C}] bf16), median of {args.runs}:")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'mode':<12} {'image':<6} {'first call (ms)':>16} {'second call (ms)':>17}")
    for name, r in results.items():
        first, second = statistics.median(r["first_ms"]), statistics.median(r["second_ms"])
        print(f"{name:<12} {r['image']:<6} {first:>16.1f} {second:>17.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measure the host time per call of Cake's Python entry points against one aten op.

At a shape small enough that the GPU finishes each launch before the host issues the
next one (default S = 512, C = 256, 4 documents), each case runs `--warmup` calls,
then `--calls` calls timed with the wall clock and a single synchronize at the end.
Two numbers per case: host us/call (the loop alone: what Python, the checks and the
launches cost the CPU) and wall us/call (the loop plus the final synchronize; higher
than host only when the GPU, not the host, is the limit). The reference is
`y.add_(0)`, one aten op on the same tensor, measured in the same run.

    python benchmarks/bench_host_overhead.py [--S 512] [--C 256] [--calls 2000] [--json PATH]

(with cake installed, or PYTHONPATH=python from the source tree).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import time
from collections.abc import Callable

import cake
import torch


def cases(S: int, C: int, docs: int) -> list[tuple[str, Callable[[], object]]]:
    """(name, one call) for each case, all on the same inputs."""
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(S, C, generator=gen, device=dev).to(torch.bfloat16)
    dy = torch.randn(S, C, generator=gen, device=dev).to(torch.bfloat16)
    w = torch.randn(C, 4, generator=gen, device=dev) * 0.5
    b = torch.randn(C, generator=gen, device=dev) * 0.5
    cu = torch.linspace(0, S, docs + 1, device=dev).round().to(torch.int32)
    y, dx, dw, db = (torch.empty_like(t) for t in (x, x, w, b))
    workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, dev)
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]

    def autograd_forward():
        return cake.cake_causal_conv1d(leaves[0], leaves[1], cu, leaves[2])

    # autograd.grad rather than backward(): no .grad accumulation in the loop.
    def autograd_step():
        torch.autograd.grad(autograd_forward(), leaves, dy)

    def aten_silu_step():
        torch.autograd.grad(torch.nn.functional.silu(leaves[0]), leaves[0], dy)

    return [
        ("aten y.add_(0)", lambda: y.add_(0)),
        (
            "cake forward, out given",
            lambda: cake.cake_causal_conv1d_train_forward(x, w, cu, bias=b, out=y),
        ),
        (
            "cake forward, allocating",
            lambda: cake.cake_causal_conv1d_train_forward(x, w, cu, bias=b),
        ),
        (
            "cake backward, workspace and outputs given",
            lambda: cake.cake_causal_conv1d_train_backward(
                x, w, cu, dy, bias=b, workspace=workspace, dx=dx, dweight=dw, dbias=db
            ),
        ),
        (
            "cake backward, allocating",
            lambda: cake.cake_causal_conv1d_train_backward(x, w, cu, dy, bias=b),
        ),
        ("cake_causal_conv1d forward (requires_grad)", autograd_forward),
        ("cake_causal_conv1d forward + backward (autograd)", autograd_step),
        ("aten silu forward + backward (autograd)", aten_silu_step),
    ]


def time_case(fn: Callable[[], object], warmup: int, calls: int) -> tuple[float, float]:
    """(host us/call, wall us/call)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = time.perf_counter() - start
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    return host / calls * 1e6, wall / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--S", type=int, default=512, help="tokens (default 512)")
    parser.add_argument("--C", type=int, default=256, help="channels (default 256)")
    parser.add_argument("--docs", type=int, default=4, help="documents (default 4)")
    parser.add_argument("--warmup", type=int, default=200, help="calls before timing")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per case")
    parser.add_argument("--repeats", type=int, default=3, help="timed loops per case; best kept")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_host_overhead: needs a CUDA device", file=sys.stderr)
        return 1

    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable] + sys.argv),
        "shape": {"S": args.S, "C": args.C, "docs": args.docs},
        "timing": f"{args.warmup} warm-up calls, then the best of {args.repeats} loops of "
        f"{args.calls} calls with one synchronize at the end",
    }
    for key, value in meta.items():
        print(f"{key}: {value}")
    results = {}
    for name, fn in cases(args.S, args.C, args.docs):
        runs = [time_case(fn, args.warmup, args.calls) for _ in range(args.repeats)]
        host, wall = min(runs, key=lambda r: r[1])
        results[name] = {"host_us": host, "wall_us": wall}

    aten = results["aten y.add_(0)"]["host_us"]
    print()
    print("| case | host us/call | wall us/call | host / aten add_ |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['host_us']:.1f} | {r['wall_us']:.1f} | {r['host_us'] / aten:.1f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

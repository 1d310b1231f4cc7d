#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time Cake's host kernels against the plain PyTorch formula on the CPU.

For each shape (packed x bf16 [S, C], fp32 weight [C, 4] and bias [C], SiLU, random
document lengths from a fixed seed) it times the forward, and the forward + backward,
of both, as medians of wall-clock repetitions:

- Cake: ``cake_causal_conv1d_train_forward`` / ``_backward`` on CPU tensors (the host
  kernels, on every core; buffers and workspace preallocated);
- PyTorch: the op written as a user would without Cake, in float32 on ATen's CPU
  kernels (torch's threads): each tap a shifted copy of x masked at document starts,
  bias, SiLU, cast to bf16; the backward by autograd through that formula.

The two agree to bf16 rounding (checked once per shape). Effective bandwidth counts
the minimum traffic, as benchmarks/bench_causal_conv1d.py does: forward 4 bytes per
element, forward + backward 10.

    python benchmarks/bench_cpu.py [--shapes 16384x2048x16,...] [--reps 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable

import cake
import torch
import torch.nn.functional as F
from shapes import parse_shapes

SHAPES = [(4096, 1024, 4), (16384, 2048, 16), (32768, 4096, 64)]
WIDTH = 4
SEED = 0


def make_inputs(S: int, C: int, docs: int):
    gen = torch.Generator().manual_seed(SEED)
    cuts = torch.randint(0, S + 1, (docs - 1,), generator=gen).sort().values
    cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([S])]).to(torch.int32)
    x = torch.randn(S, C, generator=gen).to(torch.bfloat16)
    dy = torch.randn(S, C, generator=gen).to(torch.bfloat16)
    weight = torch.randn(C, WIDTH, generator=gen) * 0.5
    bias = torch.randn(C, generator=gen) * 0.5
    return x, weight, bias, cu, dy


def torch_formula(x, weight, bias, cu_seqlens):
    """y[t] = silu(bias + sum_k weight[:, k] * x[t - 3 + k]), taps before t's document
    start read as 0 (SPEC.md), in float32, as bf16."""
    S = x.shape[0]
    doc = torch.searchsorted(cu_seqlens[1:], torch.arange(S), right=True)
    start = cu_seqlens[doc].unsqueeze(1)
    rows = torch.arange(S).unsqueeze(1)
    xf = x.float()
    pre = bias + weight[:, WIDTH - 1] * xf
    for shift in range(1, WIDTH):
        shifted = F.pad(xf[:-shift], (0, 0, shift, 0)) * (rows - shift >= start)
        pre = pre + weight[:, WIDTH - 1 - shift] * shifted
    return F.silu(pre).to(torch.bfloat16)


def median_seconds(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm-up: first-touch of buffers, lazy init
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_shape(S: int, C: int, docs: int, reps: int) -> dict:
    x, weight, bias, cu, dy = make_inputs(S, C, docs)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    dweight, dbias = torch.empty_like(weight), torch.empty_like(bias)
    workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, "cpu")

    def cake_forward():
        cake.cake_causal_conv1d_train_forward(x, weight, cu, bias=bias, out=y)

    def cake_step():
        cake_forward()
        cake.cake_causal_conv1d_train_backward(
            x, weight, cu, dy, bias=bias, workspace=workspace, dx=dx, dweight=dweight, dbias=dbias
        )

    leaves = [t.detach().requires_grad_() for t in (x, weight, bias)]

    def torch_forward():
        with torch.no_grad():
            return torch_formula(x, weight, bias, cu)

    def torch_step():
        torch.autograd.grad(torch_formula(leaves[0], leaves[1], leaves[2], cu), leaves, dy)

    cake_forward()
    want = torch_forward()
    torch.testing.assert_close(y.float(), want.float(), rtol=2**-7, atol=2**-7)

    elements = S * C
    row = {"S": S, "C": C, "docs": docs}
    for name, fn, bytes_per_element in (
        ("cake_fwd", cake_forward, 4),
        ("torch_fwd", torch_forward, 4),
        ("cake_fwd_bwd", cake_step, 10),
        ("torch_fwd_bwd", torch_step, 10),
    ):
        seconds = median_seconds(fn, reps)
        row[name + "_ms"] = seconds * 1e3
        row[name + "_gbps"] = bytes_per_element * elements / seconds / 1e9
    row["fwd_speedup"] = row["torch_fwd_ms"] / row["cake_fwd_ms"]
    row["fwd_bwd_speedup"] = row["torch_fwd_bwd_ms"] / row["cake_fwd_bwd_ms"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes",
        type=lambda text: parse_shapes(text, SHAPES),
        default=SHAPES,
        help="SxCxDOCS,... or all (default)",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if not cake.is_cake_causal_conv1d_train_supported("cpu"):
        print("bench_cpu: this CPU cannot run the host kernels", file=sys.stderr)
        return 1

    record = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join([os.path.basename(sys.executable), *sys.argv]),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "results": [],
    }
    print(f"{record['cores']} cores, torch {record['torch']} on {record['torch_threads']} threads")
    print(
        f"{'S x C, docs':>20} | {'fwd ms cake / torch':>20} {'x':>6} | "
        f"{'fwd+bwd ms cake / torch':>24} {'x':>6} | cake GB/s fwd, fwd+bwd"
    )
    for S, C, docs in args.shapes:
        row = bench_shape(S, C, docs, args.reps)
        record["results"].append(row)
        print(
            f"{f'{S} x {C}, {docs}':>20} | "
            f"{row['cake_fwd_ms']:9.2f} / {row['torch_fwd_ms']:8.2f} {row['fwd_speedup']:5.1f}x | "
            f"{row['cake_fwd_bwd_ms']:11.2f} / {row['torch_fwd_bwd_ms']:10.2f} "
            f"{row['fwd_bwd_speedup']:5.1f}x | "
            f"{row['cake_fwd_gbps']:.1f}, {row['cake_fwd_bwd_gbps']:.1f}"
        )
    if args.json:
        with open(args.json, "w") as file:
            json.dump(record, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

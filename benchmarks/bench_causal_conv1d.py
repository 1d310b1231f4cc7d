#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmark Cake's causal conv1d kernels against a same-run copy and the peers.

For each shape (packed x bf16 [S, C], fp32 weight [C, 4] and bias [C], SiLU, random
document lengths from a fixed seed) it times, with CUDA events (median after warm-up,
L2 flushed before each rep): a device-to-device copy of x, Cake's forward and backward
(both kernels; preallocated workspace and outputs), and each peer that imports (Dao
causal-conv1d, also in its deterministic mode; FLA's Triton kernels). Peers' backward
is timed as a user runs it: torch.autograd.grad on a retained graph.

Effective bandwidth counts the minimum traffic: forward 4 bytes per element (read x,
write y), backward 6 (read x and dy, write dx); copy 4 (read + write x).

    python benchmarks/bench_causal_conv1d.py [--quick] [--json PATH]

(with cake installed, or PYTHONPATH=python from the source tree).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import shlex
import statistics
import sys
from collections.abc import Callable

import cake
import torch

SHAPES = [
    (4096, 2048, 2),
    (16384, 4096, 8),
    (32768, 5376, 16),
    (65536, 8192, 64),
    (32768, 4096, 512),
]
BYTES_PER_ELEMENT = {"copy": 4, "fwd": 4, "bwd": 6}
SEED = 0
L2_FLUSH_BYTES = 256 << 20


def make_timer(quick: bool) -> tuple[str, Callable[[Callable[[], object]], float]]:
    """(description, fn -> median milliseconds)."""
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    if do_bench is not None:
        warmup, rep = (5, 20) if quick else (25, 200)
        return (
            f"triton.testing.do_bench(warmup={warmup} ms, rep={rep} ms, median)",
            lambda fn: do_bench(fn, warmup=warmup, rep=rep, return_mode="median"),
        )
    warmup, reps = (3, 10) if quick else (10, 100)
    return f"CUDA events, {warmup} warm-up calls, median of {reps}", lambda fn: _event_median(
        fn, warmup, reps
    )


def _event_median(fn: Callable[[], object], warmup: int, reps: int) -> float:
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        fn()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for start, end in events:
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def make_inputs(S: int, C: int, docs: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(SEED)
    cuts = torch.randint(0, S + 1, (docs - 1,), generator=gen).sort().values
    cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([S])])
    lengths = cu[1:] - cu[:-1]
    dev = torch.Generator(device="cuda").manual_seed(SEED)

    def randn(*shape, dtype, scale=1.0):
        return torch.randn(*shape, generator=dev, device="cuda", dtype=dtype) * scale

    return dict(
        x=randn(S, C, dtype=torch.bfloat16),
        weight=randn(C, 4, dtype=torch.float32, scale=0.5),
        bias=randn(C, dtype=torch.float32, scale=0.5),
        dy=randn(S, C, dtype=torch.bfloat16),
        cu_seqlens=cu.to(device="cuda", dtype=torch.int32),
        # Dao's kernels take the document index of each token instead of cu_seqlens.
        seq_idx=torch.repeat_interleave(torch.arange(docs, dtype=torch.int32), lengths)
        .unsqueeze(0)
        .cuda(),
    )


def copy_op(a):
    out = torch.empty_like(a["x"])
    return {"copy": lambda: out.copy_(a["x"])}


def cake_ops(a):
    x, w, b, cu, dy = a["x"], a["weight"], a["bias"], a["cu_seqlens"], a["dy"]
    S, C = x.shape
    y, dx, dw, db = (torch.empty_like(t) for t in (x, x, w, b))
    workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, x.device)
    return {
        "fwd": lambda: cake.cake_causal_conv1d_train_forward(x, w, cu, bias=b, out=y),
        "bwd": lambda: cake.cake_causal_conv1d_train_backward(
            x, w, cu, dy, bias=b, workspace=workspace, dx=dx, dweight=dw, dbias=db
        ),
    }


def _autograd_ops(forward: Callable, x, w, b, dy):
    """fwd without autograd, and bwd as torch.autograd.grad on one retained graph."""
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    y = forward(*leaves)

    def fwd():
        with torch.no_grad():
            forward(x, w, b)

    return {"fwd": fwd, "bwd": lambda: torch.autograd.grad(y, leaves, dy, retain_graph=True)}


def dao_ops(a):
    from causal_conv1d import causal_conv1d_fn

    # Channel-last [1, C, S] views of the packed [S, C] tensors.
    x, dy = a["x"].t().unsqueeze(0), a["dy"].t().unsqueeze(0)
    return _autograd_ops(
        lambda x, w, b: causal_conv1d_fn(x, w, b, seq_idx=a["seq_idx"], activation="silu"),
        x,
        a["weight"],
        a["bias"],
        dy,
    )


def fla_ops(a):
    from fla.modules.conv import causal_conv1d

    return _autograd_ops(
        lambda x, w, b: causal_conv1d(
            x=x, weight=w, bias=b, activation="silu", cu_seqlens=a["cu_seqlens"]
        )[0],
        a["x"].unsqueeze(0),
        a["weight"],
        a["bias"],
        a["dy"].unsqueeze(0),
    )


@contextlib.contextmanager
def deterministic(enabled: bool):
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(enabled)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


# (column name, builder, deterministic mode)
IMPLEMENTATIONS = [
    ("Cake", cake_ops, False),
    ("Dao", dao_ops, False),
    ("Dao deterministic", dao_ops, True),
    ("FLA Triton", fla_ops, False),
]


def availability(peers: bool) -> dict[str, str | None]:
    """Implementation name -> None when usable, else why not."""
    why = {}
    try:  # fails, saying why, when the device or the extension cannot run Cake
        cake.cake_causal_conv1d_train_backward_workspace_bytes(0, 8, "cuda")
    except RuntimeError as error:
        why["Cake"] = f"not supported ({error})"
    for name, module in (("Dao", "causal_conv1d"), ("FLA Triton", "fla.modules.conv")):
        if not peers:
            why[name] = "left out (--no-peers)"
            continue
        try:
            __import__(module)
        except Exception as error:  # a peer may fail to import in many ways
            why[name] = f"not importable ({type(error).__name__}: {error})"
    why["Dao deterministic"] = why.get("Dao")
    return {name: why.get(name) for name, _, _ in IMPLEMENTATIONS}


def measure(S: int, C: int, docs: int, timer, usable) -> dict:
    a = make_inputs(S, C, docs)
    elements = S * C

    def record(ms: float, kind: str, copy_gbps: float | None) -> dict:
        gbps = BYTES_PER_ELEMENT[kind] * elements / (ms * 1e-3) / 1e9
        return {
            "median_ms": ms,
            "GBps": gbps,
            "pct_of_copy": None if copy_gbps is None else 100 * gbps / copy_gbps,
        }

    copy = record(timer(copy_op(a)["copy"]), "copy", None)
    row = {"S": S, "C": C, "docs": docs, "copy": copy, "ops": {}, "errors": {}}
    for name, build, det in IMPLEMENTATIONS:
        if usable[name] is not None:
            continue
        try:
            with deterministic(det):
                for kind, fn in build(a).items():
                    row["ops"][f"{name} {kind}"] = record(timer(fn), kind, copy["GBps"])
        except Exception as error:  # keep measuring the others; the table says n/a
            row["errors"][name] = f"{type(error).__name__}: {error}"
    return row


def markdown(rows: list[dict], usable) -> str:
    columns = [f"{name} {kind}" for name, _, _ in IMPLEMENTATIONS for kind in ("fwd", "bwd")]
    header = "| S x C, docs | copy GB/s | " + " | ".join(columns) + " |"
    rule = "|" + "---|" * (len(columns) + 2)
    lines = ["Effective GB/s (% of the same-run copy):", "", header, rule]
    for r in rows:
        cells = [
            f"{r['ops'][c]['GBps']:.0f} ({r['ops'][c]['pct_of_copy']:.0f}%)"
            if c in r["ops"]
            else "n/a"
            for c in columns
        ]
        lines.append(
            f"| {r['S']} x {r['C']}, {r['docs']} | {r['copy']['GBps']:.0f} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "Median times (us):", "", header.replace("copy GB/s", "copy"), rule]
    for r in rows:
        cells = [
            f"{r['ops'][c]['median_ms'] * 1e3:.1f}" if c in r["ops"] else "n/a" for c in columns
        ]
        lines.append(
            f"| {r['S']} x {r['C']}, {r['docs']} | {r['copy']['median_ms'] * 1e3:.1f} | "
            + " | ".join(cells)
            + " |"
        )
    notes = [f"- {name}: {why}" for name, why in usable.items() if why is not None]
    notes += [
        f"- {name} failed at {r['S']} x {r['C']}: {error}"
        for r in rows
        for name, error in r["errors"].items()
    ]
    return "\n".join(lines + ([""] + notes if notes else []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer warm-up and timed reps")
    parser.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    parser.add_argument(
        "--no-peers", action="store_true", help="time Cake and the copy only (tuning runs)"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_causal_conv1d: needs a CUDA device", file=sys.stderr)
        return 1

    timing, timer = make_timer(args.quick)
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable] + sys.argv),
        "timing": timing,
    }
    for key, value in meta.items():
        print(f"{key}: {value}")
    usable = availability(peers=not args.no_peers)
    rows = [measure(S, C, docs, timer, usable) for S, C, docs in SHAPES]
    print()
    print(markdown(rows, usable))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "unavailable": usable, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measure the host time per call of Cake's Python entry points against one aten op.

At a shape small enough that the GPU finishes each launch before the host issues the
next one (default S = 512, C = 256, 4 documents), each case runs `--warmup` calls,
then `--calls` calls timed with the wall clock and a single synchronize at the end.
Two numbers per case: host us/call (the loop alone: what Python, the checks and the
launches cost the CPU) and wall us/call (the loop plus the final synchronize; higher
than host only when the GPU, not the host, is the limit). The reference is
`y.add_(0)`, one aten op on the same tensor, measured in the same run; the targets of
issue 9 (docs/host-overhead.md) are checked against the host numbers.

Cake's cases run on each eager route there is (docs/host-overhead.md): "torch_ops"
(the C++ route, cake._torch_ops, when loaded) and "python" (the plans and direct
launches); the targets are checked for each. A breakdown per route then says where
the allocating backward's time goes: the launches alone (cake._C.backward with every
buffer given), the route's own checks and calls, the outputs' and the workspace's
allocations (each from a case that gives the other buffers).

    python benchmarks/bench_host_overhead.py [--S 512] [--C 256] [--calls 2000] [--json PATH]
    python benchmarks/bench_host_overhead.py --cpu --S 0   # no GPU: CPU-side, real host path
    python benchmarks/bench_host_overhead.py --mock-launch  # no GPU: the Python route alone

(with cake installed, or PYTHONPATH=python from the source tree). ``--cpu`` runs on
CPU tensors with the real host kernels, both routes: with ``--S 0`` the kernels do
next to nothing (the backward's reduce writes zeros), so it measures what each route
costs the CPU around a launch. ``--mock-launch`` runs on CPU tensors with cake._C's
launches replaced by no-ops: the Python route's own side (plans, checks,
allocations, autograd) without the launches; the C++ route, which calls the runtime
itself, is not run. Either is a CPU-side estimate, not a GPU result; the aten
reference then runs on the CPU too.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import shlex
import sys
import time
from collections.abc import Callable

import cake
import torch
from cake import _ops

#: Issue 9's targets, host us per call on the H200 (S = 512, C = 256), by case.
TARGETS = {
    "cake forward, allocating": 12.0,
    "cake backward, allocating": 15.0,
    "cake_causal_conv1d forward + backward (autograd)": 45.0,
}


class NoLaunch:
    """Stands in for cake._C under --mock-launch: the launches do nothing."""

    @staticmethod
    def forward(*args):
        pass

    @staticmethod
    def backward(*args):
        pass

    @staticmethod
    def backward_workspace_bytes(channels, device_index):
        return channels * 5 * 8 * 132  # H200's size: 132 parts of fp64 partial rows

    # The manifest's rules, which need no launch.
    @staticmethod
    def alignments(*args):
        return importlib.import_module("cake._C").alignments(*args)

    @staticmethod
    def launch_contract():
        return importlib.import_module("cake._C").launch_contract()


def mock_launches() -> None:
    """Every device "supported" by NoLaunch, on a stream handle of 0."""
    _ops._load_extension = lambda: (NoLaunch, "")
    _ops._target = lambda device: (None, 0, lambda: 0)


#: The cases that do not call Cake: timed once, not per route.
REFERENCES = (
    "aten y.add_(0)",
    "aten add_(0), 8 elements",
    "custom op cake::causal_conv1d_fwd",
    "aten silu forward + backward (autograd)",
    "launch alone: cake._C.forward",
    "launch alone: cake._C.backward",
    "C++ route alone: cake._torch_ops.backward, all given",
    "C++ route alone: cake._torch_ops.backward, allocating",
)

#: The C++ route's module, whichever route the loop below makes active.
TORCH_OPS = _ops.torch_ops


def cases(
    S: int, C: int, docs: int, dev: torch.device, cpp_route: bool
) -> list[tuple[str, Callable[[], object]]]:
    """(name, one call) for each case, all on the same inputs; with ``cpp_route``, also
    cake._torch_ops called directly."""
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

    # The runtime's launches with the pointers ready: what no route can save.
    extension, index = _ops.require_supported(dev)
    stream = _ops._target(dev)[2]
    pointers = [t.data_ptr() for t in (x, w, cu, b)]
    dtypes = ("f32", "f32")

    def launch_forward():
        extension.forward(*pointers, y.data_ptr(), S, C, docs, *dtypes, index, stream())

    def launch_backward():
        extension.backward(
            *pointers, dy.data_ptr(), dx.data_ptr(), dw.data_ptr(), db.data_ptr(),
            workspace.data_ptr(), S, C, docs, *dtypes, "bf16", index, stream(),
        )  # fmt: skip

    # The C++ route without the Python function around it (its eager() check).
    def torch_ops_backward(*buffers):
        assert TORCH_OPS.backward(x, w, cu, dy, b, "bf16", *buffers) is not None

    small = torch.zeros(8, device=dev)
    direct = []
    if cpp_route:
        direct = [
            (
                "C++ route alone: cake._torch_ops.backward, all given",
                lambda: torch_ops_backward(workspace, dx, dw, db),
            ),
            (
                "C++ route alone: cake._torch_ops.backward, allocating",
                lambda: torch_ops_backward(None, None, None, None),
            ),
        ]
    return [
        ("aten y.add_(0)", lambda: y.add_(0)),
        # The dispatch alone: on the CPU (--mock-launch) y.add_(0) computes for a while.
        ("aten add_(0), 8 elements", lambda: small.add_(0)),
        (
            "cake forward, out given",
            lambda: cake.cake_causal_conv1d_train_forward(x, w, cu, bias=b, out=y),
        ),
        (
            "cake forward, allocating",
            lambda: cake.cake_causal_conv1d_train_forward(x, w, cu, bias=b),
        ),
        # The route under torch.compile, called eagerly: what the dispatcher costs.
        (
            "custom op cake::causal_conv1d_fwd",
            lambda: torch.ops.cake.causal_conv1d_fwd(x, w, cu, b),
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
        # The two halves of what allocating adds, for the breakdown.
        (
            "cake backward, workspace given",
            lambda: cake.cake_causal_conv1d_train_backward(
                x, w, cu, dy, bias=b, workspace=workspace
            ),
        ),
        (
            "cake backward, outputs given",
            lambda: cake.cake_causal_conv1d_train_backward(
                x, w, cu, dy, bias=b, dx=dx, dweight=dw, dbias=db
            ),
        ),
        ("cake_causal_conv1d forward (requires_grad)", autograd_forward),
        ("cake_causal_conv1d forward + backward (autograd)", autograd_step),
        ("aten silu forward + backward (autograd)", aten_silu_step),
        ("launch alone: cake._C.forward", launch_forward),
        ("launch alone: cake._C.backward", launch_backward),
    ] + direct


def time_case(
    fn: Callable[[], object], warmup: int, calls: int, sync: Callable[[], None]
) -> tuple[float, float]:
    """(host us/call, wall us/call)."""
    for _ in range(warmup):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = time.perf_counter() - start
    sync()
    wall = time.perf_counter() - start
    return host / calls * 1e6, wall / calls * 1e6


def backward_breakdown(results: dict, routes: dict) -> dict[str, dict[str, float]]:
    """Where the allocating backward's host time goes, per route, by differences of
    the cases above (each a best of loops, so a part may come out slightly off)."""
    launches = results.get("launch alone: cake._C.backward", {}).get("host_us")
    breakdown = {}
    for route in routes:
        cases_ = ("workspace and outputs given", "allocating", "workspace given", "outputs given")
        us = {case: results[f"cake backward, {case} [{route}]"]["host_us"] for case in cases_}
        given = us["workspace and outputs given"]
        parts = {}
        if launches is not None:
            parts["cake._C.backward: pybind11, runtime, two launches"] = launches
            parts["the route's checks and calls around it (all given - the above)"] = (
                given - launches
            )
        else:
            parts["all given"] = given
        alone = results.get("C++ route alone: cake._torch_ops.backward, all given")
        if route == "torch_ops" and alone is not None:
            alone = alone["host_us"]
            parts["  of which the Python function around cake._torch_ops (all given)"] = (
                given - alone
            )
        parts["allocating dx, dweight, dbias (workspace given - all given)"] = (
            us["workspace given"] - given
        )
        parts["allocating the workspace (outputs given - all given)"] = us["outputs given"] - given
        parts["total, allocating"] = us["allocating"]
        breakdown[route] = parts
    return breakdown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--S", type=int, default=512, help="tokens (default 512)")
    parser.add_argument("--C", type=int, default=256, help="channels (default 256)")
    parser.add_argument("--docs", type=int, default=4, help="documents (default 4)")
    parser.add_argument("--warmup", type=int, default=200, help="calls before timing")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per case")
    parser.add_argument("--repeats", type=int, default=3, help="timed loops per case; best kept")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="CPU tensors, the real host kernels: a CPU-side estimate, not a GPU result",
    )
    parser.add_argument(
        "--mock-launch",
        action="store_true",
        help="CPU tensors, launches replaced by no-ops, the Python route only: a CPU-side "
        "estimate, not a GPU result",
    )
    args = parser.parse_args()
    routes = {"torch_ops": _ops.torch_ops, "python": None}
    if routes["torch_ops"] is None or args.mock_launch:
        del routes["torch_ops"]
    if args.mock_launch:
        mock_launches()
        dev, sync = torch.device("cpu"), lambda: None
        machine = "no GPU: CPU-side estimate, launches replaced by no-ops (--mock-launch)"
    elif args.cpu:
        dev, sync = torch.device("cpu"), lambda: None
        machine = "no GPU: CPU-side estimate, host kernels (--cpu)"
    elif torch.cuda.is_available():
        dev, sync = torch.device("cuda"), torch.cuda.synchronize
        machine = torch.cuda.get_device_name()
    else:
        print("bench_host_overhead: needs a CUDA device (or --mock-launch)", file=sys.stderr)
        return 1

    meta = {
        "gpu": machine,
        "torch": torch.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable] + sys.argv),
        "eager route": "{} ({})".format(*_ops.eager_route()),
        "shape": {"S": args.S, "C": args.C, "docs": args.docs},
        "timing": f"{args.warmup} warm-up calls, then the best of {args.repeats} loops of "
        f"{args.calls} calls with one synchronize at the end",
    }
    for key, value in meta.items():
        print(f"{key}: {value}")
    results, active = {}, _ops.torch_ops
    for route, extension in routes.items():
        _ops.torch_ops = extension
        for name, fn in cases(args.S, args.C, args.docs, dev, "torch_ops" in routes):
            if name in REFERENCES and name in results:
                continue
            runs = [time_case(fn, args.warmup, args.calls, sync) for _ in range(args.repeats)]
            host, wall = min(runs, key=lambda r: r[1])
            key = name if name in REFERENCES else f"{name} [{route}]"
            results[key] = {"host_us": host, "wall_us": wall}
    _ops.torch_ops = active

    aten = results["aten y.add_(0)"]["host_us"]
    print()
    print("| case [route] | host us/call | wall us/call | host / aten add_ |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['host_us']:.1f} | {r['wall_us']:.1f} | {r['host_us'] / aten:.1f}x |")
    breakdown = backward_breakdown(results, routes)
    if breakdown:
        print()
        for route, parts in breakdown.items():
            print(f"backward, allocating [{route}], host us/call:")
            for part, us in parts.items():
                print(f"  {us:6.1f}  {part}")
    targets = {
        f"{name} [{route}]": {
            "target_us": limit,
            "host_us": results[f"{name} [{route}]"]["host_us"],
        }
        for route in routes
        for name, limit in TARGETS.items()
    }
    print()
    cpu_side = args.mock_launch or args.cpu
    for name, t in targets.items():
        verdict = "met" if t["host_us"] <= t["target_us"] else "MISSED"
        suffix = " (CPU-side estimate, not the H200 result)" if cpu_side else ""
        print(f"target {name}: <= {t['target_us']:.0f} us, {t['host_us']:.1f}: {verdict}{suffix}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"meta": meta, "results": results, "targets": targets, "breakdown": breakdown},
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

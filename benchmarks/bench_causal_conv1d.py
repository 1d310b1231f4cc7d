#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmark Cake's causal conv1d kernels against a same-run copy and the peers.

For each shape (packed x bf16 [S, C], fp32 weight [C, 4] and bias [C], SiLU, random
document lengths from a fixed seed) it times, with triton.testing.do_bench (median
after warm-up, L2 flushed before each rep; CUDA events where triton is missing): a
device-to-device copy of x, Cake's forward and backward (both kernels; preallocated
workspace and outputs), and each peer that imports: Dao causal-conv1d in its default
and its deterministic mode (torch.use_deterministic_algorithms(True)), and fla-core's
Triton and Gluon (FLA_GLUON=1) kernels. Peers' backward is timed as a user runs it:
torch.autograd.grad on a retained graph. A peer that does not import is reported as
unavailable. Each peer's y, dx and dweight are also compared with Cake's once per shape.
While each op is timed, nvidia-smi samples the SM clock, power and clock limits
(gpu_clocks.py): the record keeps them per op, and a table shows them for the copy and
Cake.

Effective bandwidth counts the minimum traffic: forward 4 bytes per element (read x,
write y), backward 6 (read x and dy, write dx); copy 4 (read + write x).

    python benchmarks/bench_causal_conv1d.py [--quick] [--shapes 16384x4096x8,...]
        [--impls cake,fla-gluon | --no-peers] [--json PATH] [--plot PATH]
    python benchmarks/bench_causal_conv1d.py --from-json PATH [--plot PATH]   # no GPU

(with cake installed, or PYTHONPATH=python from the source tree; the peers from
PYTHONPATH too, see benchmarks/peers/setup_peers.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import torch
from gpu_clocks import ClockTrace
from shapes import SHAPES, parse_shapes, shape_label, within_budget

BYTES_PER_ELEMENT = {"copy": 4, "fwd": 4, "bwd": 6}
KINDS = ("fwd", "bwd")
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


# An implementation's ops: "fwd" and "bwd" (timed), and "result", which returns
# (y, dx, dweight, dbias) as [S, C], [S, C], [C, 4], [C] tensors for the check.
Ops = dict[str, Callable[[], object]]


def copy_op(a) -> Callable[[], object]:
    out = torch.empty_like(a["x"])
    return lambda: out.copy_(a["x"])


def cake_ops(a, api) -> Ops:
    """Cake's eager API (`api` is the cake module, or any object with its functions)."""
    x, w, b, cu, dy = a["x"], a["weight"], a["bias"], a["cu_seqlens"], a["dy"]
    S, C = x.shape
    y, dx, dw, db = (torch.empty_like(t) for t in (x, x, w, b))
    workspace = api.cake_causal_conv1d_train_backward_workspace(S, C, x.device)

    def fwd():
        api.cake_causal_conv1d_train_forward(x, w, cu, bias=b, out=y)

    def bwd():
        api.cake_causal_conv1d_train_backward(
            x, w, cu, dy, bias=b, workspace=workspace, dx=dx, dweight=dw, dbias=db
        )

    def result():
        fwd()
        bwd()
        return y, dx, dw, db

    return {"fwd": fwd, "bwd": bwd, "result": result}


def _autograd_ops(forward: Callable, x, w, b, dy, to_rows: Callable) -> Ops:
    """fwd without autograd, and bwd as torch.autograd.grad on one retained graph.
    to_rows maps the peer's layout of y and dx back to [S, C]."""
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    y = forward(*leaves)

    def fwd():
        with torch.no_grad():
            forward(x, w, b)

    def bwd():
        return torch.autograd.grad(y, leaves, dy, retain_graph=True)

    def result():
        dx, dw, db = bwd()
        return to_rows(y.detach()), to_rows(dx), dw, db

    return {"fwd": fwd, "bwd": bwd, "result": result}


def dao_ops(a) -> Ops:
    from causal_conv1d import causal_conv1d_fn

    # Channel-last [1, C, S] views of the packed [S, C] tensors.
    x, dy = a["x"].t().unsqueeze(0), a["dy"].t().unsqueeze(0)
    return _autograd_ops(
        lambda x, w, b: causal_conv1d_fn(x, w, b, seq_idx=a["seq_idx"], activation="silu"),
        x,
        a["weight"],
        a["bias"],
        dy,
        lambda t: t.squeeze(0).t(),
    )


def fla_ops(a) -> Ops:
    from fla.modules.causal_conv1d import causal_conv1d

    return _autograd_ops(
        lambda x, w, b: causal_conv1d(
            x=x, weight=w, bias=b, activation="silu", cu_seqlens=a["cu_seqlens"]
        )[0],
        a["x"].unsqueeze(0),
        a["weight"],
        a["bias"],
        a["dy"].unsqueeze(0),
        lambda t: t.squeeze(0),
    )


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """Sets (or, for None, removes) environment variables for the block."""
    previous = {name: os.environ.get(name) for name in values}

    def apply(settings):
        for name, value in settings.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    apply(values)
    try:
        yield
    finally:
        apply(previous)


@contextlib.contextmanager
def deterministic(enabled: bool) -> Iterator[None]:
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(enabled)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


@contextlib.contextmanager
def dao_mode(det: bool) -> Iterator[None]:
    # The environment variable would override torch's switch in Dao's C++.
    with environment(CAUSAL_CONV1D_DETERMINISTIC=None), deterministic(det):
        yield


@contextlib.contextmanager
def fla_mode(gluon: bool) -> Iterator[None]:
    # fla-core reads these at every dispatch, so one process can time both
    # backends; FLA_CONV_GLUON is the per-op switch FLA_GLUON overrides.
    values = (
        {"FLA_GLUON": "1", "FLA_CONV_GLUON": None}
        if gluon
        else {"FLA_GLUON": "0", "FLA_CONV_GLUON": "0"}
    )
    # fla-core logs which backend a function went to once per process; forget
    # that, so that each shape's dispatch is logged and can be confirmed.
    from fla import backends

    for registry in getattr(backends, "_function_registries", {}).values():
        registry._logged.clear()
    with environment(**values):
        yield


def confirm_fla(gluon: bool) -> Callable[[list[str]], str | None]:
    """Checks fla-core's dispatch log of one shape: both directions went to the
    Gluon backend, or neither did."""

    def check(messages: list[str]) -> str | None:
        went = {
            f
            for f in ("causal_conv1d_fwd", "causal_conv1d_bwd")
            if any(f"{f} -> gluon" in m for m in messages)
        }
        if gluon and len(went) < 2:
            return "the Gluon backend did not run both directions; fla-core said: " + (
                "; ".join(messages) or "nothing"
            )
        if not gluon and went:
            return f"{sorted(went)} went to the Gluon backend"
        return None

    return check


def probe_cake(api) -> None:
    # Raises, saying why, when the device or the extension cannot run Cake.
    api.cake_causal_conv1d_train_backward_workspace_bytes(0, 8, "cuda")


def probe_dao() -> str:
    import causal_conv1d

    return f"causal-conv1d {causal_conv1d.__version__}"


def probe_fla(gluon: bool) -> str:
    import fla
    import fla.modules.causal_conv1d  # registers the backends
    import triton

    version = f"fla-core {fla.__version__}, triton {triton.__version__}"
    if gluon:
        from fla.backends import GluonBackend

        if not GluonBackend.is_available():
            raise RuntimeError(
                f"{version}: no Gluon backend (needs triton.experimental.gluon and an NVIDIA GPU)"
            )
    return version


@dataclasses.dataclass(frozen=True)
class Implementation:
    """One column of the tables: a label, how to build its ops from the inputs,
    a probe that raises when it cannot run (else returns a version string or
    None), and the mode (a context manager) its builds and timings run in."""

    key: str
    name: str
    build: Callable[[dict], Ops]
    probe: Callable[[], str | None]
    mode: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    peer: bool = True
    # Given fla-core's dispatch log of one shape, why its numbers are not this
    # implementation's (None when they are).
    confirm: Callable[[list[str]], str | None] | None = None


def cake_implementation(name: str = "Cake", api=None, key: str = "cake") -> Implementation:
    """Cake through `api` (default: the cake package). Another kernel library,
    once the runtime can load one next to the default, is another entry with its
    own name and api."""
    if api is None:
        import cake as api
    return Implementation(
        key, name, lambda a: cake_ops(a, api), lambda: probe_cake(api), peer=False
    )


def implementations() -> list[Implementation]:
    return [
        cake_implementation(),
        Implementation("dao", "Dao", dao_ops, probe_dao, lambda: dao_mode(False)),
        Implementation("dao-det", "Dao deterministic", dao_ops, probe_dao, lambda: dao_mode(True)),
        Implementation(
            "fla-triton",
            "FLA Triton",
            fla_ops,
            lambda: probe_fla(False),
            lambda: fla_mode(False),
            confirm=confirm_fla(False),
        ),
        Implementation(
            "fla-gluon",
            "FLA Gluon",
            fla_ops,
            lambda: probe_fla(True),
            lambda: fla_mode(True),
            confirm=confirm_fla(True),
        ),
    ]


def availability(impls: list[Implementation], selected: set[str]) -> dict[str, dict]:
    """Implementation name -> {"why": None when usable, else why not; "version"}."""
    status = {}
    for impl in impls:
        if impl.key not in selected:
            status[impl.name] = {"why": "left out (--impls / --no-peers)", "version": None}
            continue
        try:
            with impl.mode():
                version = impl.probe()
            status[impl.name] = {"why": None, "version": version}
        except Exception as error:  # a peer may fail to import in many ways
            status[impl.name] = {
                "why": f"unavailable ({type(error).__name__}: {error})",
                "version": None,
            }
    return status


class DispatchLog(logging.Handler):
    """Collects fla-core's backend dispatch messages ("f -> gluon", "rejected: ...")."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []
        logger = logging.getLogger("fla.backends")
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(self)

    def emit(self, record):
        self.messages.append(record.getMessage())

    def take(self) -> list[str]:
        messages, self.messages = self.messages, []
        return messages


def compare(result, reference) -> dict[str, float]:
    """Max |difference| of y and dx; of dweight and dbias relative to the reference's
    largest element."""
    out = {}
    for name, mine, ref in zip(("y", "dx", "dweight", "dbias"), result, reference):
        diff = (mine.float() - ref.float()).abs().max().item()
        if name in ("dweight", "dbias"):
            diff /= max(ref.float().abs().max().item(), 1e-30)
            name += "_rel"
        out[name] = diff
    return out


def measure(shape, timer, impls, status, dispatch_log: DispatchLog, clocks: ClockTrace) -> dict:
    S, C, docs = shape
    a = make_inputs(S, C, docs)
    elements = S * C

    def record(fn: Callable[[], object], kind: str, copy_gbps: float | None) -> dict:
        start = datetime.datetime.now()
        ms = timer(fn)
        end = datetime.datetime.now()
        gbps = BYTES_PER_ELEMENT[kind] * elements / (ms * 1e-3) / 1e9
        return {
            "median_us": ms * 1e3,
            "GBps": gbps,
            "pct_of_copy": None if copy_gbps is None else 100 * gbps / copy_gbps,
            "clocks": clocks.summary(start, end),
        }

    copy = record(copy_op(a), "copy", None)
    row = {"S": S, "C": C, "docs": docs, "copy": copy, "ops": {}, "check": {}, "errors": {}}
    reference = None
    for impl in impls:
        if status[impl.name]["why"] is not None:
            continue
        try:
            with impl.mode():
                ops = impl.build(a)
                result = ops["result"]()
                if not impl.peer and reference is None:
                    reference = [t.clone() for t in result]
                elif reference is not None:
                    row["check"][impl.name] = compare(result, reference)
                del result
                for kind in KINDS:
                    row["ops"][f"{impl.name} {kind}"] = record(ops[kind], kind, copy["GBps"])
                del ops
        except Exception as error:  # keep measuring the others; the table says n/a
            row["errors"][impl.name] = f"{type(error).__name__}: {error}"
        messages = dispatch_log.take()
        if messages:
            row.setdefault("dispatch", {})[impl.name] = messages
        if impl.confirm and impl.name not in row["errors"] and (why := impl.confirm(messages)):
            # Another backend ran: these are not this implementation's numbers.
            row["errors"][impl.name] = why
            row["check"].pop(impl.name, None)
            for kind in KINDS:
                row["ops"].pop(f"{impl.name} {kind}", None)
    torch.cuda.empty_cache()
    return row


def _shape_label(r: dict) -> str:
    return f"{r['S']} x {r['C']}, {r['docs']}"


def markdown(record: dict) -> str:
    """The tables and notes of a record (as written by --json)."""
    rows, status = record["rows"], record["implementations"]
    names = [name for name, s in status.items() if s["why"] is None]
    ops = [f"{name} {kind}" for name in names for kind in KINDS]
    lines = ["Median times (us):", ""]
    lines.append("| S x C, docs | copy | " + " | ".join(ops) + " |")
    lines.append("|" + "---|" * (len(ops) + 2))
    for r in rows:
        cells = [f"{r['ops'][c]['median_us']:.1f}" if c in r["ops"] else "n/a" for c in ops]
        lines.append(
            f"| {_shape_label(r)} | {r['copy']['median_us']:.1f} | " + " | ".join(cells) + " |"
        )

    checked = [name for name in names if any(name in r["check"] for r in rows)]
    if checked:
        lines += [
            "",
            "Against Cake: max |y diff|, max |dx diff|, max |dweight diff| / max |dweight|:",
            "",
        ]
        lines.append("| S x C, docs | " + " | ".join(checked) + " |")
        lines.append("|" + "---|" * (len(checked) + 1))
        for r in rows:
            cells = []
            for name in checked:
                c = r["check"].get(name)
                cells.append(f"{c['y']:.2g}, {c['dx']:.2g}, {c['dweight_rel']:.2g}" if c else "n/a")
            lines.append(f"| {_shape_label(r)} | " + " | ".join(cells) + " |")

    notes = [
        f"- {name}: {s['version']}"
        for name, s in status.items()
        if s["why"] is None and s["version"]
    ]
    notes += [f"- {name}: {s['why']}" for name, s in status.items() if s["why"] is not None]
    notes += [
        f"- {name} failed at {_shape_label(r)}: {error}"
        for r in rows
        for name, error in r["errors"].items()
    ]
    if record.get("skipped_shapes"):
        notes.append(f"- not measured (time budget spent): {', '.join(record['skipped_shapes'])}")
    dispatch = sorted(
        {f"{name}: {m}" for r in rows for name, ms in r.get("dispatch", {}).items() for m in ms}
    )
    notes += [f"- fla-core dispatch, {d}" for d in dispatch]

    lines += ["", "Effective GB/s (% of the same-run copy), fwd / bwd:", ""]
    lines.append("| S x C, docs | copy GB/s | " + " | ".join(names) + " |")
    lines.append("|" + "---|" * (len(names) + 2))
    for r in rows:
        cells = []
        for name in names:
            parts = []
            for kind in KINDS:
                op = r["ops"].get(f"{name} {kind}")
                parts.append(f"{op['GBps']:.0f} ({op['pct_of_copy']:.0f}%)" if op else "n/a")
            cells.append(" / ".join(parts))
        lines.append(f"| {_shape_label(r)} | {r['copy']['GBps']:.0f} | " + " | ".join(cells) + " |")
    lines += clocks_table(rows)
    return "\n".join(lines + ([""] + notes if notes else []))


def clocks_table(rows: list[dict]) -> list[str]:
    """Markdown lines: the SM clock (median, minimum), the most power drawn and the
    clock limits seen while the copy and Cake were timed; none for a record
    without a trace."""
    columns = ["copy"] + [f"Cake {kind}" for kind in KINDS]

    def cell(op: dict | None) -> str:
        c = op and op.get("clocks")
        if not c:
            return "n/a"
        limits = f", {'; '.join(c['limits'])}" if c["limits"] else ""
        return f"{c['sm_mhz_median']:.0f} ({c['sm_mhz_min']:.0f}), {c['power_w_max']:.0f} W{limits}"

    table = [
        [cell(r["copy"] if col == "copy" else r["ops"].get(col)) for col in columns] for r in rows
    ]
    if all(c == "n/a" for cells in table for c in cells):
        return []
    lines = ["", "SM MHz while timed, median (minimum), most power drawn, clock limits:", ""]
    lines.append("| S x C, docs | " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * (len(columns) + 1))
    for r, cells in zip(rows, table):
        lines.append(f"| {_shape_label(r)} | " + " | ".join(cells) + " |")
    return lines


def plot(record: dict, path: str) -> bool:
    """% of the same-run copy per shape, one bar per implementation, forward and
    backward panels, into a PNG at path. False (and says why) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        print(f"bench_causal_conv1d: no plot ({error})", file=sys.stderr)
        return False
    rows, status, meta = record["rows"], record["implementations"], record["meta"]
    names = [name for name, s in status.items() if s["why"] is None]
    width = 0.8 / max(len(names), 1)
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.6 * len(rows) + 2), 8.5), sharex=True)
    for ax, kind in zip(axes, KINDS):
        for i, name in enumerate(names):
            xs, ys = [], []
            for j, r in enumerate(rows):
                op = r["ops"].get(f"{name} {kind}")
                if op is not None:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(op["pct_of_copy"])
            bars = ax.bar(xs, ys, width, label=name, color=f"C{i}")
            ax.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
        ax.axhline(100, color="gray", linewidth=0.8, linestyle="--")
        ax.set_ylabel(f"{'forward' if kind == 'fwd' else 'backward'}: % of copy GB/s")
        ax.set_ylim(0, 110)
        ax.grid(axis="y", linewidth=0.3)
    axes[-1].set_xticks(range(len(rows)))
    axes[-1].set_xticklabels([f"{r['S']} x {r['C']}\n{r['docs']} docs" for r in rows], fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        ncol=len(names),
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.935),
    )
    missing = [f"{name}: {s['why']}" for name, s in status.items() if s["why"] is not None]
    fig.suptitle(
        "Packed varlen causal conv1d (width 4, bias, SiLU), bf16: effective bandwidth\n"
        f"{meta['gpu']}, torch {meta['torch']}, {meta['date']}",
        fontsize=10,
    )
    footer = "fwd counts 4 B/element, bwd 6 B/element; copy = same-run device copy of x"
    if missing:
        footer += "\n" + "\n".join(missing)
    fig.text(0.01, 0.005, footer, fontsize=6, va="bottom")
    fig.tight_layout(rect=(0, 0.03 + 0.015 * len(missing), 1, 0.925))
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


def main() -> int:
    impls = implementations()
    keys = [impl.key for impl in impls]
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="shapes: "
        + ", ".join(shape_label(s) for s in SHAPES)
        + "; implementations: "
        + ", ".join(keys),
    )
    parser.add_argument("--quick", action="store_true", help="fewer warm-up and timed reps")
    parser.add_argument(
        "--shapes", type=parse_shapes, default=SHAPES, help="SxCxDOCS,... or all (default)"
    )
    parser.add_argument(
        "--impls", default=",".join(keys), help="comma-separated keys (default: all)"
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="time Cake and the copy only (tuning runs)"
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        metavar="SECONDS",
        help="start no shape but the first after this many seconds (the others are listed)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    parser.add_argument("--plot", metavar="PATH", help="also plot %% of copy into a PNG")
    parser.add_argument(
        "--from-json", metavar="PATH", help="print and plot a saved record; no GPU needed"
    )
    args = parser.parse_args()

    if args.from_json:
        with open(args.from_json) as f:
            record = json.load(f)
        print(markdown(record))
        return 0 if not args.plot or plot(record, args.plot) else 1

    selected = set(args.impls.split(","))
    if unknown := selected - set(keys):
        parser.error(f"unknown --impls {sorted(unknown)}; known: {', '.join(keys)}")
    if args.no_peers:
        selected = {impl.key for impl in impls if not impl.peer}
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
        "inputs": "x, dy bf16 [S, C]; weight fp32 [C, 4]; bias fp32 [C]; SiLU; "
        f"random document lengths (seed {SEED})",
        "bytes_per_element": BYTES_PER_ELEMENT,
        # Under torch.use_deterministic_algorithms(True) torch also fills the memory
        # torch.empty returns when this is True: part of what "Dao deterministic" costs.
        "fill_uninitialized_memory": torch.utils.deterministic.fill_uninitialized_memory,
    }
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clocks = ClockTrace(
        f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    )
    meta["clock_trace"] = clocks.why_not or "nvidia-smi every 20 ms while each op is timed"
    for key, value in meta.items():
        print(f"{key}: {value}")
    dispatch_log = DispatchLog()
    status = availability(impls, selected)
    for name, s in status.items():
        print(f"{name}: {s['why'] or 'available'}{', ' + s['version'] if s['version'] else ''}")
    dispatch_log.take()
    rows = []
    skipped = []
    record = {"meta": meta, "implementations": status, "rows": rows, "skipped_shapes": skipped}
    start = time.monotonic()
    for shape in within_budget(args.shapes, args.time_budget, skipped):
        rows.append(measure(shape, timer, impls, status, dispatch_log, clocks))
        print(f"measured {_shape_label(rows[-1])} ({time.monotonic() - start:.0f} s)", flush=True)
        if args.json:  # after every shape, so that a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump(record, f, indent=2)
    clocks.close()
    if args.plot:
        plot(record, args.plot)
    print()
    print(markdown(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())

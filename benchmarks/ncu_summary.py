#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Profile Cake's kernels with Nsight Compute and print one compact line per kernel.

Runs a Python snippet (by default: Cake's forward and backward on one shape, a few
times) under `ncu --clock-control none`, profiling only the kernels whose name
matches a regex (default: Cake's, `^cake_`), and prints, per kernel name (the
median over its profiled launches): launches, grid and block size, registers per
thread, dynamic and static shared memory per block, theoretical and achieved
occupancy, waves per SM, DRAM throughput (% of peak, and bytes per second) and
duration.

    PYTHONPATH=build/gpu-site python3 benchmarks/ncu_summary.py [--shape 32768x4096x512]
        [--kernels REGEX] [--snippet FILE] [--iters 3] [--csv PATH]

A snippet FILE is run as `python3 FILE S C DOCS ITERS`. Needs ncu (Nsight Compute
2025.x metric names) and permission to read the GPU's performance counters.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

# (column, metric, scale from the base unit (byte, second, %) to the shown one).
COLUMNS = [
    ("regs", "launch__registers_per_thread", 1),
    ("smem dyn B", "launch__shared_mem_per_block_dynamic", 1),
    ("smem static B", "launch__shared_mem_per_block_static", 1),
    ("theo occ %", "sm__maximum_warps_per_active_cycle_pct", 1),
    ("achieved occ %", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    ("waves/SM", "launch__waves_per_multiprocessor", 1),
    ("DRAM % peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("DRAM GB/s", "dram__bytes.sum.per_second", 1e-9),
    ("issue active %", "smsp__issue_active.avg.pct_of_peak_sustained_active", 1),
    ("warp instr M", "smsp__inst_executed.sum", 1e-6),
    ("duration us", "gpu__time_duration.sum", 1e6),
]
LAUNCH = ["launch__grid_size", "launch__block_size"]

DEFAULT_SNIPPET = """\
import sys
import torch
import cake

S, C, docs, iters = (int(v) for v in sys.argv[1:5])
gen = torch.Generator().manual_seed(0)
cuts = torch.randint(0, S + 1, (docs - 1,), generator=gen).sort().values
cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([S])]).to("cuda", torch.int32)
x = torch.randn(S, C, device="cuda").to(torch.bfloat16)
dy = torch.randn(S, C, device="cuda").to(torch.bfloat16)
w = torch.randn(C, 4, device="cuda") * 0.5
b = torch.randn(C, device="cuda") * 0.5
y, dx, dw, db = (torch.empty_like(t) for t in (x, x, w, b))
workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, x.device)
for _ in range(iters):
    cake.cake_causal_conv1d_train_forward(x, w, cu, bias=b, out=y)
    cake.cake_causal_conv1d_train_backward(
        x, w, cu, dy, bias=b, workspace=workspace, dx=dx, dweight=dw, dbias=db
    )
torch.cuda.synchronize()
print(f"ran forward + backward {iters} times at S={S}, C={C}, {docs} documents")
"""


PREFIXES = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# Short time units, and prefixes spelled out, as some ncu versions write them.
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
PREFIX_WORDS = {"nano": "n", "micro": "u", "milli": "m", "kilo": "K", "mega": "M", "giga": "G"}


def unit_scale(unit: str) -> float:
    """Factor from `unit` to its base unit ("Gbyte/second" -> 1e9, "usecond" -> 1e-6
    relative to second, "%" -> 1), so that values print the same whether or not ncu
    honoured --print-units base."""

    def one(part: str) -> float:
        if part in TIME_UNITS:
            return TIME_UNITS[part]
        for base in ("byte", "second", "cycle", "inst"):
            if part.endswith(base) and part != base:
                prefix = part[: -len(base)]
                return PREFIXES.get(PREFIX_WORDS.get(prefix, prefix), 1.0)
        return 1.0

    numerator, _, denominator = unit.partition("/")
    return one(numerator) / (one(denominator) if denominator else 1.0)


def parse_csv(text: str) -> list[dict[str, float | str]]:
    """One dict per profiled launch (kernel name; metric -> value in base units) from
    ncu's CSV: the wide `--page raw` form (a row per launch, after a units row) or the
    long `--page details` form (a row per metric); ==PROF== lines and program output
    are dropped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    launches: dict[str, dict[str, float | str]] = {}
    if rows and "Metric Name" in rows[0]:
        for row in rows:
            launch = launches.setdefault(row["ID"], {"Kernel Name": row["Kernel Name"]})
            value = number(row["Metric Value"])
            launch[row["Metric Name"]] = (
                value * unit_scale(row["Metric Unit"]) if value is not None else row["Metric Value"]
            )
        return list(launches.values())
    units = next((row for row in rows if not row.get("ID", "").strip()), {})
    for row in rows:
        if not row.get("ID", "").strip():
            continue
        launch = launches.setdefault(row["ID"], {"Kernel Name": row["Kernel Name"]})
        for name, text_value in row.items():
            value = number(text_value) if "__" in (name or "") else None
            launch[name] = (
                value * unit_scale(units.get(name) or "") if value is not None else text_value
            )
    return list(launches.values())


def number(value: str) -> float | None:
    try:
        return float(value.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def summarize(rows: list[dict[str, float | str]]) -> str:
    """One markdown line per kernel name: medians over its launches."""
    by_kernel: dict[str, list[dict[str, float | str]]] = {}
    for row in rows:
        by_kernel.setdefault(row["Kernel Name"], []).append(row)
    header = ["kernel", "launches", "grid", "block"] + [name for name, _, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for kernel, launches in by_kernel.items():
        cells = [kernel, str(len(launches))]
        for metric in LAUNCH:
            values = {row.get(metric, "?") for row in launches}
            cells.append(
                "/".join(sorted(f"{v:.0f}" if isinstance(v, float) else v for v in values))
            )
        for _, metric, scale in COLUMNS:
            values = [v for v in (row.get(metric) for row in launches) if isinstance(v, float)]
            cells.append(f"{statistics.median(values) * scale:.4g}" if values else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape", default="32768x4096x512", help="SxCxDOCS (default 32768x4096x512)"
    )
    parser.add_argument("--kernels", default="^cake_", help="kernel name regex (default ^cake_)")
    parser.add_argument(
        "--snippet", help="Python file run as FILE S C DOCS ITERS (default: Cake fwd+bwd)"
    )
    parser.add_argument("--iters", type=int, default=3, help="forward + backward calls (default 3)")
    parser.add_argument(
        "--launch-skip", type=int, default=0, help="matching launches to skip first"
    )
    parser.add_argument("--csv", metavar="PATH", help="also keep ncu's raw CSV at PATH")
    parser.add_argument("--ncu", default=os.environ.get("NCU", "ncu"), help="ncu executable")
    args = parser.parse_args()
    S, C, docs = (int(v) for v in args.shape.lower().split("x"))
    if shutil.which(args.ncu) is None:
        print(f"ncu_summary: {args.ncu} not found (set --ncu or NCU)", file=sys.stderr)
        return 1

    metrics = LAUNCH + [metric for _, metric, _ in COLUMNS]
    with tempfile.TemporaryDirectory() as tmp:
        snippet = args.snippet
        if snippet is None:
            snippet = os.path.join(tmp, "snippet.py")
            with open(snippet, "w") as f:
                f.write(DEFAULT_SNIPPET)
        log = os.path.join(tmp, "ncu.csv")
        command = [
            args.ncu,
            "--clock-control", "none",
            "--target-processes", "all",
            "--kernel-name", f"regex:{args.kernels}",
            "--launch-skip", str(args.launch_skip),
            "--metrics", ",".join(metrics),
            "--csv", "--page", "raw", "--print-units", "base",
            "--log-file", log,
            sys.executable, snippet, str(S), str(C), str(docs), str(args.iters),
        ]  # fmt: skip
        print("ncu_summary:", " ".join(command), flush=True)
        result = subprocess.run(command, check=False)
        text = ""
        if os.path.exists(log):
            with open(log) as f:
                text = f.read()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(text)
    rows = parse_csv(text)
    if result.returncode != 0 or not rows:
        print(
            f"ncu_summary: ncu exited {result.returncode} with {len(rows)} profiled launches; "
            "its log:",
            file=sys.stderr,
        )
        print(text[-3000:], file=sys.stderr)
        return 1
    print()
    print(
        f"Nsight Compute, --clock-control none, S={S}, C={C}, {docs} documents "
        f"(medians per kernel; DRAM GB/s is dram__bytes.sum.per_second):"
    )
    print()
    print(summarize(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
        [--kernels REGEX] [--snippet FILE] [--iters 3] [--csv PATH] [--json PATH]
        [--time-budget SECONDS]

`--shape` takes several shapes (comma-separated, or `all`: the benchmark's), one ncu
run and one table each; `--json` keeps the tables' numbers with the GPU's name.
A snippet FILE is run as `python3 FILE S C DOCS ITERS`. Needs ncu (Nsight Compute
2025.x metric names) and permission to read the GPU's performance counters.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

from shapes import parse_shapes, shape_label, within_budget

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
# Asked for with the metrics, to name the GPU in the JSON record.
DEVICE = "device__attribute_display_name"

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


def kernel_medians(rows: list[dict[str, float | str]]) -> list[dict[str, float | str]]:
    """Per kernel name, in the order first launched: its launches, grid and block
    (the distinct values, "/"-joined) and the median of each column, in the shown unit
    (None where ncu gave no number)."""
    by_kernel: dict[str, list[dict[str, float | str]]] = {}
    for row in rows:
        by_kernel.setdefault(row["Kernel Name"], []).append(row)
    kernels = []
    for kernel, launches in by_kernel.items():
        summary: dict[str, float | str] = {"kernel": kernel, "launches": len(launches)}
        for name, metric in zip(("grid", "block"), LAUNCH):
            values = {row.get(metric, "?") for row in launches}
            summary[name] = "/".join(
                sorted(f"{v:.0f}" if isinstance(v, float) else v for v in values)
            )
        for name, metric, scale in COLUMNS:
            values = [v for v in (row.get(metric) for row in launches) if isinstance(v, float)]
            summary[name] = statistics.median(values) * scale if values else None
        kernels.append(summary)
    return kernels


def summarize(rows: list[dict[str, float | str]]) -> str:
    """One markdown line per kernel name: medians over its launches."""
    header = ["kernel", "launches", "grid", "block"] + [name for name, _, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for kernel in kernel_medians(rows):
        cells = [str(kernel[name]) for name in header[:4]] + [
            "n/a" if kernel[name] is None else f"{kernel[name]:.4g}" for name, _, _ in COLUMNS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile(args: argparse.Namespace, snippet: str, shape: tuple[int, int, int], tmp: str):
    """ncu over the snippet at one shape: (its exit status, its CSV)."""
    S, C, docs = shape
    log = os.path.join(tmp, f"ncu-{shape_label(shape)}.csv")
    metrics = LAUNCH + [DEVICE] + [metric for _, metric, _ in COLUMNS]
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
    return result.returncode, text


def gpu_name(ncu_rows: list[dict[str, float | str]]) -> str:
    """The profiled device's name, as ncu's raw page gives it."""
    names = {row.get(DEVICE) for row in ncu_rows} - {None}
    return "/".join(sorted(str(n) for n in names)) or "unknown"


def write_json(path: str | None, record: dict) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(record, f, indent=2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape",
        type=parse_shapes,
        default=parse_shapes("32768x4096x512"),
        help="SxCxDOCS,... or all (default 32768x4096x512)",
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
    parser.add_argument("--json", metavar="PATH", help="also write the tables' numbers to PATH")
    parser.add_argument(
        "--time-budget",
        type=float,
        metavar="SECONDS",
        help="profile no shape but the first after this many seconds (the others are listed)",
    )
    parser.add_argument("--ncu", default=os.environ.get("NCU", "ncu"), help="ncu executable")
    args = parser.parse_args()
    if shutil.which(args.ncu) is None:
        print(f"ncu_summary: {args.ncu} not found (set --ncu or NCU)", file=sys.stderr)
        return 1

    record: dict = {
        "meta": {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": shlex.join([sys.executable] + sys.argv),
            "ncu": f"--clock-control none, medians per kernel over its launches, "
            f"{args.iters} forward + backward calls",
        },
        "shapes": [],
        "skipped_shapes": [],
    }
    csv_texts = []
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        snippet = args.snippet
        if snippet is None:
            snippet = os.path.join(tmp, "snippet.py")
            with open(snippet, "w") as f:
                f.write(DEFAULT_SNIPPET)
        for shape in within_budget(args.shape, args.time_budget, record["skipped_shapes"]):
            returncode, text = profile(args, snippet, shape, tmp)
            csv_texts.append(f"# {shape_label(shape)}\n{text}")
            rows = parse_csv(text)
            if returncode != 0 or not rows:
                print(
                    f"ncu_summary: ncu exited {returncode} with {len(rows)} profiled launches "
                    f"at {shape_label(shape)}; its log:",
                    file=sys.stderr,
                )
                print(text[-3000:], file=sys.stderr)
                status = 1
                continue
            S, C, docs = shape
            record["meta"]["gpu"] = gpu_name(rows)
            record["shapes"].append(
                {"S": S, "C": C, "docs": docs, "kernels": kernel_medians(rows)}
            )
            print()
            print(
                f"Nsight Compute, --clock-control none, S={S}, C={C}, {docs} documents "
                f"(medians per kernel; DRAM GB/s is dram__bytes.sum.per_second):"
            )
            print()
            print(summarize(rows), flush=True)
            write_json(args.json, record)  # after every shape: a run cut short keeps them
    write_json(args.json, record)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("\n".join(csv_texts))
    if record["skipped_shapes"]:
        print(f"not profiled (time budget spent): {', '.join(record['skipped_shapes'])}")
    return status


if __name__ == "__main__":
    sys.exit(main())

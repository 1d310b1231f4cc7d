# SPDX-License-Identifier: Apache-2.0
"""CPU-only checks of the benchmark scripts' reporting: shape parsing, the tables
and the plot of a saved record, and the parsing of Nsight Compute's CSV. The
records here are made up for the test; no measured number comes from them."""

import datetime
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest
from cake_testing import requires_cake_cpu

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


# As when a script runs: its folder is on the path (for gpu_clocks).
sys.path.insert(0, str(BENCHMARKS))


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


shapes = load("shapes")
bench = load("bench_causal_conv1d")
ncu = load("ncu_summary")
gpu_clocks = load("gpu_clocks")


def made_up_record():
    def op(us, bytes_per_element, S, C, copy_gbps):
        gbps = bytes_per_element * S * C / (us * 1e-6) / 1e9
        return {"median_us": us, "GBps": gbps, "pct_of_copy": 100 * gbps / copy_gbps}

    rows = []
    for S, C, docs in [(1024, 64, 2), (2048, 128, 4)]:
        copy = op(10.0, 4, S, C, 1.0)
        copy["pct_of_copy"] = None
        ops = {
            "Cake fwd": op(12.0, 4, S, C, copy["GBps"]),
            "Cake bwd": op(20.0, 6, S, C, copy["GBps"]),
            "FLA Gluon fwd": op(15.0, 4, S, C, copy["GBps"]),
            "FLA Gluon bwd": op(30.0, 6, S, C, copy["GBps"]),
        }
        check = {"FLA Gluon": {"y": 0.0, "dx": 0.0, "dweight_rel": 1e-7, "dbias_rel": 1e-7}}
        rows.append(
            {"S": S, "C": C, "docs": docs, "copy": copy, "ops": ops, "check": check, "errors": {}}
        )
    del rows[1]["ops"]["FLA Gluon bwd"]
    rows[1]["errors"]["FLA Gluon"] = "RuntimeError: made up"
    return {
        "meta": {
            "gpu": "no GPU (test)",
            "torch": "x",
            "date": "today",
            "command": "x",
            "timing": "x",
        },
        "implementations": {
            "Cake": {"why": None, "version": None},
            "Dao": {"why": "unavailable (ModuleNotFoundError: made up)", "version": None},
            "FLA Gluon": {"why": None, "version": "fla-core 0.6.0"},
        },
        "rows": rows,
    }


def test_shapes_parse():
    assert bench.parse_shapes("all") == bench.SHAPES
    assert bench.parse_shapes("4096x2048x2,65536X1024x32") == [(4096, 2048, 2), (65536, 1024, 32)]
    for bad in ("4096x2048", "4096x2044x2", "16x8x17", "axbxc"):
        with pytest.raises(Exception, match="shape"):
            bench.parse_shapes(bad)


def test_implementation_keys_and_names_are_unique():
    impls = bench.implementations()
    assert len({i.key for i in impls}) == len({i.name for i in impls}) == len(impls)
    assert [i.name for i in impls if not i.peer] == ["Cake"]


def test_markdown_reports_every_op_and_what_is_missing():
    text = bench.markdown(made_up_record())
    last_table = text.split("Effective GB/s")[1]
    assert "| S x C, docs | copy GB/s | Cake | FLA Gluon |" in last_table
    assert "| 2048 x 128, 4 |" in last_table and "/ n/a |" in last_table
    assert "- Dao: unavailable (ModuleNotFoundError: made up)" in text
    assert "- FLA Gluon failed at 2048 x 128, 4: RuntimeError: made up" in text
    assert "- FLA Gluon: fla-core 0.6.0" in text


def test_markdown_without_clock_trace_has_no_clock_table():
    assert "SM MHz" not in bench.markdown(made_up_record())


def test_clock_samples_parse_and_summarize_per_window():
    lines = [
        "2026/12/04 18:42:29.500, 1980, 400.5, 50, 0x0000000000000000",
        "2026/12/04 18:42:29.520, 1755, 690.0, 61, 0x0000000000000004",
        "2026/12/04 18:42:29.540, 1830, 650.0, 63, 0x0000000000000001",
        "2026/12/04 18:42:29.560, 345, 80.0, 40, 0x0000000000000001",
        "[N/A], 1980, 400, 50, 0x0",  # unusable lines are dropped
        "2026/12/04 18:42:29.580, 1980",
    ]
    samples = [s for line in lines if (s := gpu_clocks.parse_sample(line))]
    assert len(samples) == 4
    at = samples[0]["time"].replace
    window = gpu_clocks.summarize(samples, at(microsecond=510000), at(microsecond=550000))
    assert window == {
        "samples": 2,
        "sm_mhz_median": 1792.5,
        "sm_mhz_min": 1755.0,
        "power_w_max": 690.0,
        "temperature_c_max": 63.0,
        "limits": ["SW power cap"],  # GPU idle (0x1) is not a limit
    }
    assert gpu_clocks.summarize(samples, at(microsecond=600000), at(microsecond=700000)) is None


FAKE_NVIDIA_SMI = r"""#!/bin/sh
# A stand-in: answers the probe of the reasons field, then samples every 20 ms.
case "$*" in
  *-lms=*) while :; do
      echo "$(date '+%Y/%m/%d %H:%M:%S.%3N'), 1755, 612.5, 55, 0x0000000000000004"
      sleep 0.02
    done ;;
  *clocks_event_reasons*) echo "0x0000000000000000" ;;
esac
"""


def test_clock_trace_samples_a_running_nvidia_smi(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(FAKE_NVIDIA_SMI)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    trace = gpu_clocks.ClockTrace("00000000:19:00.0")
    try:
        assert trace.why_not is None
        start = datetime.datetime.now()
        time.sleep(0.3)
        summary = trace.summary(start, datetime.datetime.now())
    finally:
        trace.close()
    assert summary is not None and summary["samples"] >= 3
    assert summary["sm_mhz_median"] == 1755.0 and summary["limits"] == ["SW power cap"]


def test_clock_trace_without_nvidia_smi_says_why(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    trace = gpu_clocks.ClockTrace("00000000:19:00.0")
    assert trace.why_not == "nvidia-smi not found"
    assert trace.summary(datetime.datetime.now(), datetime.datetime.now()) is None
    trace.close()


def test_markdown_reports_the_clocks_of_the_copy_and_cake():
    record = made_up_record()
    clocks = {"sm_mhz_median": 1755.0, "sm_mhz_min": 1500.0, "power_w_max": 690.0}
    record["rows"][0]["copy"]["clocks"] = clocks | {"limits": []}
    record["rows"][0]["ops"]["Cake bwd"]["clocks"] = clocks | {"limits": ["SW power cap"]}
    table = bench.markdown(record).split("SM MHz while timed")[1]
    assert "| S x C, docs | copy | Cake fwd | Cake bwd |" in table
    row = "| 1024 x 64, 2 | 1755 (1500), 690 W | n/a | 1755 (1500), 690 W, SW power cap |"
    assert row in table
    assert "| 2048 x 128, 4 | n/a | n/a | n/a |" in table


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    assert bench.plot(made_up_record(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ncu_csv_wide_and_long_forms():
    wide = "\n".join(
        [
            "==PROF== Connected to process 1",
            '"ID","Process ID","Kernel Name","device__attribute_display_name",'
            '"launch__registers_per_thread","gpu__time_duration.sum"',
            '"","","","","register/thread","usecond"',
            '"0","1","cake_fwd_x","NVIDIA H200","128","1,500"',
            '"1","1","cake_fwd_x","NVIDIA H200","128","2,500"',
        ]
    )
    long = "\n".join(
        [
            '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"',
            '"0","cake_bwd_x","launch__registers_per_thread","register/thread","247"',
            '"0","cake_bwd_x","gpu__time_duration.sum","nsecond","20,000"',
        ]
    )
    rows = ncu.parse_csv(wide) + ncu.parse_csv(long)
    assert [r["Kernel Name"] for r in rows] == ["cake_fwd_x", "cake_fwd_x", "cake_bwd_x"]
    assert rows[0]["gpu__time_duration.sum"] == pytest.approx(1.5e-3)
    assert rows[2]["gpu__time_duration.sum"] == pytest.approx(2e-5)
    for unit in ("ns", "nanosecond", "nsecond"):
        assert ncu.unit_scale(unit) == pytest.approx(1e-9)
    assert ncu.unit_scale("us") == pytest.approx(1e-6)
    table = ncu.summarize(rows)
    assert "| cake_fwd_x | 2 |" in table and "| 2000 |" in table  # median, in us
    assert "| cake_bwd_x | 1 |" in table and "| 247 |" in table
    # The JSON record's numbers are the table's, unrounded; a column ncu did not give is None.
    fwd, bwd = ncu.kernel_medians(rows)
    assert (fwd["kernel"], fwd["launches"], fwd["duration us"]) == ("cake_fwd_x", 2, 2000)
    assert (bwd["regs"], bwd["duration us"], bwd["DRAM % peak"]) == (247, pytest.approx(20), None)
    assert ncu.gpu_name(rows) == "NVIDIA H200"
    assert ncu.gpu_name(ncu.parse_csv(long)) == "unknown"


def test_shapes_parse_in_every_script():
    # One syntax and one list of GPU shapes for the benchmark and ncu's summary.
    assert shapes.parse_shapes("all") == shapes.SHAPES == bench.SHAPES
    assert shapes.parse_shapes("all", [(64, 8, 1)]) == [(64, 8, 1)]
    assert shapes.shape_label((65536, 1024, 32)) == "65536x1024x32"
    assert ncu.parse_shapes is bench.parse_shapes is shapes.parse_shapes
    # Both scripts' time budget: the first shape always runs; past the budget the
    # others are listed instead.
    skipped = []
    three = [(64, 8, 1), (128, 16, 2), (256, 8, 4)]
    assert list(shapes.within_budget(three, 0, skipped)) == three[:1]
    assert skipped == ["128x16x2", "256x8x4"]
    assert list(shapes.within_budget(three, None, skipped)) == three and len(skipped) == 2


# Stands in for ncu: writes the raw page ncu would for one forward launch, with the
# shape's C as the registers, and fails at S = 13 as ncu does when the program fails.
FAKE_NCU = """\
import sys
argv = sys.argv
log = argv[argv.index("--log-file") + 1]
S, C = argv[-4], argv[-3]
assert "device__attribute_display_name" in argv[argv.index("--metrics") + 1]
if S == "13":
    sys.exit(9)
with open(log, "w") as f:
    f.write('"ID","Kernel Name","device__attribute_display_name","launch__registers_per_thread"\\n')
    f.write('"","","","register/thread"\\n')
    f.write(f'"0","cake_fwd_x","Fake GPU","{C}"\\n')
"""


def run_ncu_summary(tmp_path, monkeypatch, *args):
    fake = tmp_path / "ncu"
    fake.write_text(f"#!{sys.executable}\n" + FAKE_NCU)
    fake.chmod(0o755)
    out = tmp_path / "ncu.json"
    argv = ["ncu_summary", "--ncu", str(fake), "--json", str(out), *args]
    monkeypatch.setattr(sys, "argv", argv)
    status = ncu.main()
    return status, json.loads(out.read_text())


def test_ncu_summary_profiles_each_shape_into_one_record(tmp_path, monkeypatch, capsys):
    status, record = run_ncu_summary(tmp_path, monkeypatch, "--shape", "64x8x1,128x16x2")
    assert status == 0 and record["meta"]["gpu"] == "Fake GPU"
    assert [(r["S"], r["C"], r["docs"]) for r in record["shapes"]] == [(64, 8, 1), (128, 16, 2)]
    assert [r["kernels"][0]["regs"] for r in record["shapes"]] == [8, 16]
    assert capsys.readouterr().out.count("| cake_fwd_x | 1 |") == 2
    # A shape ncu fails on fails the run, keeps the others and names it.
    status, record = run_ncu_summary(tmp_path, monkeypatch, "--shape", "13x8x1,64x8x1")
    assert status == 1 and [r["S"] for r in record["shapes"]] == [64]
    assert "exited 9" in capsys.readouterr().err
    # Past the time budget only the first shape runs; the rest are listed.
    status, record = run_ncu_summary(
        tmp_path, monkeypatch, "--shape", "64x8x1,128x16x2,256x8x4", "--time-budget", "0"
    )
    assert status == 0 and len(record["shapes"]) == 1
    assert record["skipped_shapes"] == ["128x16x2", "256x8x4"]


@requires_cake_cpu
def test_bench_cpu_formula_agrees_with_the_host_kernels():
    # The PyTorch formula the CPU benchmark times against must be the op: bench_shape
    # checks it against Cake's y (documents of random lengths, empty ones possible).
    bench_cpu = load("bench_cpu")
    row = bench_cpu.bench_shape(300, 16, 5, reps=1)
    assert row["S"] == 300 and row["fwd_speedup"] > 0 and row["cake_fwd_bwd_ms"] > 0


def test_host_overhead_runs_with_mock_launches(tmp_path, monkeypatch):
    # --mock-launch replaces cake._C's launches for the whole process: the module's
    # state (and empty plan caches, which would keep the stand-in) is restored after.
    from cake import _ops

    for name in ("_load_extension", "_target", "torch_ops"):
        monkeypatch.setattr(_ops, name, getattr(_ops, name))
    for name in ("_FORWARD_PLANS", "_BACKWARD_PLANS"):
        monkeypatch.setattr(_ops, name, {})
    host = load("bench_host_overhead")
    out = tmp_path / "host.json"
    argv = ["bench", "--mock-launch", "--S", "64", "--C", "16", "--warmup", "2", "--calls", "3"]
    monkeypatch.setattr(sys, "argv", [*argv, "--repeats", "1", "--json", str(out)])
    assert host.main() == 0
    record = json.loads(out.read_text())
    assert "CPU-side estimate" in record["meta"]["gpu"]
    # The C++ route calls the runtime itself: --mock-launch times the Python route only.
    targets = {f"{name} [python]" for name in host.TARGETS}
    assert set(record["targets"]) == targets <= set(record["results"])
    assert all(r["host_us"] > 0 for r in record["results"].values())


@requires_cake_cpu
def test_host_overhead_runs_each_route_on_the_cpu(tmp_path, monkeypatch):
    from cake import _ops

    monkeypatch.setattr(_ops, "torch_ops", _ops.torch_ops)  # the script sets each route
    host = load("bench_host_overhead")
    out = tmp_path / "host.json"
    argv = ["bench", "--cpu", "--S", "0", "--C", "8", "--warmup", "2", "--calls", "3"]
    monkeypatch.setattr(sys, "argv", [*argv, "--repeats", "1", "--json", str(out)])
    routes = ["python"] if _ops.torch_ops is None else ["torch_ops", "python"]
    assert host.main() == 0
    record = json.loads(out.read_text())
    assert set(record["targets"]) == {f"{n} [{r}]" for r in routes for n in host.TARGETS}
    assert set(record["targets"]) <= set(record["results"])

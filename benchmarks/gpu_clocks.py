# SPDX-License-Identifier: Apache-2.0
"""The GPU's SM clock, power and clock-limit reasons while a benchmark times something.

A kernel bound by its instruction issue slows down with the SM clock, a copy bound by
memory hardly does: when the GPU lowers its clock (power or thermal limits) during one
measurement and not during the copy it is compared with, the percentage of the copy
says more about the GPU's state than about the kernel. `ClockTrace` runs `nvidia-smi`
in the background, sampling every 20 ms, and `summary(start, end)` reduces the samples
of one measurement's wall-clock window. Without nvidia-smi there is no trace, and the
benchmark says so.
"""

from __future__ import annotations

import datetime
import shutil
import statistics
import subprocess
import threading
import time

FIELDS = ("timestamp", "clocks.sm", "power.draw", "temperature.gpu")
# nvidia-smi's names of the clock-limit bit mask, newest first.
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
# NVML's clocks event reasons; "GPU idle" (0x1) is left out of summaries: the GPU is
# idle between launches.
REASONS = {
    0x2: "applications clocks",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal",
    0x40: "HW thermal",
    0x80: "HW power brake",
    0x100: "display clocks",
}
TIMESTAMP_FORMAT = "%Y/%m/%d %H:%M:%S.%f"


def parse_sample(line: str) -> dict | None:
    """One CSV line of FIELDS + a reasons field (noheader, nounits); None if unusable."""
    cells = [cell.strip() for cell in line.split(",")]
    if len(cells) != len(FIELDS) + 1:
        return None
    try:
        return {
            "time": datetime.datetime.strptime(cells[0], TIMESTAMP_FORMAT),
            "sm_mhz": float(cells[1]),
            "power_w": float(cells[2]),
            "temperature_c": float(cells[3]),
            "reasons": int(cells[4], 16),
        }
    except ValueError:
        return None


def summarize(samples: list[dict], start: datetime.datetime, end: datetime.datetime):
    """The samples in [start, end] as SM clock median and minimum, power and
    temperature maxima and the clock-limit reasons seen; None when there are none."""
    window = [s for s in samples if start <= s["time"] <= end]
    if not window:
        return None
    reasons = 0
    for sample in window:
        reasons |= sample["reasons"]
    return {
        "samples": len(window),
        "sm_mhz_median": statistics.median(s["sm_mhz"] for s in window),
        "sm_mhz_min": min(s["sm_mhz"] for s in window),
        "power_w_max": max(s["power_w"] for s in window),
        "temperature_c_max": max(s["temperature_c"] for s in window),
        "limits": [name for bit, name in REASONS.items() if reasons & bit],
    }


class ClockTrace:
    """nvidia-smi sampling one GPU (by PCI bus id) until `close`; `why_not` says why
    there is no trace."""

    def __init__(self, pci_bus_id: str, period_ms: int = 20):
        self.samples: list[dict] = []
        self.process = None
        self.why_not = None
        smi = shutil.which("nvidia-smi")
        if smi is None:
            self.why_not = "nvidia-smi not found"
            return
        query = [smi, "-i", pci_bus_id, "--format=csv,noheader,nounits"]
        for reason_field in REASON_FIELDS:
            probe = subprocess.run(
                query + ["--query-gpu=" + reason_field], capture_output=True, text=True
            )
            if probe.returncode == 0:
                break
        else:
            self.why_not = f"nvidia-smi: {(probe.stdout or probe.stderr).strip()}"
            return
        self.process = subprocess.Popen(
            query + ["--query-gpu=" + ",".join(FIELDS + (reason_field,)), f"-lms={period_ms}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if (sample := parse_sample(line)) is not None:
                self.samples.append(sample)

    def summary(self, start: datetime.datetime, end: datetime.datetime):
        """`summarize` of [start, end], after waiting (up to a second) for a sample
        past `end`: nvidia-smi writes each a little after taking it."""
        if self.process is None:
            return None
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not (
            self.samples and self.samples[-1]["time"] > end
        ):
            time.sleep(0.02)
        return summarize(list(self.samples), start, end)

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait()

# SPDX-License-Identifier: Apache-2.0
"""More than 2**31 elements: offsets past int32 range in every kernel, on each
target.

x is [S, 4096] bf16 with S = 2**31 // 4096 + 64 (4.3 GB per tensor, about 18 GB in
all, and as much again for the float64 reference's windows on the CPU: the CPU case
runs where the machine has the memory, not on the 24 GB CI machines). y and dx are compared on row windows (around element 2**31, where a document
starts, and the last rows, across another document start) against the reference
computed on just those rows' neighbourhoods; dweight and dbias against the reference
summed window by window over all rows.
"""

import os

import pytest
import torch
from cake_testing import (
    accumulation_rel,
    assert_close,
    assert_exact,
    make_case,
    param_tolerance,
    reference_window,
    requires_cake_cpu,
    requires_cake_gpu,
    rows,
    run_into_buffers,
    synchronize,
)


def _available_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


#: The CPU case holds the tensors and the reference's windows in host memory.
CPU_BYTES_NEEDED = 48 << 30
enough_host_memory = pytest.mark.skipif(
    not os.path.exists("/proc/meminfo") or _available_bytes() < CPU_BYTES_NEEDED,
    reason=f"the CPU case needs {CPU_BYTES_NEEDED >> 30} GiB of available memory",
)

C = 4096
ROW_OF_2_POW_31 = 2**31 // C  # the first row whose elements lie at offsets >= 2**31
S = ROW_OF_2_POW_31 + 64


@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cpu", marks=[requires_cake_cpu, enough_host_memory]),
        pytest.param("cuda", marks=[pytest.mark.gpu, requires_cake_gpu]),
    ],
)
def test_more_than_2_pow_31_elements(device):
    boundary = ROW_OF_2_POW_31 + 2
    case = make_case([boundary, S - 40 - boundary, 40], C, seed=40, device=device)
    assert case.S * case.C > 2**31
    y, dx, dweight, dbias = run_into_buffers(case)
    synchronize(device)  # launch errors surface here

    for r0, r1 in ((ROW_OF_2_POW_31 - 8, ROW_OF_2_POW_31 + 8), (S - 64, S)):
        ref = reference_window(case, r0, r1)
        assert_exact(f"y[{r0}:{r1}]", rows(y)[r0:r1], ref.y, ref.y_floor)
        assert_exact(f"dx[{r0}:{r1}]", rows(dx)[r0:r1], ref.dx, ref.dx_floor)

    # Windows are summed one at a time: each holds several GB of float64.
    sums = {}
    for r0 in range(0, S, 32768):
        part = reference_window(case, r0, min(r0 + 32768, S))
        for name in ("dweight", "dbias"):
            for key in (name, name + "_terms", name + "_slack"):
                sums[key] = sums.get(key, 0) + getattr(part, key)
        del part
    rel = accumulation_rel(case)
    for name, got in (("dweight", dweight), ("dbias", dbias)):
        ref, terms, slack = sums[name], sums[name + "_terms"], sums[name + "_slack"]
        assert_close(name, got, ref, param_tolerance(ref, terms, slack, got.dtype, rel, case.S))

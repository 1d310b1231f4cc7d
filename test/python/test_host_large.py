# SPDX-License-Identifier: Apache-2.0
"""More than 2**31 elements on the host kernels: offsets past int32 range in every
host kernel, where the machine has the memory (about 13 GB at the peak; CI's has).

test_gpu_large.py does the same on the GPU with a reference over all rows; here the
float64 reference on the CPU would take minutes, so the case is built so that two
row windows decide everything checked: dy is zero outside them, so dweight and dbias
are sums over those rows alone, and x repeats with a period of 4099 rows, which does
not divide the 2**31 // C rows an int32 wrap-around would jump, so a row read from
the wrong place reads other values. y and dx are checked on the windows: around
element 2**31, where a document starts, and the last rows, across another start.
"""

import os

import cake
import pytest
import torch
from cake_testing import (
    Case,
    accumulation_rel,
    assert_close,
    assert_exact,
    param_tolerance,
    reference_window,
    requires_cake_cpu,
    rows,
)

C = 4096
ROW_OF_2_POW_31 = 2**31 // C  # the first row whose elements lie at offsets >= 2**31
S = ROW_OF_2_POW_31 + 64
PERIOD = 4099
#: Disjoint, so that their dweight and dbias add up to the whole.
WINDOWS = ((ROW_OF_2_POW_31 - 8, ROW_OF_2_POW_31 + 8), (S - 48, S))
#: x, dy and dx (y is freed before the backward), and some room.
BYTES_NEEDED = 3 * S * C * 2 + (2 << 30)


def _available_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


pytestmark = [
    requires_cake_cpu,
    pytest.mark.skipif(
        not os.path.exists("/proc/meminfo") or _available_bytes() < BYTES_NEEDED,
        reason=f"needs {BYTES_NEEDED / 2**30:.1f} GiB of available memory",
    ),
]


def test_more_than_2_pow_31_elements_on_the_host():
    gen = torch.Generator().manual_seed(41)
    boundary = ROW_OF_2_POW_31 + 2
    lengths = [boundary, S - 40 - boundary, 40]
    cu_host = torch.tensor([0, *lengths]).cumsum(0)
    block = torch.randn(PERIOD, C, generator=gen).to(torch.bfloat16)
    x = torch.empty(S, C, dtype=torch.bfloat16)
    for r0 in range(0, S, PERIOD):
        x[r0 : r0 + PERIOD] = block[: min(PERIOD, S - r0)]
    dy = torch.zeros(S, C, dtype=torch.bfloat16)
    for r0, r1 in WINDOWS:
        dy[r0:r1] = torch.randn(r1 - r0, C, generator=gen).to(torch.bfloat16)
    case = Case(
        x=x,
        weight=torch.randn(C, 4, generator=gen) * 0.5,
        cu_seqlens=cu_host.to(torch.int32),
        cu_host=cu_host,
        bias=torch.randn(C, generator=gen) * 0.5,
        dy=dy,
        policy="bf16",
    )
    assert case.S * case.C > 2**31
    refs = [reference_window(case, r0, r1) for r0, r1 in WINDOWS]

    y = cake.cake_causal_conv1d_train_forward(x, case.weight, case.cu_seqlens, bias=case.bias)
    for (r0, r1), ref in zip(WINDOWS, refs, strict=True):
        assert_exact(f"y[{r0}:{r1}]", rows(y)[r0:r1], ref.y, ref.y_floor)
    del y

    dx, dweight, dbias = cake.cake_causal_conv1d_train_backward(
        x, case.weight, case.cu_seqlens, dy, bias=case.bias
    )
    for (r0, r1), ref in zip(WINDOWS, refs, strict=True):
        assert_exact(f"dx[{r0}:{r1}]", rows(dx)[r0:r1], ref.dx, ref.dx_floor)
    rel = accumulation_rel(case)
    for name, got in (("dweight", dweight), ("dbias", dbias)):
        ref = sum(getattr(r, name) for r in refs)
        terms = sum(getattr(r, name + "_terms") for r in refs)
        slack = sum(getattr(r, name + "_slack") for r in refs)
        assert_close(name, got, ref, param_tolerance(ref, terms, slack, got.dtype, rel, case.S))

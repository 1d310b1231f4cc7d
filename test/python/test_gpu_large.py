# SPDX-License-Identifier: Apache-2.0
"""More than 2**31 elements: offsets past int32 range in every kernel.

x is [S, 4096] bf16 with S = 2**31 // 4096 + 64 (4.3 GB per tensor, about 18 GB in
all). y and dx are compared on row windows (around element 2**31, where a document
starts, and the last rows, across another document start) against the reference
computed on just those rows' neighbourhoods; dweight and dbias against the reference
summed window by window over all rows.
"""

import pytest
import torch
from cake_testing import (
    assert_close,
    make_case,
    param_tolerance,
    reference_window,
    requires_cake_gpu,
    rows,
    run_into_buffers,
)

pytestmark = [pytest.mark.gpu, requires_cake_gpu]

C = 4096
ROW_OF_2_POW_31 = 2**31 // C  # the first row whose elements lie at offsets >= 2**31
S = ROW_OF_2_POW_31 + 64


def test_more_than_2_pow_31_elements():
    boundary = ROW_OF_2_POW_31 + 2
    case = make_case([boundary, S - 40 - boundary, 40], C, seed=40)
    assert case.S * case.C > 2**31
    y, dx, dweight, dbias = run_into_buffers(case)
    torch.cuda.synchronize()  # launch errors surface here

    for r0, r1 in ((ROW_OF_2_POW_31 - 8, ROW_OF_2_POW_31 + 8), (S - 64, S)):
        ref = reference_window(case, r0, r1)
        assert_close(f"y[{r0}:{r1}]", rows(y)[r0:r1], ref.y, ref.y_tol)
        assert_close(f"dx[{r0}:{r1}]", rows(dx)[r0:r1], ref.dx, ref.dx_tol)

    # Windows are summed one at a time: each holds several GB of float64.
    sums = {"dweight": 0, "dweight_slack": 0, "dbias": 0, "dbias_slack": 0}
    for r0 in range(0, S, 32768):
        part = reference_window(case, r0, min(r0 + 32768, S))
        for key in sums:
            sums[key] = sums[key] + getattr(part, key)
        del part
    for name, got in (("dweight", dweight), ("dbias", dbias)):
        ref, slack = sums[name], sums[name + "_slack"]
        assert_close(name, got, ref, param_tolerance(ref, slack, got.dtype, case.policy))

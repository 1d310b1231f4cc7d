# SPDX-License-Identifier: Apache-2.0
"""Large launches on the GPU.

More than 2**31 elements: offsets past int32 range in every kernel. x is [S, 4096]
bf16 with S = 2**31 // 4096 + 64 (4.3 GB per tensor, about 18 GB in all). y and dx
are compared on row windows (around element 2**31, where a document starts, and the
last rows, across another document start) against the reference computed on just
those rows' neighbourhoods; dweight and dbias against the reference summed window by
window over all rows.

A forward whose parts its max_part_tokens sets, more than its waves allow: 37000 x
4096 (152M elements), all outputs against the reference.
"""

import cake
import pytest
import torch
from cake_testing import (
    accumulation_rel,
    assert_close,
    assert_exact,
    assert_outputs,
    make_case,
    param_tolerance,
    random_lengths,
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


def test_forward_in_parts_of_its_longest_part():
    # On an H100 or H200 (132 SMs) the route's `_long` configuration holds 115
    # parts of 4096 channels a wave, 1840 in its 16 waves: 20.1 tokens each, past
    # its longest; its 2056 parts of 18 fill 98.9% of their waves, within 2 points
    # of the first configuration's 100%, so the rule launches it.
    S, C = 37_000, 4096
    case = make_case(random_lengths(S, 8, seed=41), C, seed=42)
    extension, index = cake._ops.require_supported(case.x.device)
    name, parts = extension.forward_launch(S, C, "f32", "f32", index)
    longest = {k["name"]: k["max_part_tokens"] for k in extension.kernels() if k["target"] == "gpu"}
    assert longest[name] > 0, f"{name} has no longest part"
    assert parts == -(-S // longest[name]), f"{name}: {parts} parts, not S / max_part_tokens"
    y, dx, dweight, dbias = run_into_buffers(case)
    assert_outputs(case, y=y, dx=dx, dweight=dweight, dbias=dbias)

# SPDX-License-Identifier: Apache-2.0
"""The float64 reference (cake.reference) and the tolerance helpers, on the CPU.

The reference is checked three ways: a case worked by hand, a scalar Python loop
written straight from the spec's formulas, and torch.autograd through the
reference's own forward (fp32 policy, where the backward is the exact derivative).
"""

import math
import struct

import cake_testing
import pytest
import torch
from cake import reference

BF16 = torch.bfloat16


def test_preactivation_by_hand():
    # Documents: [5] then [1, 2, 3, 4] (same value in every channel); w = [1, 2, 3, 4]
    # where w[3] multiplies the current token; bias 0.5.
    C = 8
    x = torch.tensor([5.0, 1.0, 2.0, 3.0, 4.0])[:, None].expand(5, C).to(BF16)
    weight = torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(C, 4)
    cu = torch.tensor([0, 1, 5], dtype=torch.int32)
    pre = reference.preactivation(x, weight, cu, torch.full((C,), 0.5))
    # 4*5 ; 4*1 (not 3*5: a new document) ; 3*1 + 4*2 ; 2*1 + 3*2 + 4*3 ; 1 + 4 + 9 + 16
    expected = torch.tensor([20.0, 4.0, 11.0, 20.0, 30.0]) + 0.5
    assert torch.equal(pre, expected[:, None].expand(5, C).double())
    y, y_bf16 = reference.causal_conv1d_forward_ref(x, weight, cu)
    assert y[1, 0].item() == pytest.approx(4.0 / (1.0 + math.exp(-4.0)), rel=1e-15)
    # 3.92806 lies between the bf16 neighbours 3.921875 and 3.9375 (spacing 1/64 in [2, 4)).
    assert y_bf16.dtype == BF16 and y_bf16[1, 0].item() == 3.921875


def _bf16_round(v: float) -> float:
    """Round a float to bf16 through fp32, nearest-even, with integer arithmetic."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _loop_reference(x, weight, cu, bias, dy, policy):
    """The spec's formulas, one scalar at a time."""
    S, C = x.shape
    x, w, dy = x.double().tolist(), weight.double().tolist(), dy.double().tolist()
    b = [0.0] * C if bias is None else bias.double().tolist()
    cu = cu.tolist()
    doc = [d for d in range(len(cu) - 1) for _ in range(cu[d], cu[d + 1])]
    start = [cu[doc[t]] for t in range(S)]
    end = [cu[doc[t] + 1] for t in range(S)]

    def xz(u, t, c):  # x[u] as seen from token t
        return x[u][c] if u >= start[t] else 0.0

    pre = [
        [sum(w[c][k] * xz(t - 3 + k, t, c) for k in range(4)) + b[c] for c in range(C)]
        for t in range(S)
    ]
    y = [[p / (1 + math.exp(-p)) for p in row] for row in pre]
    g = [[0.0] * C for _ in range(S)]
    for t in range(S):
        for c in range(C):
            z = _bf16_round(pre[t][c]) if policy == "bf16" else pre[t][c]
            s = 1 / (1 + math.exp(-z))
            g[t][c] = dy[t][c] * s * (1 + z * (1 - s))
    dx = [
        [sum(w[c][k] * g[u + 3 - k][c] for k in range(4) if u + 3 - k < end[u]) for c in range(C)]
        for u in range(S)
    ]
    dw = [
        [sum(g[t][c] * xz(t - 3 + k, t, c) for t in range(S)) for k in range(4)] for c in range(C)
    ]
    db = [sum(g[t][c] for t in range(S)) for c in range(C)]
    return torch.tensor(y, dtype=torch.float64).reshape(S, C), (
        torch.tensor(dx, dtype=torch.float64).reshape(S, C),
        torch.tensor(dw, dtype=torch.float64).reshape(C, 4),
        torch.tensor(db, dtype=torch.float64),
    )


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
@pytest.mark.parametrize(
    "weight_dtype, bias_dtype",
    [
        (torch.float32, torch.float32),
        (BF16, None),
        (torch.float32, BF16),
    ],
)
def test_matches_scalar_loops(policy, weight_dtype, bias_dtype):
    # Empty documents first, in the middle and last; documents of length 1, 3 and 5.
    lengths = [0, 1, 3, 0, 5, 2, 0]
    case = cake_testing.make_case(
        lengths,
        8,
        weight_dtype=weight_dtype,
        bias_dtype=bias_dtype,
        policy=policy,
        seed=3,
        device="cpu",
    )
    want_y, (want_dx, want_dw, want_db) = _loop_reference(
        case.x, case.weight, case.cu_seqlens, case.bias, case.dy, policy
    )
    y, y_bf16 = reference.causal_conv1d_forward_ref(case.x, case.weight, case.cu_seqlens, case.bias)
    dx, dw, db = reference.causal_conv1d_backward_ref(
        case.x, case.weight, case.cu_seqlens, case.dy, case.bias, policy
    )
    torch.testing.assert_close(y, want_y, rtol=1e-13, atol=1e-13)
    assert torch.equal(y_bf16, want_y.float().to(BF16))
    torch.testing.assert_close(dx, want_dx, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(dw, want_dw, rtol=1e-13, atol=1e-13)
    if bias_dtype is None:
        assert db is None
    else:
        torch.testing.assert_close(db, want_db, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("batch", [False, True])
def test_fp32_policy_backward_is_autograd_of_forward(batch):
    case = cake_testing.make_case(
        cake_testing.random_lengths(200, 9, seed=1), 16, seed=2, batch_dim=batch, device="cpu"
    )
    x, w, b = (t.double().requires_grad_() for t in (case.x, case.weight, case.bias))
    y, _ = reference.causal_conv1d_forward_ref(x, w, case.cu_seqlens, b)
    want = torch.autograd.grad(y, (x, w, b), case.dy.double())
    got = reference.causal_conv1d_backward_ref(
        case.x, case.weight, case.cu_seqlens, case.dy, case.bias, "fp32"
    )
    assert got[0].shape == case.x.shape
    for name, g, a in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        torch.testing.assert_close(g, a, rtol=1e-12, atol=1e-12, msg=name)


def test_forward_is_differentiable_gradcheck():
    # Independent of the analytic backward: finite differences of the reference forward.
    case = cake_testing.make_case([2, 0, 5], 8, seed=4, device="cpu")
    x, w, b = (t.double().requires_grad_() for t in (case.x, case.weight, case.bias))
    assert torch.autograd.gradcheck(
        lambda x, w, b: reference.causal_conv1d_forward_ref(x, w, case.cu_seqlens, b)[0],
        (x, w, b),
    )


@pytest.mark.parametrize("cu", [[1, 4], [0, 3], [0, 3, 2, 4]])
def test_rejects_malformed_cu_seqlens(cu):
    with pytest.raises(ValueError, match="cu_seqlens"):
        reference.document_bounds(torch.tensor(cu, dtype=torch.int32), 4)


def test_empty_input():
    case = cake_testing.make_case([], 8, device="cpu")
    dx, dw, db = reference.causal_conv1d_backward_ref(
        case.x, case.weight, case.cu_seqlens, case.dy, case.bias
    )
    assert dx.shape == (0, 8) and torch.equal(dw, torch.zeros(8, 4, dtype=torch.float64))


# The tolerance helpers of the GPU tests, exercised on the CPU with outputs made
# from the reference itself.


def test_bf16_ulp():
    v = torch.tensor([1.0, 1.5, -3.0, 0.0, 2.0**-130], dtype=torch.float64)
    want = torch.tensor([2.0**-7, 2.0**-7, 2.0**-6, 2.0**-133, 2.0**-133], dtype=torch.float64)
    assert torch.equal(cake_testing.bf16_ulp(v), want)


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_rounded_reference_passes_and_off_by_two_ulps_fails(policy):
    case = cake_testing.make_case(
        cake_testing.random_lengths(300, 5, seed=5), 16, policy=policy, seed=6, device="cpu"
    )
    _, y = reference.causal_conv1d_forward_ref(case.x, case.weight, case.cu_seqlens, case.bias)
    dx, dw, db = reference.causal_conv1d_backward_ref(
        case.x, case.weight, case.cu_seqlens, case.dy, case.bias, policy
    )
    cake_testing.assert_outputs(
        case, y=y, dx=dx.float().to(BF16), dweight=dw.float(), dbias=db.float()
    )
    bumped = y.clone()
    bumped[7, 3] = y[7, 3].double() + 2 * cake_testing.bf16_ulp(y[7, 3].double())
    with pytest.raises(AssertionError, match=r"y: 1 of 4800 elements .* first at \[7, 3\]"):
        cake_testing.assert_outputs(case, y=bumped)
    poisoned = dw.float().clone()
    poisoned[2, 1] = float("nan")
    with pytest.raises(AssertionError, match="dweight"):
        cake_testing.assert_outputs(case, dweight=poisoned)


def test_window_matches_whole_reference():
    case = cake_testing.make_case([40, 3, 0, 57], 8, seed=7, device="cpu")
    whole = cake_testing.reference_window(case, 0, case.S)
    parts = [cake_testing.reference_window(case, r0, r0 + 20) for r0 in range(0, 100, 20)]
    torch.testing.assert_close(torch.cat([p.y for p in parts]), whole.y, rtol=1e-15, atol=0)
    torch.testing.assert_close(torch.cat([p.dx for p in parts]), whole.dx, rtol=1e-15, atol=0)
    torch.testing.assert_close(sum(p.dweight for p in parts), whole.dweight, rtol=1e-13, atol=0)
    torch.testing.assert_close(sum(p.dbias for p in parts), whole.dbias, rtol=1e-13, atol=0)


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_rounding_flip_slack_is_rare(policy):
    # Under "bf16", dx gets slack beyond the fp32 floor only next to the few pre values
    # within fp32 error of a bf16 rounding midpoint; under "fp32", nowhere.
    case = cake_testing.make_case(
        cake_testing.random_lengths(4000, 3, seed=8), 64, policy=policy, seed=9, device="cpu"
    )
    window = cake_testing.reference_window(case, 0, case.S)
    flips = int(((window.dx_tol - cake_testing.bf16_ulp(window.dx)) > 1e-4).sum())
    if policy == "bf16":
        assert 0 < flips < 0.01 * window.dx.numel()
    else:
        assert flips == 0

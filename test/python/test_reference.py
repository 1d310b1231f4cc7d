# SPDX-License-Identifier: Apache-2.0
"""The float64 reference (cake.reference) and the tolerance helpers, on the CPU.

The reference is checked three ways: a case worked by hand, a scalar Python loop
written straight from the spec's formulas, and torch.autograd through the
reference's own forward (fp32 policy, where the backward is the exact derivative).
"""

import math
import struct

import cake
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


def test_ulps():
    v = torch.tensor([1.0, 1.5, -3.0, 0.0, 2.0**-130, 2.0**-140], dtype=torch.float64)
    want = [2.0**-7, 2.0**-7, 2.0**-6, 2.0**-133, 2.0**-133, 2.0**-133]
    assert cake_testing.bf16_ulp(v).tolist() == want
    want = [2.0**-23, 2.0**-23, 2.0**-22, 2.0**-149, 2.0**-149, 2.0**-149]
    assert cake_testing.f32_ulp(v).tolist() == want


def from_order(order: torch.Tensor) -> torch.Tensor:
    """The bf16 values whose cake_testing.bf16_order is ``order``."""
    bits = torch.where(order < 0, (-order) | 0x8000, order)
    return bits.to(torch.int32).to(torch.int16).view(BF16)


def test_bf16_order_counts_bf16_values():
    sub = 2.0**-133
    v = torch.tensor(
        [0.0, -0.0, sub, -sub, 2 * sub, 1.0, 1.0 + 2**-7, -1.0, math.inf, -math.inf],
        dtype=torch.float64,
    )
    order = cake_testing.bf16_order(v)
    assert order[:5].tolist() == [0, 0, 1, -1, 2]
    assert order[6] - order[5] == 1 and order[7] == -order[5]
    largest = cake_testing.bf16_order(torch.tensor([3.3895e38], dtype=torch.float64))
    assert order[8] == largest + 1 and order[9] == -order[8]
    # Through fp32, as the kernels round: 1 + 2**-8 is a tie, to even (1.0).
    assert cake_testing.bf16_order(torch.tensor([1 + 2**-8], dtype=torch.float64)) == order[5]
    assert torch.equal(from_order(order).double(), v.float().bfloat16().double())


def exact_case(n: int):
    """n reference values (float64) of all sizes, with a zero floor."""
    gen = torch.Generator().manual_seed(n)
    want = torch.randn(n, generator=gen, dtype=torch.float64) * 10 ** torch.randint(
        -40, 30, (n,), generator=gen
    )
    return want, torch.zeros_like(want)


def test_exact_allows_one_ulp_in_a_thousand():
    want, floor = exact_case(4800)  # 4 elements may be off by one
    got = want.float().bfloat16()
    cake_testing.assert_exact("y", got, want, floor)
    order = cake_testing.bf16_order(want)
    bumped = from_order(order + (torch.arange(4800) % 1000 == 7).long())  # 5 elements
    with pytest.raises(AssertionError, match=r"y: 5 of 4800 .*at most 4 such elements"):
        cake_testing.assert_exact("y", bumped, want, floor)
    four = from_order(
        order - ((torch.arange(4800) % 1000 == 7) & (torch.arange(4800) < 4000)).long()
    )
    cake_testing.assert_exact("y", four, want, floor)
    with pytest.raises(AssertionError, match=r"y: 1 of 4800 .* first at \[123\].*2 bf16 ulps"):
        cake_testing.assert_exact(
            "y", from_order(order + 2 * (torch.arange(4800) == 123).long()), want, floor
        )
    # One ulp off everywhere, the bug the old one-ulp tolerance let through.
    with pytest.raises(AssertionError, match="4800 of 4800"):
        cake_testing.assert_exact("y", from_order(order + 1), want, floor)


def test_exact_allows_no_ulp_below_a_thousand_elements():
    want, floor = exact_case(999)
    order = cake_testing.bf16_order(want)
    with pytest.raises(AssertionError, match="at most 0 such elements"):
        cake_testing.assert_exact(
            "dx", from_order(order + (torch.arange(999) == 0).long()), want, floor
        )


def test_exact_counts_subnormal_ulps_and_floor():
    sub = 2.0**-133
    want = torch.tensor([3 * sub, sub, 1.0, 1.0], dtype=torch.float64)
    floor = torch.tensor([0.0, 0.0, 0.0, 2.0**-8 + 2.0**-12], dtype=torch.float64)
    cake_testing.assert_exact("y", want.float().bfloat16(), want, floor)
    for got, ulps in (([4 * sub, sub, 1.0, 1.0], 1), ([5 * sub, sub, 1.0, 1.0], 2)):
        with pytest.raises(AssertionError, match=f"{ulps} bf16 ulp"):
            cake_testing.assert_exact("y", torch.tensor(got).bfloat16(), want, floor)
    # A flush to zero of a subnormal result is one subnormal ulp off.
    with pytest.raises(AssertionError, match="1 bf16 ulp"):
        cake_testing.assert_exact(
            "y", torch.tensor([3 * sub, 0.0, 1.0, 1.0]).bfloat16(), want, floor
        )
    # A floor a little over half an ulp lets 1.0 round either way: both neighbours are
    # bf16 of a value within it; the next ones are not.
    for last in (1 + 2**-7, 1 - 2**-8):
        cake_testing.assert_exact(
            "y", torch.tensor([3 * sub, sub, 1.0, last]).bfloat16(), want, floor
        )
    for last in (1 + 2**-6, 1 - 2**-7):
        with pytest.raises(AssertionError, match="1 bf16 ulp"):
            got = torch.tensor([3 * sub, sub, 1.0, last]).bfloat16()
            cake_testing.assert_exact("y", got, want, floor)


def test_nonfinite_must_match_the_reference():
    nan, inf = math.nan, math.inf
    want = torch.tensor([nan, inf, -inf, 1.0], dtype=torch.float64)
    floor = torch.tensor([nan, inf, nan, 0.0], dtype=torch.float64)
    cake_testing.assert_exact("dx", torch.tensor([nan, inf, -inf, 1.0]).bfloat16(), want, floor)
    cake_testing.assert_close("db", torch.tensor([nan, inf, -inf, 1.0]), want, floor)
    for got in (
        [0.0, inf, -inf, 1.0],
        [nan, -inf, -inf, 1.0],
        [nan, inf, 3e38, 1.0],
        [nan, inf, -inf, nan],
    ):
        with pytest.raises(AssertionError, match="1 of 4 elements wrong"):
            cake_testing.assert_exact("dx", torch.tensor(got).bfloat16(), want, floor)
        with pytest.raises(AssertionError, match="1 of 4 elements wrong"):
            cake_testing.assert_close("db", torch.tensor(got), want, floor)


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


def test_param_tolerance_is_per_channel():
    # A channel whose gradient is small next to the others is measured on its own
    # terms: an error far below the old "1e-5 of the largest element" fails.
    case = cake_testing.make_case([500], 16, seed=10, device="cpu")
    case.dy[:, 0] *= 1e-3
    _, dw, db = reference.causal_conv1d_backward_ref(
        case.x, case.weight, case.cu_seqlens, case.dy, case.bias, "bf16"
    )
    window = cake_testing.reference_window(case, 0, case.S)
    rel = cake_testing.accumulation_rel(case)
    tol = cake_testing.param_tolerance(
        window.dweight, window.dweight_terms, window.dweight_slack, torch.float32, rel, case.S
    )
    wrong = dw.clone()
    wrong[0, 2] += 20 * tol[0, 2]
    assert 20 * tol[0, 2] < 1e-5 * dw.abs().max()
    cake_testing.assert_outputs(case, dweight=dw.float(), dbias=db.float())
    with pytest.raises(AssertionError, match=r"dweight: 1 of 64 elements wrong; first at \[0, 2\]"):
        cake_testing.assert_outputs(case, dweight=wrong.float())


def test_accumulation_depth_follows_the_parts(monkeypatch):
    class Extension:
        @staticmethod
        def backward_parts(S, C, weight, bias, policy, device_index):
            assert (weight, bias, device_index) == ("f32", "f32", 0)
            return {"bf16": 66, "fp32": 132}[policy]

    monkeypatch.setattr(cake._ops, "require_supported", lambda device: (Extension, 0))
    monkeypatch.setattr(
        cake._ops, "support_problem", lambda device: None if device.type == "cuda" else "none"
    )
    cuda, f32 = torch.device("cuda"), torch.float32

    def depth(S, C, policy="bf16"):
        return cake_testing.accumulation_depth(S, C, f32, f32, policy, cuda)

    # The longest part, then the sum of the partial rows.
    assert depth(32768, 4096) == 497 + 66
    assert depth(32768, 4096, "fp32") == 249 + 132
    assert depth(0, 8) == 1
    # A device without kernels: any order of summation.
    assert cake_testing.accumulation_depth(5000, 8, f32, f32, "bf16", torch.device("meta")) == 5001


def test_extreme_case_has_what_it_claims():
    lengths = [0, 1, 2, 3, 50, 700, 2000, 0, 300]
    case = cake_testing.make_extreme_case(lengths, 64, seed=12, device="cpu")
    pre = reference.preactivation(case.x, case.weight, case.cu_seqlens, case.bias)
    finite = pre[pre.isfinite()]
    assert finite.abs().max() > 8000
    assert ((finite > -104) & (finite < -87)).sum() > 1000
    x = case.x.float()
    assert (x.abs() < 2.0**-126).sum() > 100 and (x != 0).all()
    starts = case.cu_host[:-1][torch.tensor(lengths) > 0][:3]
    assert x[starts].isinf().any() and x[starts].isnan().any()
    assert int(x.isinf().sum()) == 4 and int(x.isnan().sum()) == 2


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_extreme_reference_passes_and_nonfinite_is_checked(policy):
    case = cake_testing.make_extreme_case(
        [3, 1, 40, 2, 0, 90, 5, 7], 32, policy=policy, bias_dtype=BF16, seed=13, device="cpu"
    )
    _, y = reference.causal_conv1d_forward_ref(case.x, case.weight, case.cu_seqlens, case.bias)
    dx, dw, db = reference.causal_conv1d_backward_ref(
        case.x, case.weight, case.cu_seqlens, case.dy, case.bias, policy
    )
    outputs = dict(y=y, dx=dx.float().to(BF16), dweight=dw.float(), dbias=db.to(BF16))
    cake_testing.assert_outputs(case, **outputs)
    # inf and NaN in x make NaN of y (pre = -inf: -inf * 0), of g near them, so of dx
    # near them and of the channel's dweight and dbias; other channels stay finite.
    assert y.isnan().any() and dx.isnan().any() and dw.isnan().any() and db.isnan().any()
    assert dw.isfinite().all(dim=1).sum() == 32 - 6
    for name in ("y", "dx", "dbias"):
        wrong = outputs[name].clone()
        flat = wrong.view(-1)
        flat[flat.float().isnan().nonzero()[0]] = 0
        with pytest.raises(AssertionError, match=f"{name}: 1 of"):
            cake_testing.assert_outputs(case, **{name: wrong})


def test_window_matches_whole_reference():
    case = cake_testing.make_case([40, 3, 0, 57], 8, seed=7, device="cpu")
    whole = cake_testing.reference_window(case, 0, case.S)
    parts = [cake_testing.reference_window(case, r0, r0 + 20) for r0 in range(0, 100, 20)]
    for name in ("y", "y_floor", "dx", "dx_floor"):
        torch.testing.assert_close(
            torch.cat([getattr(p, name) for p in parts]), getattr(whole, name), rtol=1e-15, atol=0
        )
    for name in ("dweight", "dweight_terms", "dweight_slack", "dbias", "dbias_terms"):
        torch.testing.assert_close(
            sum(getattr(p, name) for p in parts), getattr(whole, name), rtol=1e-13, atol=0
        )


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_rounding_flip_slack_is_rare(policy):
    # Under "bf16", dx gets a floor beyond fp32 rounding only next to the few pre values
    # within fp32 error of a bf16 rounding midpoint; under "fp32", nowhere.
    case = cake_testing.make_case(
        cake_testing.random_lengths(4000, 3, seed=8), 64, policy=policy, seed=9, device="cpu"
    )
    window = cake_testing.reference_window(case, 0, case.S)
    flips = int((window.dx_floor > 1e-4).sum())
    if policy == "bf16":
        assert 0 < flips < 0.01 * window.dx.numel()
    else:
        assert flips == 0
    # Elsewhere it is fp32-sized, far below a bf16 ulp but where terms cancel.
    for value, floor in ((window.y, window.y_floor), (window.dx, window.dx_floor)):
        assert (floor > cake_testing.bf16_ulp(value) / 16).double().mean() < 0.01

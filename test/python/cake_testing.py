# SPDX-License-Identifier: Apache-2.0
"""Shared test helpers: random and extreme cases, the float64 reference with error
bounds, and the asserts of the GPU tests.

What the kernels may differ from the float64 reference (``cake.reference``, the
formulas of SPEC.md) by:

y and dx are exact up to fp32 rounding. Each element must be bf16(v) for some v in
[ref - floor, ref + floor] (v rounded to bf16 through fp32, as the kernels round),
where ``floor`` bounds how far the kernels' fp32 arithmetic can move the value. At most
n // 1000 elements of an n-element output may be one bf16 ulp outside that set, and
none further; ulps are counted in bf16 values, so subnormal results count in bf16's
subnormal spacing (2**-133) and a flush to zero is not excused. Rounded down, the
allowance is 0 below 1000 elements: the floor already covers every rounding the
model knows, so the allowance is only a margin for a rare one it does not (a fast-math
instruction a little worse than assumed), and a small tensor has no more of those to
spare than a large one. Where the reference is NaN the kernel must give NaN; where it
is +-inf, the same inf (``cake.reference`` keeps the float64 formula: 0 * inf = NaN).

dweight and dbias are compared per element, i.e. per channel (and tap), never against
the largest element: |got - ref| <= rel * sum_t |g x| + slack + abs + rounding, where
- rel = u + depth * u_acc: u = 2**-24 for the product g * x rounded in fp32, and the
  accumulation error bound of summation, depth * u_acc * sum |terms|, with u_acc =
  2**-24 for the fp32 accumulators of the "bf16" policy and 2**-53 for the fp64 ones
  of "fp32" (SPEC.md); depth is the longest chain of additions a term goes through:
  the tokens one partial row walks plus the R rows the reduce kernel adds
  (docs/kernel-abi.md), taken from the manifest and the device's SM count; S + 1 (any
  summation order) for CPU cases;
- slack = sum_t |x| * g_err: how far g itself may be off (below);
- abs = (S + 1) * 2**-149: fp32 subnormal rounding of products and sums;
- rounding: half an fp32 ulp at |ref| + error, plus half a bf16 ulp for bf16 params.

The floor model, with u = 2**-24, EPS = 8u ("8 fp32 ulps of the magnitude of the
terms") and TINY = 2**-146 (8 units of fp32's subnormal spacing):
- pre: 4 FMAs and the bias, |pre32 - pre| <= spread = EPS * (sum_k |w_k x_k| + |b|) +
  TINY. This only matters under cancellation, where pre is small against its terms.
- SiLU from the kernel's pre32: fp32 exp rounds its argument, which costs |pre| * u
  relatively, so y is off by (EPS + |pre| u) |y| + |pre| * TINY (a subnormal sigmoid is
  rounded absolutely) + max|silu'| * spread, max|silu'| over the interval from
  |silu''| <= min(0.5, e**-d (2 + d)), d the interval's distance from 0.
- SiLU' (g = dy s (1 + z (1 - s))): z is the kernel's view of pre. Under "fp32" it is
  within spread of pre; under "bf16" it is bf16(pre32), which equals the reference's
  bf16(pre) unless pre +- spread straddles a bf16 rounding midpoint: then the two z
  differ by one bf16 ulp (no reference can know on which side the kernel's fp32 sum
  lands). g moves by at most |dy| max|silu''| |dz| for that, plus its own rounding,
  (EPS + |z| u) |dy| s (1 + |z| (1 - s)) + (1 + |dy|) (1 + |z|) TINY, the last for a
  subnormal s or product of it (dy s is rounded to 2**-150 whatever dy is).
- dx = sum_k w_k g: the g errors through |w|, plus EPS sum_k |w_k g| + TINY.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cake
import pytest
import torch
from cake import reference
from torch.utils._python_dispatch import TorchDispatchMode

WIDTH = reference.WIDTH
#: fp32's unit roundoff.
U = 2.0**-24
#: The relative rounding of a short fp32 chain: 8 fp32 ulps of its terms' magnitude.
EPS = 8 * U
#: Absolute rounding of subnormal fp32 intermediates: 8 units of 2**-149.
TINY = 2.0**-146
#: fp32's subnormal spacing.
F32_SUBNORMAL = 2.0**-149
#: Unit roundoff of the dweight/dbias accumulators of each policy (SPEC.md).
ACC_U = {"bf16": U, "fp32": 2.0**-53}
#: At most n // OFF_BY_ONE_PER elements of y or dx may be one bf16 ulp outside.
OFF_BY_ONE_PER = 1000
ROUTES = [
    (bias_dtype, weight_dtype, policy)
    for bias_dtype in (None, torch.float32, torch.bfloat16)
    for weight_dtype in (torch.float32, torch.bfloat16)
    for policy in ("bf16", "fp32")
]
_DTYPE_NAMES = {None: "none", torch.float32: "f32", torch.bfloat16: "bf16"}


def route_id(route) -> str:
    bias_dtype, weight_dtype, policy = route
    return f"bias_{_DTYPE_NAMES[bias_dtype]}-weight_{_DTYPE_NAMES[weight_dtype]}-policy_{policy}"


def _skip_reason(device: str) -> str | None:
    """Why the kernels cannot run on ``device`` (the message says), or None."""
    if device == "cuda" and not torch.cuda.is_available():
        return "no CUDA device"
    try:
        cake.cake_causal_conv1d_train_backward_workspace_bytes(0, 8, device)
    except RuntimeError as error:
        return str(error)
    return None


_SKIP_REASON = _skip_reason("cuda")
#: Marks a test that launches the kernels; skipped with the reason when it cannot.
requires_cake_gpu = pytest.mark.skipif(_SKIP_REASON is not None, reason=_SKIP_REASON or "")

_CPU_SKIP_REASON = _skip_reason("cpu")
#: Marks a test that runs the host kernels on the CPU.
requires_cake_cpu = pytest.mark.skipif(_CPU_SKIP_REASON is not None, reason=_CPU_SKIP_REASON or "")

#: Runs a test (which takes ``device``) on each target: the host kernels on the CPU,
#: the GPU kernels on the current CUDA device.
every_device = pytest.mark.parametrize(
    "device",
    [
        pytest.param("cpu", marks=requires_cake_cpu),
        pytest.param("cuda", marks=[pytest.mark.gpu, requires_cake_gpu]),
    ],
)


def synchronize(device: str) -> None:
    """Waits for the kernels launched on ``device`` (the host kernels return done)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def rows(t: torch.Tensor) -> torch.Tensor:
    """[S, C] view of an [S, C] or [1, S, C] tensor."""
    return t.reshape(-1, t.shape[-1])


@dataclass
class Case:
    """Inputs of one forward + backward."""

    x: torch.Tensor  # bf16 [S, C] or [1, S, C]
    weight: torch.Tensor
    cu_seqlens: torch.Tensor  # int32, on x's device
    cu_host: torch.Tensor  # int64 copy on the CPU, for the reference's windows
    bias: torch.Tensor | None
    dy: torch.Tensor
    policy: str

    @property
    def S(self) -> int:
        return rows(self.x).shape[0]

    @property
    def C(self) -> int:
        return self.x.shape[-1]


def random_lengths(S: int, num_docs: int, seed: int) -> list[int]:
    """num_docs document lengths summing to S, cut at uniform random points (empty
    documents possible)."""
    gen = torch.Generator().manual_seed(seed)
    cuts = torch.randint(0, S + 1, (num_docs - 1,), generator=gen).sort().values
    bounds = torch.cat([torch.tensor([0]), cuts, torch.tensor([S])])
    return (bounds[1:] - bounds[:-1]).tolist()


def make_case(
    lengths: list[int],
    C: int,
    *,
    weight_dtype: torch.dtype = torch.float32,
    bias_dtype: torch.dtype | None = torch.float32,
    policy: str = "bf16",
    seed: int = 0,
    batch_dim: bool = False,
    device: str = "cuda",
) -> Case:
    """Fresh seeded random inputs (normal, so never zeros) for documents of ``lengths``."""
    S = sum(lengths)
    cu_host = torch.tensor([0] + lengths, dtype=torch.int64).cumsum(0)
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, dtype, scale=1.0):
        # In place: x and dy are large (several GB in the 2**31 test).
        return torch.randn(*shape, generator=gen, device=device, dtype=dtype).mul_(scale)

    shape = (1, S, C) if batch_dim else (S, C)
    return Case(
        x=randn(*shape, dtype=torch.bfloat16),
        weight=randn(C, WIDTH, dtype=weight_dtype, scale=0.5),
        cu_seqlens=cu_host.to(device=device, dtype=torch.int32),
        cu_host=cu_host,
        bias=None if bias_dtype is None else randn(C, dtype=bias_dtype, scale=0.5),
        dy=randn(*shape, dtype=torch.bfloat16),
        policy=policy,
    )


#: +inf, -inf and NaN go into x in these channels (the extreme case's C >= 16).
_SPECIAL_CHANNELS = (1, 2, 3, 5, 6, 7)


def make_extreme_case(
    lengths: list[int],
    C: int,
    *,
    weight_dtype: torch.dtype = torch.float32,
    bias_dtype: torch.dtype | None = torch.float32,
    policy: str = "bf16",
    seed: int = 0,
    device: str = "cuda",
) -> Case:
    """A case of extreme magnitudes (C >= 16), otherwise like ``make_case``:

    - x of log-uniform magnitude, 10**U(-4, 3.7) with random signs, so that |pre|
      reaches about 1e4 (weights are N(0, 0.25)); 1 entry in 64 a bf16 subnormal;
    - every 4th channel passes x through (weight [0, 0, 0, 1], bias 0: pre = x) with
      |x| in [85, 106], where exp(-|pre|) is an fp32 subnormal or underflows;
    - +inf, -inf and NaN in x at the first token of the first three non-empty
      documents and in the middle of the last three of length >= 3, one channel each
      (none a pass-through one).
    """
    case = make_case(
        lengths,
        C,
        weight_dtype=weight_dtype,
        bias_dtype=bias_dtype,
        policy=policy,
        seed=seed,
        device="cpu",
    )
    S = case.S
    gen = torch.Generator().manual_seed(seed + 1)
    sign = torch.randint(0, 2, (S, C), generator=gen) * 2 - 1
    x = sign * torch.pow(10.0, torch.empty(S, C).uniform_(-4, 3.7, generator=gen))
    tiny = torch.rand(S, C, generator=gen) < 1 / 64
    x = torch.where(tiny, sign * torch.randint(1, 128, (S, C), generator=gen) * 2.0**-133, x)
    band = torch.arange(C) % 4 == 0
    x[:, band] = (sign * torch.empty(S, C).uniform_(85, 106, generator=gen))[:, band]
    weight, bias = case.weight.clone(), case.bias
    weight[band] = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=weight.dtype)
    if bias is not None:
        bias = bias.clone()
        bias[band] = 0

    cu = case.cu_host.tolist()
    starts = [cu[d] for d in range(len(lengths)) if lengths[d] > 0][:3]
    middles = [cu[d] + lengths[d] // 2 for d in range(len(lengths)) if lengths[d] >= 3][-3:]
    values = (math.inf, -math.inf, math.nan) * 2
    # Short document lists get fewer of them.
    for row, channel, value in zip(starts + middles, _SPECIAL_CHANNELS, values, strict=False):
        x[row, channel] = value
    shape = case.x.shape
    return Case(
        x=x.to(torch.bfloat16).reshape(shape).to(device),
        weight=weight.to(device),
        cu_seqlens=case.cu_seqlens.to(device),
        cu_host=case.cu_host,
        bias=None if bias is None else bias.to(device),
        dy=case.dy.to(device),
        policy=policy,
    )


def nan_like(t: torch.Tensor | None) -> torch.Tensor | None:
    """A NaN-filled buffer like ``t``: an element the kernels do not write fails."""
    return None if t is None else torch.full_like(t, float("nan"))


def _ulp(v: torch.Tensor, mantissa_bits: int, min_exponent: int) -> torch.Tensor:
    """The spacing of a binary float format at |v| (float64), down to its subnormal
    spacing 2**min_exponent."""
    _, exponent = torch.frexp(v)  # v = m * 2**e with 0.5 <= |m| < 1
    exponent = torch.where(v == 0, min_exponent, exponent - mantissa_bits).clamp(min=min_exponent)
    return torch.ldexp(torch.ones_like(v), exponent)


def bf16_ulp(v: torch.Tensor) -> torch.Tensor:
    """The spacing of bf16 numbers at |v| (float64), down to bf16's subnormal spacing."""
    return _ulp(v, 8, -133)


def f32_ulp(v: torch.Tensor) -> torch.Tensor:
    """The spacing of fp32 numbers at |v| (float64), down to fp32's subnormal spacing."""
    return _ulp(v, 24, -149)


def bf16_order(v: torch.Tensor) -> torch.Tensor:
    """``v`` rounded to bf16 (through fp32, as the kernels round) as an int64 that counts
    bf16 values: neighbours differ by 1 (subnormals included), -0 and +0 are both 0,
    +-inf come right after the largest finite values. Meaningless for NaN."""
    bits = v.float().bfloat16().view(torch.int16).long()
    magnitude = bits & 0x7FFF
    return torch.where(bits < 0, -magnitude, magnitude)


def _silu_prime(v: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(v)
    return s * (1 + v * (1 - s))


def _silu2_bound(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """A bound of |silu''| on [lo, hi]. |silu''(v)| = s (1 - s) |2 + v (1 - 2 s)| is at
    most 0.5, and at most e**-|v| (2 + |v|) (as s (1 - s) <= e**-|v|), which falls with
    |v|: so at most min(0.5, e**-d (2 + d)), d the interval's distance from 0."""
    d = torch.maximum(torch.maximum(lo, -hi), torch.zeros_like(lo))
    return torch.minimum(torch.exp(-d) * (2 + d), torch.full_like(d, 0.5))


def _subnormal_error(s: torch.Tensor) -> torch.Tensor:
    """Absolute rounding, in fp32's subnormal range, of an fp32 sigmoid s and of the
    products made from it: TINY, but no more than s plus one subnormal step where s
    is that small, and none where s is below 2**-152 (it and its products round to 0,
    exactly what they are to within s)."""
    error = torch.clamp(s + F32_SUBNORMAL, max=TINY)
    return torch.where(s < 2.0**-152, s, error)


def _policy_z(pre: torch.Tensor, spread: torch.Tensor, policy: str):
    """(z of the reference, lo, hi, dz): the kernel's z lies in [lo, hi] and within dz
    of the reference's z."""
    if policy == "fp32":
        return pre, pre - spread, pre + spread, spread

    def to_bf16(v):
        return v.float().bfloat16().double()

    # lo == hi except where pre +- spread straddles a bf16 rounding midpoint.
    lo, hi = to_bf16(pre - spread), to_bf16(pre + spread)
    return to_bf16(pre), lo, hi, hi - lo


@dataclass
class Window:
    """Reference for rows [r0, r1): y and dx with their floors, and the rows'
    contributions to dweight/dbias with the sums of |terms| and the slack that g's own
    error adds (see the module docstring)."""

    y: torch.Tensor
    y_floor: torch.Tensor
    dx: torch.Tensor
    dx_floor: torch.Tensor
    dweight: torch.Tensor
    dweight_terms: torch.Tensor
    dweight_slack: torch.Tensor
    dbias: torch.Tensor
    dbias_terms: torch.Tensor
    dbias_slack: torch.Tensor


def reference_window(case: Case, r0: int, r1: int) -> Window:
    """The reference on rows [r0, r1) only, computed on those rows plus the halo they
    depend on (3 rows of x behind pre, 3 more behind g, 3 rows of g ahead of dx)."""
    halo = WIDTH - 1
    lo, hi = max(0, r0 - 2 * halo), min(case.S, r1 + halo)
    x, dy = rows(case.x)[lo:hi], rows(case.dy)[lo:hi]
    # Documents clipped to the window; a cut made at `lo` only affects halo rows.
    cu = (case.cu_host - lo).clamp(0, hi - lo).to(x.device)
    w, b = case.weight, case.bias

    pre = reference.preactivation(x, w, cu, b)
    terms = reference.preactivation(x.abs(), w.abs(), cu, None if b is None else b.abs())
    spread = EPS * terms + TINY  # bound on |kernel's fp32 pre - pre|
    y = pre * torch.sigmoid(pre)
    silu_slope = _silu_prime(pre).abs() + _silu2_bound(pre - spread, pre + spread) * spread
    y_floor = (
        (EPS + pre.abs() * U) * y.abs()
        + pre.abs() * _subnormal_error(torch.sigmoid(pre))
        + silu_slope * spread
        + TINY
    )

    z, z_lo, z_hi, dz = _policy_z(pre, spread, case.policy)
    s = torch.sigmoid(z)
    dy_abs = dy.double().abs()
    g = reference.silu_grad(pre, dy, case.policy)
    g_err = (
        dy_abs * _silu2_bound(z_lo, z_hi) * dz
        + (EPS + z.abs() * U) * dy_abs * s * (1 + z.abs() * (1 - s))
        # Subnormal rounding of s, and of a product of it with dy or (1 + z (1 - s)),
        # times what multiplies it after.
        + (1 + dy_abs) * (1 + z.abs()) * _subnormal_error(s)
    )
    dx = reference.input_grad(w, cu, g)
    dx_floor = reference.input_grad(w.abs(), cu, g_err + EPS * g.abs()) + TINY

    # where(), not a product: a NaN or inf in a halo row must not leak in as 0 * inf.
    in_rows = torch.zeros(hi - lo, 1, dtype=torch.bool, device=x.device)
    in_rows[r0 - lo : r1 - lo] = True

    def keep_rows(t):
        return torch.where(in_rows, t, 0)

    dweight, dbias = reference.param_grads(x, cu, keep_rows(g))
    dweight_terms, dbias_terms = reference.param_grads(x.abs(), cu, keep_rows(g.abs()))
    dweight_slack, dbias_slack = reference.param_grads(x.abs(), cu, keep_rows(g_err))
    keep = slice(r0 - lo, r1 - lo)
    return Window(
        y[keep],
        y_floor[keep],
        dx[keep],
        dx_floor[keep],
        dweight,
        dweight_terms,
        dweight_slack,
        dbias,
        dbias_terms,
        dbias_slack,
    )


def accumulation_depth(
    S: int,
    C: int,
    weight_dtype: torch.dtype,
    bias_dtype: torch.dtype | None,
    policy: str,
    device: torch.device,
) -> int:
    """The longest chain of additions that a term of dweight/dbias goes through in a
    backward (docs/kernel-abi.md): a partial row sums the tokens of its part, at most
    ceil(S / R), then the reduce kernel adds the R rows; R by the rule of the
    device's target (the host kernels' on the CPU). On a device without kernels (the
    float64 stand-ins' tests), S + 1, which bounds any order of summation."""
    if S == 0:
        return 1
    if cake._ops.support_problem(device) is not None:
        return S + 1
    extension, index = cake._ops.require_supported(device)
    parts = extension.backward_parts(
        S, C, _DTYPE_NAMES[weight_dtype], _DTYPE_NAMES[bias_dtype], policy, index
    )
    return math.ceil(S / parts) + parts


def accumulation_rel(case: Case) -> float:
    """rel of the dweight/dbias bound of ``case``: u for the fp32 product g * x plus
    depth * u_acc for the sums."""
    bias_dtype = None if case.bias is None else case.bias.dtype
    depth = accumulation_depth(
        case.S, case.C, case.weight.dtype, bias_dtype, case.policy, case.x.device
    )
    return U + depth * ACC_U[case.policy]


def param_tolerance(
    ref: torch.Tensor,
    terms: torch.Tensor,
    slack: torch.Tensor,
    dtype: torch.dtype,
    rel: float,
    num_tokens: int,
) -> torch.Tensor:
    """Per-element bound on |got - ref| for dweight or dbias (module docstring)."""
    err = rel * terms + slack + (num_tokens + 1) * F32_SUBNORMAL
    tol = err + 0.5 * f32_ulp(ref.abs() + err)
    return tol + 0.5 * bf16_ulp(ref.abs() + err) if dtype == torch.bfloat16 else tol


def _nonfinite_mismatch(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Where the reference's NaN/inf is not matched: NaN wants NaN, +-inf the same
    inf, a finite value no NaN."""
    return (got.isnan() != want.isnan()) | (want.isinf() & (got != want))


def _first_failure(name, bad, got, want, detail) -> AssertionError:
    where = bad.nonzero()
    i = tuple(where[0].tolist())
    return AssertionError(
        f"{name}: {where.shape[0]} of {bad.numel()} elements wrong; first at {list(i)}: "
        f"got {got[i].item()!r}, want {want[i].item()!r}, {detail(i)}"
    )


def assert_exact(name: str, got: torch.Tensor, want: torch.Tensor, floor: torch.Tensor) -> None:
    """``got`` (bf16) against the float64 reference ``want``: the rule for y and dx of
    the module docstring."""
    got = got.reshape(want.shape)
    floor = torch.nan_to_num(floor, nan=math.inf)
    lo, hi = bf16_order(want - floor), bf16_order(want + floor)
    at = bf16_order(got)
    ulps = torch.maximum(lo - at, at - hi).clamp(min=0)
    ulps = torch.where(want.isfinite(), ulps, 0)
    got64 = got.double()
    nonfinite = _nonfinite_mismatch(got64, want)
    bad = nonfinite | (ulps > 1)

    def detail(i):
        if nonfinite[i]:
            return "a NaN or inf that does not match the reference's"
        f = floor[i].item()
        return f"{ulps[i].item()} bf16 ulps outside [want - {f:.3g}, want + {f:.3g}]"

    if bool(bad.any()):
        raise _first_failure(name, bad, got64, want, detail)
    off_by_one = ulps == 1
    allowed = want.numel() // OFF_BY_ONE_PER
    if int(off_by_one.sum()) > allowed:
        raise _first_failure(
            name,
            off_by_one,
            got64,
            want,
            lambda i: (
                f"1 bf16 ulp outside [want - {floor[i].item():.3g}, want + "
                f"{floor[i].item():.3g}] (at most {allowed} such elements allowed)"
            ),
        )


def assert_close(name: str, got: torch.Tensor, want: torch.Tensor, tol: torch.Tensor) -> None:
    """|got - want| <= tol elementwise where the reference is finite; NaN and inf as
    the reference's. An unwritten NaN-poisoned element fails."""
    got = got.double().reshape(want.shape)
    tol = torch.nan_to_num(tol, nan=math.inf)
    nonfinite = _nonfinite_mismatch(got, want)
    bad = nonfinite | (want.isfinite() & ~((got - want).abs() <= tol))

    def detail(i):
        if nonfinite[i]:
            return "a NaN or inf that does not match the reference's"
        return f"tolerance {tol[i].item():.3g}"

    if bool(bad.any()):
        raise _first_failure(name, bad, got, want, detail)


def assert_outputs(case: Case, *, y=None, dx=None, dweight=None, dbias=None) -> None:
    """Checks whichever outputs are given against the reference on all rows."""
    ref = reference_window(case, 0, case.S)
    if y is not None:
        assert y.shape == case.x.shape and y.dtype == torch.bfloat16
        assert_exact("y", rows(y), ref.y, ref.y_floor)
    if dx is not None:
        assert dx.shape == case.x.shape and dx.dtype == torch.bfloat16
        assert_exact("dx", rows(dx), ref.dx, ref.dx_floor)
    if dweight is None and dbias is None:
        return
    rel = accumulation_rel(case)
    if dweight is not None:
        assert dweight.dtype == case.weight.dtype
        tol = param_tolerance(
            ref.dweight, ref.dweight_terms, ref.dweight_slack, dweight.dtype, rel, case.S
        )
        assert_close("dweight", dweight, ref.dweight, tol)
    if dbias is not None:
        assert dbias.dtype == case.bias.dtype
        tol = param_tolerance(ref.dbias, ref.dbias_terms, ref.dbias_slack, dbias.dtype, rel, case.S)
        assert_close("dbias", dbias, ref.dbias, tol)


_SAME_SIZE_INT = {torch.bfloat16: torch.int16, torch.float32: torch.int32}


def assert_bitwise_equal(name: str, got: torch.Tensor | None, want: torch.Tensor | None):
    if got is None or want is None:
        assert got is None and want is None, f"{name}: one of the two is None"
        return
    assert got.dtype == want.dtype and got.shape == want.shape, f"{name}: dtype/shape differ"
    as_int = _SAME_SIZE_INT[got.dtype]
    differ = got.view(as_int) != want.view(as_int)
    if bool(differ.any()):
        raise AssertionError(f"{name}: {int(differ.sum())} elements differ bitwise")


def run_case(
    case: Case, *, y=None, dx=None, dweight=None, dbias=None, workspace=None, forward_workspace=None
):
    """The forward and the backward of ``case`` through the public API, into whichever
    buffers and workspaces are given; returns (y, dx, dweight, dbias) as returned."""
    got_y = cake.cake_causal_conv1d_train_forward(
        case.x, case.weight, case.cu_seqlens, bias=case.bias, out=y, workspace=forward_workspace
    )
    got = cake.cake_causal_conv1d_train_backward(
        case.x,
        case.weight,
        case.cu_seqlens,
        case.dy,
        bias=case.bias,
        silu_grad_preactivation=case.policy,
        workspace=workspace,
        dx=dx,
        dweight=dweight,
        dbias=dbias,
    )
    return (got_y, *got)


def run_into_buffers(case: Case, *, workspace: torch.Tensor | None = None):
    """Forward and backward into NaN-poisoned preallocated buffers (and workspaces);
    checks the buffers are the ones returned. Returns (y, dx, dweight, dbias)."""
    buffers = (nan_like(case.x), nan_like(case.x), nan_like(case.weight), nan_like(case.bias))
    device = case.x.device
    if workspace is None:
        workspace = cake.cake_causal_conv1d_train_backward_workspace(case.S, case.C, device)
    got = run_case(
        case,
        y=buffers[0],
        dx=buffers[1],
        dweight=buffers[2],
        dbias=buffers[3],
        workspace=workspace,
        forward_workspace=cake.cake_causal_conv1d_train_forward_workspace(case.S, case.C, device),
    )
    assert all(g is b for g, b in zip(got, buffers))
    return buffers


class OpLog(TorchDispatchMode):
    """Records the name of every op dispatched while it is active."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def capture(step):
    """Runs ``step`` once on a side stream (the warm-up torch.cuda.graph capture
    requires), then captures it; returns (the graph, what the captured step returned)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    return graph, captured

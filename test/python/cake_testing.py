# SPDX-License-Identifier: Apache-2.0
"""Shared test helpers: random cases, the float64 reference with error bounds, asserts.

Tolerances (what the kernels may differ from the float64 reference by):
- y, dx: one bf16 ulp of the reference, plus an absolute floor of FP32_TERMS_EPS times
  the magnitude of the fp32 terms that produced the value (the sum of |w * x| for the
  pre-activation); this covers fp32 rounding when the terms cancel.
- dweight, dbias: PARAM_REL_TOL[policy] times the largest reference element, plus one
  bf16 ulp of the reference for bf16 parameters.
- The "bf16" policy rounds pre to bf16 before SiLU': where the kernel's fp32 pre and
  the reference's float64 pre straddle a bf16 rounding midpoint, their z differ by one
  bf16 ulp. No reference can know which side the kernel's fp32 sum lands on, so the
  tolerances of dx, dweight and dbias add, at those elements only, the change of g that
  such a flip can cause (|silu''| <= 0.5, so |dg| <= 0.5 |dy| |dz|), pushed through
  the same formulas with absolute values.
"""

from __future__ import annotations

from dataclasses import dataclass

import cake
import pytest
import torch
from cake import reference

WIDTH = reference.WIDTH
#: 16 fp32 ulps of the magnitude of the terms: the fp32 rounding allowance.
FP32_TERMS_EPS = 2.0**-20
#: dweight/dbias error allowed relative to the largest reference element.
PARAM_REL_TOL = {"bf16": 1e-5, "fp32": 2e-7}
ROUTES = [
    (bias_dtype, weight_dtype, policy)
    for bias_dtype in (None, torch.float32, torch.bfloat16)
    for weight_dtype in (torch.float32, torch.bfloat16)
    for policy in ("bf16", "fp32")
]


def _gpu_skip_reason() -> str | None:
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        cake.cake_causal_conv1d_train_backward_workspace_bytes(0, 8, "cuda")
    except RuntimeError as error:  # the message says why the device cannot run
        return str(error)
    return None


_SKIP_REASON = _gpu_skip_reason()
#: Marks a test that launches the kernels; skipped with the reason when it cannot.
requires_cake_gpu = pytest.mark.skipif(_SKIP_REASON is not None, reason=_SKIP_REASON or "")


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


def nan_like(t: torch.Tensor | None) -> torch.Tensor | None:
    """A NaN-filled buffer like ``t``: an element the kernels do not write fails."""
    return None if t is None else torch.full_like(t, float("nan"))


def bf16_ulp(v: torch.Tensor) -> torch.Tensor:
    """The spacing of bf16 numbers at |v| (float64), down to bf16's subnormal spacing."""
    _, exponent = torch.frexp(v)  # v = m * 2**e with 0.5 <= |m| < 1
    exponent = torch.where(v == 0, -133, exponent - 8).clamp(min=-133)
    return torch.ldexp(torch.ones_like(v), exponent)


@dataclass
class Window:
    """Reference for rows [r0, r1): y and dx with their tolerances, and the rows'
    contributions to dweight/dbias with the slack that pre's bf16 rounding adds."""

    y: torch.Tensor
    y_tol: torch.Tensor
    dx: torch.Tensor
    dx_tol: torch.Tensor
    dweight: torch.Tensor
    dweight_slack: torch.Tensor
    dbias: torch.Tensor
    dbias_slack: torch.Tensor


def _policy_z(pre: torch.Tensor, spread: torch.Tensor, policy: str):
    """(z the reference uses, width of the range of z the kernel may use)."""
    if policy == "fp32":
        return pre, 2 * spread

    def to_bf16(v):
        return v.float().bfloat16().double()

    # Zero except where pre +- spread straddles a bf16 rounding midpoint.
    return to_bf16(pre), to_bf16(pre + spread) - to_bf16(pre - spread)


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
    magnitude = reference.preactivation(x.abs(), w.abs(), cu, None if b is None else b.abs())
    spread = FP32_TERMS_EPS * magnitude  # bound on |kernel's fp32 pre - pre|
    y = pre * torch.sigmoid(pre)

    z, z_range = _policy_z(pre, spread, case.policy)
    s = torch.sigmoid(z)
    dy_abs = dy.double().abs()
    g = reference.silu_grad(pre, dy, case.policy)
    g_jump = 0.5 * dy_abs * z_range
    g_err = g_jump + FP32_TERMS_EPS * (dy_abs * s * (1 + z.abs()) + g.abs())
    dx = reference.input_grad(w, cu, g)
    dx_tol = bf16_ulp(dx) + reference.input_grad(w.abs(), cu, g_err)

    in_rows = torch.zeros(hi - lo, 1, dtype=torch.float64, device=x.device)
    in_rows[r0 - lo : r1 - lo] = 1
    dweight, dbias = reference.param_grads(x, cu, g * in_rows)
    # Under "fp32", pre's fp32 error moves g by fp32-sized random amounts that the
    # relative tolerance covers; only the bf16 flips need slack.
    jump = g_jump * in_rows if case.policy == "bf16" else torch.zeros_like(g)
    dweight_slack, dbias_slack = reference.param_grads(x.abs(), cu, jump)
    keep = slice(r0 - lo, r1 - lo)
    return Window(
        y[keep],
        bf16_ulp(y[keep]) + spread[keep],
        dx[keep],
        dx_tol[keep],
        dweight,
        dweight_slack,
        dbias,
        dbias_slack,
    )


def param_tolerance(ref: torch.Tensor, slack: torch.Tensor, dtype: torch.dtype, policy: str):
    tol = PARAM_REL_TOL[policy] * ref.abs().max().clamp(min=torch.finfo(torch.float32).tiny)
    tol = tol + slack
    return tol + bf16_ulp(ref) if dtype == torch.bfloat16 else tol


def assert_close(name: str, got: torch.Tensor, want: torch.Tensor, tol: torch.Tensor) -> None:
    """|got - want| <= tol elementwise; NaN (an unwritten poisoned element) fails."""
    got = got.double().reshape(want.shape)
    ok = (got - want).abs() <= tol
    if not bool(ok.all()):
        bad = (~ok).nonzero()
        i = tuple(bad[0].tolist())
        raise AssertionError(
            f"{name}: {bad.shape[0]} of {ok.numel()} elements outside tolerance; first at "
            f"{list(i)}: got {got[i].item()!r}, want {want[i].item()!r}, "
            f"tolerance {tol[i].item():.3g}"
        )


def assert_outputs(case: Case, *, y=None, dx=None, dweight=None, dbias=None) -> None:
    """Checks whichever outputs are given against the reference on all rows."""
    ref = reference_window(case, 0, case.S)
    if y is not None:
        assert y.shape == case.x.shape and y.dtype == torch.bfloat16
        assert_close("y", rows(y), ref.y, ref.y_tol)
    if dx is not None:
        assert dx.shape == case.x.shape and dx.dtype == torch.bfloat16
        assert_close("dx", rows(dx), ref.dx, ref.dx_tol)
    if dweight is not None:
        assert dweight.dtype == case.weight.dtype
        tol = param_tolerance(ref.dweight, ref.dweight_slack, dweight.dtype, case.policy)
        assert_close("dweight", dweight, ref.dweight, tol)
    if dbias is not None:
        assert dbias.dtype == case.bias.dtype
        tol = param_tolerance(ref.dbias, ref.dbias_slack, dbias.dtype, case.policy)
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


def run_into_buffers(case: Case, *, workspace: torch.Tensor | None = None):
    """Forward and backward into NaN-poisoned preallocated buffers (and workspaces);
    checks the buffers are the ones returned. Returns (y, dx, dweight, dbias)."""
    y, dx = nan_like(case.x), nan_like(case.x)
    dweight, dbias = nan_like(case.weight), nan_like(case.bias)
    device = case.x.device
    if workspace is None:
        workspace = cake.cake_causal_conv1d_train_backward_workspace(case.S, case.C, device)
    forward_workspace = cake.cake_causal_conv1d_train_forward_workspace(case.S, case.C, device)
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
    assert got_y is y and got[0] is dx and got[1] is dweight and got[2] is dbias
    return y, dx, dweight, dbias

# SPDX-License-Identifier: Apache-2.0
"""Packed variable-length causal depthwise conv1d (width 4) + bias + SiLU, for training.

A drop-in for ``flashinfer.cake_causal_conv1d_train`` (contract: SPEC.md; decisions
where it is silent: docs/python-api.md). Everything runs on the current CUDA stream,
never reads ``cu_seqlens`` on the host, never synchronizes, and can be captured in a
CUDA graph or compiled with ``torch.compile(fullgraph=True)``.

In eager mode the functions here first offer the call to the C++ route
(``_ops.torch_ops``, when loaded), which runs the common valid call and returns None
for any other; otherwise they take a launch plan from ``_ops`` (cached per tensor
signature; the metadata checks run on each miss) and launch directly: the custom-op
dispatch costs more host time than all the rest (docs/host-overhead.md). Under
torch.compile (and other tracing), they check their arguments (metadata only, so
torch.compile traces the checks into guards) and call the ``cake::`` custom ops of
``_ops``: the functional ops when the caller passes no buffers, the ``_out`` ops when
it passes any. Both routes launch through ``_ops.run_forward``/``run_backward``.
"""

from __future__ import annotations

import torch

from . import _checks, _ops

__all__ = [
    "CakeCausalConv1dFunction",
    "cake_causal_conv1d",
    "cake_causal_conv1d_train_backward",
    "cake_causal_conv1d_train_backward_workspace",
    "cake_causal_conv1d_train_backward_workspace_bytes",
    "cake_causal_conv1d_train_forward",
    "cake_causal_conv1d_train_forward_workspace",
    "cake_causal_conv1d_train_forward_workspace_bytes",
    "is_cake_causal_conv1d_train_supported",
]


def is_cake_causal_conv1d_train_supported(device) -> bool:
    """True when ``device`` can run the kernels: a CUDA device or the CPU, the
    extension ``cake._C`` importable, and ``cake._C.is_supported`` says yes (compute
    capability >= 9.0; an x86-64-v3 CPU)."""
    return _ops.support_problem(_checks.as_device(device)) is None


def cake_causal_conv1d_train_forward_workspace_bytes(S: int, C: int, device) -> int:
    """Bytes of the forward workspace: always 0, the forward needs none.

    The arguments are still checked (``device`` must be a CUDA device or the CPU) so that code
    written against this API fails the same way whatever the op's needs are. S and C
    may be ints, numpy integers or SymInts; neither is specialized.
    """
    _checks.check_sizes(S, C)
    problem = _ops.device_type_problem(_checks.as_device(device))
    if problem is not None:
        raise RuntimeError(problem)
    return 0


def cake_causal_conv1d_train_forward_workspace(S: int, C: int, device) -> torch.Tensor:
    """A zeroed int32 workspace for the forward (empty: it needs none)."""
    nbytes = cake_causal_conv1d_train_forward_workspace_bytes(S, C, device)
    return torch.zeros(nbytes // 4, dtype=torch.int32, device=device)


def cake_causal_conv1d_train_backward_workspace_bytes(S: int, C: int, device) -> int:
    """Bytes of the backward workspace; depends on C and the device, not on S.

    S and C may be ints, numpy integers or SymInts (x.shape under
    ``torch.compile(dynamic=True)``): C is then specialized, S is not.
    """
    _checks.check_sizes(S, C)
    return _ops.backward_workspace_bytes(_checks.concrete_int(C), _checks.as_device(device))


def cake_causal_conv1d_train_backward_workspace(S: int, C: int, device) -> torch.Tensor:
    """A uint8 backward workspace; needs no zeroing. Reusable across calls and graph
    replays on one stream; two launches that may run at once need one each."""
    nbytes = cake_causal_conv1d_train_backward_workspace_bytes(S, C, device)
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def cake_causal_conv1d_train_forward(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = bf16(silu(causal_conv1d(x) + bias)), documents never mixing; y has x's shape.

    ``out`` (bf16, x's shape) receives y and is returned. ``workspace`` is accepted
    for API compatibility and checked (int32, contiguous, on x's device, overlapping
    no other tensor); the forward does not use it. Neither may overlap an input or
    the other (ValueError, at launch).
    """
    if _ops.eager():
        if _ops.torch_ops is not None:
            y = _ops.torch_ops.forward(x, weight, cu_seqlens, bias, out, workspace)
            if y is not None:
                return y
        plan = _ops.forward_plan(x, weight, cu_seqlens, bias, out, workspace)
        if _ops.launches_directly(plan):
            return _ops.run_forward(plan, x, weight, cu_seqlens, bias, out, workspace)
    else:
        _checks.check_forward_args(x, weight, cu_seqlens, bias, out, workspace)
    if out is None and workspace is None:
        return torch.ops.cake.causal_conv1d_fwd(x, weight, cu_seqlens, bias)
    out = torch.empty_like(x) if out is None else out
    torch.ops.cake.causal_conv1d_fwd_out(x, weight, cu_seqlens, bias, out, workspace)
    return out


def cake_causal_conv1d_train_backward(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    dy: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    silu_grad_preactivation: str = "bf16",
    workspace: torch.Tensor | None = None,
    dx: torch.Tensor | None = None,
    dweight: torch.Tensor | None = None,
    dbias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Returns (dx, dweight, dbias) for the forward's inputs; dbias is None without bias.

    ``silu_grad_preactivation`` picks the pre-activation SiLU' sees: "bf16" (the
    forward's pre rounded to bf16, fp32 dweight/dbias accumulators) or "fp32" (pre
    unrounded, fp64 accumulators). dx is bf16; dweight and dbias have their
    parameter's dtype. Buffers passed in ``dx``/``dweight``/``dbias`` are written
    and returned; ``workspace`` (any dtype, >= the backward workspace bytes, 16-byte
    aligned) is allocated per call when not given. None of these may overlap an
    input or each other (ValueError, at launch).
    """
    if _ops.eager():
        if _ops.torch_ops is not None:
            grads = _ops.torch_ops.backward(
                x, weight, cu_seqlens, dy, bias, silu_grad_preactivation, workspace,
                dx, dweight, dbias,
            )  # fmt: skip
            if grads is not None:
                return grads
        _checks.check_policy(silu_grad_preactivation)
        plan = _ops.backward_plan(x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace)
        if _ops.launches_directly(plan):
            return _ops.run_backward(
                plan, x, weight, cu_seqlens, bias, dy, silu_grad_preactivation,
                dx, dweight, dbias, workspace,
            )  # fmt: skip
    else:
        _checks.check_policy(silu_grad_preactivation)
        _checks.check_backward_args(x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace)
    if dx is None and dweight is None and dbias is None and workspace is None:
        dx, dweight, dbias = torch.ops.cake.causal_conv1d_bwd(
            x, weight, cu_seqlens, bias, dy, silu_grad_preactivation
        )
        return dx, dweight, dbias if bias is not None else None
    dx = torch.empty_like(x) if dx is None else dx
    dweight = torch.empty_like(weight) if dweight is None else dweight
    if bias is not None and dbias is None:
        dbias = torch.empty_like(bias)
    torch.ops.cake.causal_conv1d_bwd_out(
        x, weight, cu_seqlens, bias, dy, silu_grad_preactivation, workspace, dx, dweight, dbias
    )
    return dx, dweight, dbias


class CakeCausalConv1dFunction(torch.autograd.Function):
    """Autograd for the op. Saves only (x, weight, cu_seqlens, bias): the backward
    recomputes the pre-activation instead of keeping it."""

    @staticmethod
    def forward(ctx, x, weight, cu_seqlens, bias=None, silu_grad_preactivation="bf16"):
        # Checked here too so that a bad policy fails at the forward, not at backward().
        _checks.check_policy(silu_grad_preactivation)
        y = cake_causal_conv1d_train_forward(x, weight, cu_seqlens, bias=bias)
        ctx.save_for_backward(x, weight, cu_seqlens, bias)
        ctx.silu_grad_preactivation = silu_grad_preactivation
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, cu_seqlens, bias = ctx.saved_tensors
        # The kernels read dy as packed bf16; any other dtype or layout is converted
        # (no copy when grad_y already is one). to(memory_format=...) alone is not
        # enough: it keeps a transposed layout when a dimension has size 1.
        dy = grad_y.to(torch.bfloat16).contiguous()
        dx, dweight, dbias = cake_causal_conv1d_train_backward(
            x,
            weight,
            cu_seqlens,
            dy,
            bias=bias,
            silu_grad_preactivation=ctx.silu_grad_preactivation,
        )
        return dx, dweight, None, dbias, None


def cake_causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    silu_grad_preactivation: str = "bf16",
) -> torch.Tensor:
    """Differentiable form of ``cake_causal_conv1d_train_forward`` (through
    ``CakeCausalConv1dFunction``); gradients flow to x, weight and bias. In eager mode
    the C++ route runs it with its own autograd function, as this one does."""
    if _ops.eager() and _ops.torch_ops is not None:
        y = _ops.torch_ops.conv1d(x, weight, cu_seqlens, bias, silu_grad_preactivation)
        if y is not None:
            return y
    return CakeCausalConv1dFunction.apply(x, weight, cu_seqlens, bias, silu_grad_preactivation)

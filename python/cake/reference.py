# SPDX-License-Identifier: Apache-2.0
"""Float64 pure-PyTorch reference of the packed varlen causal conv1d + bias + SiLU.

Written from the math of SPEC.md, vectorised over tokens and channels (the only loop
is over the 4 taps). Document boundaries come from a per-token document start and end
computed from ``cu_seqlens`` with ``repeat_interleave``; unlike the kernels, the
reference reads ``cu_seqlens`` on the host (and so synchronizes). It is a test
oracle, not a fallback: it is slow and memory-hungry on purpose (float64 everywhere).

The building blocks (``preactivation``, ``silu_grad``, ``input_grad``,
``param_grads``) are public so that tests can also push magnitudes (absolute values)
through the same formulas to bound the kernels' rounding errors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

WIDTH = 4
POLICIES = ("bf16", "fp32")


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[S, C] view of an [S, C] or [1, S, C] tensor."""
    return t.reshape(-1, t.shape[-1])


def document_bounds(cu_seqlens: torch.Tensor, num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token first row and one-past-last row of its document, int64 [S] each."""
    cu = cu_seqlens.to(torch.int64)
    lengths = cu[1:] - cu[:-1]
    if cu[0] != 0 or cu[-1] != num_tokens or bool((lengths < 0).any()):
        raise ValueError(
            f"cu_seqlens must start at 0, end at S = {num_tokens} and not decrease; "
            f"got {cu.tolist()}"
        )
    starts = torch.repeat_interleave(cu[:-1], lengths, output_size=num_tokens)
    ends = torch.repeat_interleave(cu[1:], lengths, output_size=num_tokens)
    return starts, ends


def _delayed(a: torch.Tensor, shift: int, starts: torch.Tensor) -> torch.Tensor:
    """Row t holds a[t - shift] when that row is in t's document, else 0 (the spec's xz)."""
    num_tokens = a.shape[0]
    t = torch.arange(num_tokens, device=a.device)
    shifted = F.pad(a, (0, 0, shift, 0))[:num_tokens]
    return torch.where((t - shift >= starts)[:, None], shifted, 0)


def _advanced(a: torch.Tensor, shift: int, ends: torch.Tensor) -> torch.Tensor:
    """Row u holds a[u + shift] when that row is in u's document, else 0."""
    num_tokens = a.shape[0]
    u = torch.arange(num_tokens, device=a.device)
    shifted = F.pad(a, (0, 0, 0, shift))[shift:]
    return torch.where((u + shift < ends)[:, None], shifted, 0)


def preactivation(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """pre[t, c] = sum_k weight[c, k] * xz[t - 3 + k, c] (+ bias[c]), float64 [S, C]."""
    x64, w64 = _rows(x).double(), weight.double()
    starts, _ = document_bounds(cu_seqlens, x64.shape[0])
    pre = sum(w64[:, k] * _delayed(x64, WIDTH - 1 - k, starts) for k in range(WIDTH))
    return pre if bias is None else pre + bias.double()


def silu_grad(
    pre: torch.Tensor, dy: torch.Tensor, silu_grad_preactivation: str = "bf16"
) -> torch.Tensor:
    """g = dL/dpre = dy * silu'(z), with z the policy's view of pre; float64 [S, C]."""
    if silu_grad_preactivation not in POLICIES:
        raise ValueError(
            f"silu_grad_preactivation must be one of {POLICIES}; got {silu_grad_preactivation!r}"
        )
    # The kernels round their fp32 pre to bf16; round through fp32 the same way.
    z = pre.float().bfloat16().double() if silu_grad_preactivation == "bf16" else pre
    s = torch.sigmoid(z)
    return _rows(dy).double() * s * (1 + z * (1 - s))


def input_grad(weight: torch.Tensor, cu_seqlens: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """dx[u, c] = sum_k weight[c, k] * g[u + 3 - k, c] over rows in u's document; float64."""
    w64, g64 = weight.double(), g.double()
    _, ends = document_bounds(cu_seqlens, g64.shape[0])
    return sum(w64[:, k] * _advanced(g64, WIDTH - 1 - k, ends) for k in range(WIDTH))


def param_grads(
    x: torch.Tensor, cu_seqlens: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dweight [C, 4], dbias [C]) = (sum_t g[t] * xz[t - 3 + k], sum_t g[t]); float64."""
    x64, g64 = _rows(x).double(), g.double()
    starts, _ = document_bounds(cu_seqlens, x64.shape[0])
    dweight = torch.stack(
        [(g64 * _delayed(x64, WIDTH - 1 - k, starts)).sum(0) for k in range(WIDTH)], dim=1
    )
    return dweight, g64.sum(0)


def causal_conv1d_forward_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (y before rounding in float64, y rounded to bf16), both in x's shape."""
    pre = preactivation(x, weight, cu_seqlens, bias)
    y = (pre * torch.sigmoid(pre)).reshape(x.shape)
    # Through fp32, as the kernels round their fp32 result.
    return y, y.float().bfloat16()


def causal_conv1d_backward_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    dy: torch.Tensor,
    bias: torch.Tensor | None = None,
    silu_grad_preactivation: str = "bf16",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Returns float64 (dx in x's shape, dweight [C, 4], dbias [C] or None without bias)."""
    g = silu_grad(preactivation(x, weight, cu_seqlens, bias), dy, silu_grad_preactivation)
    dweight, dbias = param_grads(x, cu_seqlens, g)
    dx = input_grad(weight, cu_seqlens, g).reshape(x.shape)
    return dx, dweight, dbias if bias is not None else None

# SPDX-License-Identifier: Apache-2.0
"""Drop-ins for the causal conv1d entry points that Mamba2, Gated DeltaNet and KDA code
calls, so that switching to Cake is one line (docs/drop-ins.md):

- ``causal_conv1d_fn``: the function of Dao's causal-conv1d, for x given as a
  channel-last [B, D, T] view (Mamba2, mamba_ssm, transformers' kernel hook);
- ``ShortConvolution``: the module of flash-linear-attention (an ``nn.Conv1d`` with
  weight [D, 1, 4]; x [B, T, D], ``cu_seqlens``);
- ``cu_seqlens_from_seq_idx`` and ``rows_cu_seqlens``: the packed documents of their
  batches, built on the device.

Both run the differentiable ``cake_causal_conv1d`` on the batch's tokens packed as rows:
every batch row is a document of its own, and seq_idx or cu_seqlens split rows further.
What Cake's kernels cannot do (an initial or final state, no activation, another width,
another dtype) raises before anything runs, naming the argument, as the rest of the
package does; nothing here reads tensor contents on the host.
"""

from __future__ import annotations

import torch
from torch import nn

from . import _checks
from .cake_causal_conv1d_train import cake_causal_conv1d

__all__ = [
    "ShortConvolution",
    "causal_conv1d_fn",
    "check_causal_conv1d_fn_args",
    "cu_seqlens_from_seq_idx",
    "rows_cu_seqlens",
]

#: The activations the drop-ins take: Cake's kernels always apply SiLU ("swish" is its
#: other name in both peers).
ACTIVATIONS = ("silu", "swish")
#: cu_seqlens is int32, so a batch may hold at most this many tokens.
MAX_TOKENS = 2**31 - 1


def rows_cu_seqlens(batch: int, seqlen: int, device: torch.device) -> torch.Tensor:
    """cu_seqlens of ``batch`` independent rows of ``seqlen`` tokens each:
    [0, T, 2T, ..., B*T], int32 on ``device``; one launch, nothing read."""
    return torch.arange(batch + 1, dtype=torch.int32, device=device) * seqlen


def cu_seqlens_from_seq_idx(seq_idx: torch.Tensor) -> torch.Tensor:
    """The packed documents of a [B, T] seq_idx as an int32 cu_seqlens of B*T + 1 entries,
    on seq_idx's device, without a host sync.

    A document starts at each row's first token and wherever seq_idx changes along a row
    (Mamba2's convention: a document is a run of equal values; rows never share one).
    The number of documents is in the data, but the length of cu_seqlens must not be:
    so entry i (i < B*T) is the start of the document that holds token i, and the last
    entry is B*T. That sequence is non-decreasing, its distinct values are exactly the
    document starts plus B*T, and each repeat is an empty document, which SPEC.md
    allows; the kernels binary-search it, so its length costs a few loads per search.

    Six small launches over B*T + 1 elements, each parallel over them (fill, compare,
    copy, cast, CUB's scan, binary searches): a running maximum would be one launch
    fewer, but torch.cummax scans a 1-D tensor in a single thread block.
    """
    batch, seqlen = seq_idx.shape
    total = batch * seqlen
    # starts[i]: token i starts a document; the entry past the last token "starts" the
    # end, so that the last entry below is B*T.
    starts = torch.ones(total + 1, dtype=torch.bool, device=seq_idx.device)
    starts[:total].view(batch, seqlen)[:, 1:] = seq_idx[:, 1:] != seq_idx[:, :-1]
    # Token i's document number (from 1; int64, as B*T + 1 may not fit int32), then the
    # first entry of the sorted numbers equal to it: its document's first token.
    document = starts.cumsum(0)
    return torch.searchsorted(document, document, out_int32=True)


def _check_activation(activation: object) -> None:
    if activation is not None and not isinstance(activation, str):
        raise TypeError(f"cake: activation must be a str; got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        # None is Dao's and FLA's "no activation"; Cake's kernels always fuse SiLU, and
        # no cheap composition undoes it, so say so rather than apply SiLU unasked.
        raise ValueError(
            f"cake: activation must be one of {ACTIVATIONS} (Cake's kernels always apply "
            f"SiLU; a convolution without activation is not supported); got {activation!r}"
        )


def _reject_state(name: str, expected: str, given: object) -> None:
    """Rejects a conv state argument: Cake's kernels start every document from zeros
    and keep no final state, so Dao's and FLA's state arguments have no meaning here."""
    given = "a tensor" if isinstance(given, torch.Tensor) else repr(given)
    raise ValueError(
        f"cake: {name} must be {expected}: Cake's kernels start every document from "
        f"zeros and return no conv state; got {given}"
    )


def _check_token_count(name: str, tokens: int) -> None:
    if tokens > MAX_TOKENS:
        raise ValueError(
            f"cake: {name} must hold at most 2**31 - 1 tokens (cu_seqlens is int32); got {tokens}"
        )


def _check_channels(name: str, channels: int, where: str) -> None:
    if channels == 0 or channels % _checks.channel_multiple() != 0:
        raise ValueError(
            f"cake: {name} must have a channel count D ({where}) that is a positive "
            f"multiple of {_checks.channel_multiple()}; got D = {channels}"
        )


def check_causal_conv1d_fn_args(
    x: object,
    weight: object,
    bias: object = None,
    seq_idx: object = None,
    initial_states: object = None,
    return_final_states: object = False,
    final_states_out: object = None,
    activation: object = None,
) -> None:
    """Every check of ``causal_conv1d_fn``, on metadata only; raises TypeError or
    ValueError (docs/drop-ins.md) and launches nothing, so a caller may try it first."""
    _check_activation(activation)
    if initial_states is not None:
        _reject_state("initial_states", "None", initial_states)
    if return_final_states:
        _reject_state("return_final_states", "False", return_final_states)
    if final_states_out is not None:
        _reject_state("final_states_out", "None", final_states_out)
    _checks.check_tensor("x", x, (torch.bfloat16,))
    if x.dim() != 3:
        raise ValueError(f"cake: x must have shape [B, D, T]; got {list(x.shape)}")
    batch, channels, seqlen = x.shape
    _check_channels("x", channels, "dimension 1")
    # Channel-last: the [B, T, D] rows are in memory with D innermost, as Mamba2 passes
    # x (a transpose of its projection). A channel-first x would need a transposing
    # copy each way; Dao's kernel has a separate path for it, Cake has none.
    if x.stride(1) != 1:
        raise ValueError(
            f"cake: x must be channel-last, a [B, D, T] view of [B, T, D] memory "
            f"(x.stride(1) == 1, as x.transpose(1, 2) of a [B, T, D] tensor); got shape "
            f"{list(x.shape)} with strides {list(x.stride())} (channel-first)"
        )
    _check_token_count("x", batch * seqlen)
    _checks.check_weight(weight, channels)
    _checks.check_bias(bias, channels)
    if seq_idx is not None:
        _checks.check_tensor("seq_idx", seq_idx, (torch.int32,))
        _checks.check_shape("seq_idx", seq_idx, (batch, seqlen))
    _checks.check_same_device(x, weight=weight, bias=bias, seq_idx=seq_idx)


def causal_conv1d_fn(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    seq_idx: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    return_final_states: bool = False,
    final_states_out: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """``causal_conv1d.causal_conv1d_fn`` on Cake's kernels, differentiable.

    x: bf16 [B, D, T], channel-last (``x.stride(1) == 1``); weight [D, 4] and bias [D],
    fp32 or bf16; seq_idx: optional int32 [B, T] document index of each token;
    activation: "silu" or "swish". Returns y, bf16, as a [B, D, T] channel-last view of
    a new [B, T, D] tensor, like Dao's for a channel-last x.

    Each batch row is a document of its own, split further where seq_idx changes along
    the row; cu_seqlens is built on the device (``cu_seqlens_from_seq_idx``), no sync.
    An x whose [B, T, D] view is not packed (a slice of a wider projection, as Mamba2's
    is) is copied into packed rows first: Dao's kernel reads strided rows, Cake's read
    packed ones. initial_states, return_final_states and final_states_out are rejected;
    seq_idx values are not checked (docs/drop-ins.md says what negative ones get).
    """
    check_causal_conv1d_fn_args(
        x, weight, bias, seq_idx, initial_states, return_final_states, final_states_out, activation
    )
    batch, channels, seqlen = x.shape
    # A view when x.transpose(1, 2) is packed; one copy otherwise.
    rows = x.transpose(1, 2).reshape(batch * seqlen, channels).contiguous()
    if seq_idx is None:
        cu_seqlens = rows_cu_seqlens(batch, seqlen, x.device)
    else:
        cu_seqlens = cu_seqlens_from_seq_idx(seq_idx)
    y = cake_causal_conv1d(rows, weight, cu_seqlens, bias)
    return y.view(batch, seqlen, channels).transpose(1, 2)


def _check_packed_cu_seqlens(x: torch.Tensor, cu_seqlens: object) -> None:
    """FLA's cu_seqlens: int32 or int64, 1-D, for an x of batch size 1."""
    _checks.check_tensor("cu_seqlens", cu_seqlens, (torch.int32, torch.int64))
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        raise ValueError(
            "cake: cu_seqlens must be 1-D with at least one element ([num_docs + 1]); "
            f"got shape {list(cu_seqlens.shape)}"
        )
    if x.shape[0] != 1:
        raise ValueError(
            f"cake: x must have batch size 1 when cu_seqlens is given (the documents are "
            f"packed in one row); got shape {list(x.shape)}"
        )


class ShortConvolution(nn.Conv1d):
    """flash-linear-attention's ``ShortConvolution`` on Cake's kernels, for training.

    Same constructor and parameters (weight [D, 1, 4], optional bias [D]) and the same
    ``forward(x, residual=None, mask=None, cache=None, output_final_state=False,
    cu_seqlens=None, chunk_indices=None, **kwargs) -> (y, None)``, so a checkpoint and
    the code that builds the layer stay as they are. Differences (docs/drop-ins.md):
    kernel_size must be 4, activation "silu" or "swish", hidden_size a multiple of 8;
    ``backend``, ``chunk_indices`` and other keywords are accepted and ignored; a
    ``cache`` or ``output_final_state=True`` is rejected (no decoding steps); ``mask``
    multiplies a copy of x, never x itself.
    """

    def __init__(
        self,
        hidden_size: int,
        kernel_size: int,
        bias: bool = False,
        activation: str | None = "silu",
        backend: str | None = None,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
        **kwargs,
    ) -> None:
        _check_activation(activation)
        if kernel_size != _checks.width():
            raise ValueError(
                f"cake: kernel_size must be {_checks.width()} (Cake's kernels implement "
                f"width {_checks.width()} only); got {kernel_size}"
            )
        if hidden_size <= 0 or hidden_size % _checks.channel_multiple() != 0:
            raise ValueError(
                f"cake: hidden_size must be a positive multiple of "
                f"{_checks.channel_multiple()}; got {hidden_size}"
            )
        super().__init__(
            in_channels=hidden_size,
            out_channels=hidden_size,
            kernel_size=kernel_size,
            padding=kernel_size - 1,
            groups=hidden_size,
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self.hidden_size = hidden_size
        self.activation = activation
        # FLA picks a kernel family here; Cake has one. Kept for code that reads it.
        self.backend = "cake"

    @property
    def state_size(self) -> int:
        return self.hidden_size * self.kernel_size[0]

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        cache: torch.Tensor | None = None,
        output_final_state: bool = False,
        cu_seqlens: torch.Tensor | None = None,
        chunk_indices: torch.Tensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        """y = silu(conv(x) + bias) (+ residual) for x [B, T, D] bf16: the B rows are
        separate sequences, or with ``cu_seqlens`` (int32 or int64 [N + 1], B == 1)
        the documents packed in the one row. Returns (y, None)."""
        if cache is not None:
            _reject_state("cache", "None", cache)
        if output_final_state:
            _reject_state("output_final_state", "False", output_final_state)
        _checks.check_tensor("x", x, (torch.bfloat16,))
        if x.dim() != 3 or x.shape[2] != self.hidden_size:
            raise ValueError(
                f"cake: x must have shape [B, T, {self.hidden_size}]; got {list(x.shape)}"
            )
        batch, seqlen, channels = x.shape
        _check_token_count("x", batch * seqlen)
        if cu_seqlens is not None:
            if mask is not None:
                raise ValueError(
                    "cake: mask must be None when cu_seqlens is given (packed documents "
                    "have no padding); got a tensor"
                )
            _check_packed_cu_seqlens(x, cu_seqlens)
        if mask is not None:
            _checks.check_tensor("mask", mask)
            _checks.check_shape("mask", mask, (batch, seqlen))
        if residual is not None:
            _checks.check_tensor("residual", residual)
            _checks.check_shape("residual", residual, x.shape)
        _checks.check_same_device(x, mask=mask, residual=residual, cu_seqlens=cu_seqlens)

        if mask is not None:
            # FLA multiplies x in place; a copy keeps the caller's x and its autograd.
            x = x * mask.unsqueeze(-1).to(x.dtype)
        if cu_seqlens is None:
            cu_seqlens = rows_cu_seqlens(batch, seqlen, x.device)
        else:
            # FLA takes int64 too: converted on the device, nothing read.
            cu_seqlens = cu_seqlens.to(torch.int32)
        # nn.Conv1d's [D, 1, 4] weight is a packed [D, 4] one: a view, grads flow back.
        weight = self.weight.view(channels, _checks.width())
        rows = x.reshape(batch * seqlen, channels).contiguous()
        y = cake_causal_conv1d(rows, weight, cu_seqlens, self.bias).view(batch, seqlen, channels)
        if residual is not None:
            y = y + residual
        return y, None

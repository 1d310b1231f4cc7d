# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the drop-in tests (test_dropins*.py, test_gpu_dropins.py): a
reference of the Dao-style function written from its documented semantics, a host
construction of the documents of a seq_idx, a stand-in for cake_causal_conv1d that runs
on the CPU, and the tiny transformers models that the training tests step."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from cake import _checks, reference

WIDTH = 4


def host_document_starts(seq_idx: torch.Tensor) -> list[int]:
    """The first token (in the packed B*T rows) of each document of a [B, T] seq_idx,
    by a plain loop: a row's first token and every change of value along a row."""
    rows = seq_idx.tolist()
    seqlen = seq_idx.shape[1]
    return [
        b * seqlen + t
        for b, row in enumerate(rows)
        for t in range(seqlen)
        if t == 0 or row[t] != row[t - 1]
    ]


def runs(seq_idx_row: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of equal values in a row."""
    n = len(seq_idx_row)
    bounds = [t for t in range(n) if t == 0 or seq_idx_row[t] != seq_idx_row[t - 1]]
    return list(zip(bounds, bounds[1:] + [n], strict=True)) if n else []


def conv1d_silu_reference(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    seq_idx: torch.Tensor | None = None,
) -> torch.Tensor:
    """silu(causal depthwise conv1d + bias) in float64 for a Dao-style x [B, D, T] and
    weight [D, 4]: each run of equal seq_idx in a row (the whole row without seq_idx) is
    convolved on its own by torch's conv1d, zero-padded on the left. Differentiable."""
    batch, channels, seqlen = x.shape
    w = weight.double().unsqueeze(1)
    b = None if bias is None else bias.double()
    rows = []
    for r in range(batch):
        values = [0] * seqlen if seq_idx is None else seq_idx[r].tolist()
        pieces = [
            F.conv1d(x[r : r + 1, :, s:e].double(), w, b, padding=WIDTH - 1, groups=channels)[
                ..., : e - s
            ]
            for s, e in runs(values)
        ]
        rows.append(torch.cat(pieces, dim=-1) if pieces else x.new_zeros(1, channels, 0).double())
    pre = torch.cat(rows, dim=0)
    return pre * torch.sigmoid(pre)


class _ReferenceConv(torch.autograd.Function):
    """The op as SPEC.md defines it, forward and backward, by the float64 reference;
    results rounded through fp32 to their dtypes, as the kernels round."""

    @staticmethod
    def forward(ctx, x, weight, cu_seqlens, bias, policy):
        ctx.save_for_backward(x, weight, cu_seqlens, bias)
        ctx.policy = policy
        return reference.causal_conv1d_forward_ref(x, weight, cu_seqlens, bias)[1]

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, cu_seqlens, bias = ctx.saved_tensors
        dy = grad_y.to(torch.bfloat16).contiguous()
        dx, dweight, dbias = reference.causal_conv1d_backward_ref(
            x, weight, cu_seqlens, dy, bias, ctx.policy
        )
        return (
            dx.float().to(x.dtype),
            dweight.float().to(weight.dtype),
            None,
            None if bias is None else dbias.float().to(bias.dtype),
            None,
        )


def reference_cake_causal_conv1d(
    x, weight, cu_seqlens, bias=None, *, silu_grad_preactivation="bf16"
):
    """Stands in for ``cake.cake_causal_conv1d`` off the GPU: the same argument checks,
    then the op computed by the float64 reference, with the spec's backward. Tests
    monkeypatch it into ``cake.dropins`` to run the drop-ins' plumbing on the CPU."""
    _checks.check_policy(silu_grad_preactivation)
    _checks.check_inputs(x, weight, cu_seqlens, bias)
    _checks.check_same_device(x, weight=weight, cu_seqlens=cu_seqlens, bias=bias)
    return _ReferenceConv.apply(x, weight, cu_seqlens, bias, silu_grad_preactivation)


def reference_grads(x_rows, weight, bias, dy_rows, starts: list[int]):
    """(dx [S, D], dweight, dbias) that the stand-in gives for the packed rows of
    x_rows and dy_rows ([B, T, D] each) with documents starting at ``starts``."""
    channels = x_rows.shape[-1]
    x = x_rows.detach().reshape(-1, channels)
    cu = torch.tensor(starts + [x.shape[0]], dtype=torch.int32)
    weight = weight.detach()
    bias = None if bias is None else bias.detach()
    dy = dy_rows.reshape(-1, channels)
    dx, dweight, _, dbias, _ = _ReferenceConv.backward(_Saved(x, weight, cu, bias), dy)
    return dx, dweight, dbias


class _Saved:
    """A ctx for calling _ReferenceConv.backward directly."""

    def __init__(self, *saved):
        self.saved_tensors = saved
        self.policy = "bf16"


def bf16_close(got: torch.Tensor, want: torch.Tensor) -> None:
    """``got`` (bf16) is ``want`` (float64) rounded to bf16, give or take one bf16 ulp
    (the two sums differ in order, which may move a value across a rounding point)."""
    torch.testing.assert_close(got.double(), want, rtol=2.0**-7, atol=2.0**-126)


# The tiny models of the training tests: a Mamba2 (its mixer's conv has a bias) and a
# Qwen3-Next (Gated DeltaNet, conv without bias; then an attention layer).
# Channels of the conv: Mamba2 2 * 64 + 2 * 16 = 160, Qwen3-Next 2 * 32 + 64 = 128.
VOCAB = 256


def tiny_model(family: str) -> torch.nn.Module:
    """A freshly initialized tiny model of ``family`` in fp32 on the CPU (the caller
    seeds torch's generator, moves and casts it)."""
    import transformers

    if family == "mamba2":
        config = transformers.Mamba2Config(
            vocab_size=VOCAB,
            hidden_size=64,
            state_size=16,
            num_hidden_layers=2,
            expand=2,
            head_dim=16,
            num_heads=8,
            n_groups=1,
            conv_kernel=WIDTH,
            chunk_size=32,
            use_conv_bias=True,
            use_cache=False,
        )
        return transformers.Mamba2ForCausalLM(config)
    if family == "qwen3_next":
        config = transformers.Qwen3NextConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            linear_conv_kernel_dim=WIDTH,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            # Dense MLPs: a router's top-k could flip on bf16 noise and move the loss
            # by more than the conv's rounding does.
            mlp_only_layers=[0, 1],
            use_cache=False,
        )
        return transformers.Qwen3NextForCausalLM(config)
    raise ValueError(f"unknown family {family!r}")


FAMILIES = ("mamba2", "qwen3_next")


def transformers_module(family: str):
    import importlib

    return importlib.import_module(f"transformers.models.{family}.modeling_{family}")


def use_own_torch_conv(monkeypatch, family: str) -> None:
    """Makes ``family``'s layers run transformers' own PyTorch conv (the fallback of its
    ``causal_conv1d_fn`` hook, also when causal-conv1d is installed) and their unfused
    path (when mamba_ssm is installed the Mamba2 mixer fuses the conv into its scan)."""
    import inspect

    module = transformers_module(family)
    # The hook is functools.wraps(the PyTorch function): unwrap finds that function.
    monkeypatch.setattr(module, "causal_conv1d_fn", inspect.unwrap(module.causal_conv1d_fn))
    if hasattr(module, "mamba2_split_conv1d_scan_combined"):
        monkeypatch.setattr(module, "mamba2_split_conv1d_scan_combined", lambda *a, **k: None)


def train(
    family: str,
    device: str,
    *,
    dtype: torch.dtype = torch.bfloat16,
    steps: int = 5,
    batch: int = 2,
    seqlen: int = 64,
    lr: float = 0.5,
    seed: int = 0,
) -> tuple[list[float], dict[str, torch.Tensor], int]:
    """``steps`` SGD steps of a tiny ``family`` model on one fixed batch of random tokens
    (B > 1 rows, so the conv sees several sequences), from the same initial weights and
    data for a given seed whatever the device and the conv in use. Returns the losses,
    the conv parameters' gradients of the first step (float64, on the CPU) and the
    number of conv layers."""
    torch.manual_seed(seed)
    model = tiny_model(family).to(device=device, dtype=dtype)
    model.train()
    conv_layers = sum(1 for name, _ in model.named_modules() if name.endswith("conv1d"))
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, VOCAB, (batch, seqlen), generator=gen).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses, first_grads = [], {}
    for step in range(steps):
        optimizer.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if step == 0:
            first_grads = {
                name: p.grad.detach().double().cpu()
                for name, p in model.named_parameters()
                if ".conv1d." in name
            }
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses), losses
    return losses, first_grads, conv_layers


#: How far Cake's training may be from the model's own: the first step's gradient of
#: each conv parameter within GRAD_RTOL (relative L2 norm), each loss within LOSS_RTOL.
#: Both runs are bf16 and differ only in the conv: Cake rounds y once, from an fp32
#: pre-activation, the PyTorch fallback twice (its bf16 conv output, then its bf16
#: SiLU), and their SiLU' read pre at different precisions. So the two differ by bf16
#: rounding, 2**-8 relative, which the model's sums spread: on the CPU twin of this test
#: (the float64 reference in place of the kernels) the conv gradients differ by 0.8e-2
#: to 1.0e-2 and the losses by 8e-4 relative at most, the order of what running the
#: fallback in fp32 instead of bf16 changes (1.1e-2 to 1.3e-2, and 9e-3). A conv that
#: joins a batch's rows moves the gradients by 0.18 or more, one that drops its weight
#: gradient by 1.0.
GRAD_RTOL = 5e-2
LOSS_RTOL = 2e-2


def assert_cake_trains_like_the_model(family: str, device: str, monkeypatch) -> None:
    """A tiny ``family`` model trained with ``cake.integrations.use_in_transformers``
    (strict: every conv call goes to Cake, counted) and with its own PyTorch conv: the
    same losses and first gradients within the tolerances above, and a falling loss."""
    import cake.dropins
    import cake.integrations

    with monkeypatch.context() as patch:
        use_own_torch_conv(patch, family)
        want_losses, want_grads, _ = train(family, device)

    calls = []
    drop_in = cake.dropins.causal_conv1d_fn

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return drop_in(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(cake.dropins, "causal_conv1d_fn", counted)
        with cake.integrations.use_in_transformers(strict=True) as switch:
            assert family in switch.models
            got_losses, got_grads, conv_layers = train(family, device)

    steps = len(want_losses)
    assert len(calls) == conv_layers * steps, (len(calls), conv_layers, steps)
    assert sorted(got_grads) == sorted(want_grads) and want_grads
    for name, want in want_grads.items():
        error = ((got_grads[name] - want).norm() / want.norm()).item()
        assert error <= GRAD_RTOL, f"{name}: gradient {error:.3g} from the model's own"
    for step, (got, want) in enumerate(zip(got_losses, want_losses, strict=True)):
        assert abs(got - want) <= LOSS_RTOL * abs(want), (step, got_losses, want_losses)
    assert got_losses[-1] < 0.9 * got_losses[0], got_losses

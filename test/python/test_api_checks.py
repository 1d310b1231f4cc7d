# SPDX-License-Identifier: Apache-2.0
"""Every argument check of the forward and backward, without a GPU.

The metadata checks run before the device check, so CPU tensors reach each of them;
the alignment checks run inside the custom ops before the device check, so
misaligned CPU tensors reach those; the device-mismatch checks use "meta" tensors.
A valid call on CPU tensors then fails with the unsupported-device RuntimeError.
"""

import cake
import pytest
import torch

BF16 = torch.bfloat16
S, C = 16, 8


def valid_args():
    """Valid CPU arguments of a forward/backward; each test breaks one of them."""
    return dict(
        x=torch.randn(S, C).to(BF16),
        weight=torch.randn(C, 4),
        cu_seqlens=torch.tensor([0, 5, 16], dtype=torch.int32),
        bias=torch.randn(C),
        dy=torch.randn(S, C).to(BF16),
    )


def forward(**changes):
    args = valid_args() | changes
    return cake.cake_causal_conv1d_train_forward(
        args.pop("x"),
        args.pop("weight"),
        args.pop("cu_seqlens"),
        **{k: v for k, v in args.items() if k != "dy"},
    )


def backward(**changes):
    args = valid_args() | changes
    return cake.cake_causal_conv1d_train_backward(
        args.pop("x"), args.pop("weight"), args.pop("cu_seqlens"), args.pop("dy"), **args
    )


def misaligned(t: torch.Tensor, offset_bytes: int) -> torch.Tensor:
    """A contiguous copy of ``t`` whose data pointer is ``offset_bytes`` past the
    (64-byte aligned) start of its CPU allocation."""
    skip = offset_bytes // t.element_size()
    buffer = torch.empty(t.numel() + skip, dtype=t.dtype)
    view = buffer[skip:].view(t.shape)
    view.copy_(t)
    return view


def transposed(t: torch.Tensor) -> torch.Tensor:
    """A non-contiguous tensor with ``t``'s shape and values."""
    return t.t().contiguous().t()


def meta(t: torch.Tensor) -> torch.Tensor:
    return t.to("meta")


def bad(test_id, exception, words, **changes):
    """One bad call: the argument changes, the exception, and words (separated by
    "|") that its message must contain."""
    return pytest.param(changes, exception, words.split("|"), id=test_id)


X = torch.randn(S, C).to(BF16)
u8, i32 = torch.uint8, torch.int32

BAD_FORWARD = [
    bad("x-type", TypeError, "x|torch.Tensor|list", x=X.tolist()),
    bad("x-dtype", TypeError, "x|torch.bfloat16|torch.float32", x=X.float()),
    bad("x-rank1", ValueError, "x|[S, C] or [1, S, C]|[128]", x=X.flatten()),
    bad("x-batch2", ValueError, "x|[2, 16, 8]", x=torch.stack([X, X])),
    bad("x-C%8", ValueError, "x|multiple of 8|C = 12", x=torch.randn(S, 12).to(BF16)),
    bad("x-C0", ValueError, "x|C = 0", x=X[:, :0]),
    bad("x-strided", ValueError, "x|contiguous|[1, 16]", x=transposed(X)),
    bad("weight-dtype", TypeError, "weight|torch.float16", weight=torch.randn(C, 4).half()),
    bad("weight-rank", ValueError, "weight|[8, 4]|[32]", weight=torch.randn(C * 4)),
    bad("weight-width3", ValueError, "weight|width 4|width 3", weight=torch.randn(C, 3)),
    bad("weight-width2", ValueError, "weight|width 2", weight=torch.randn(C, 2)),
    bad("weight-C", ValueError, "weight|[8, 4]|[16, 4]", weight=torch.randn(2 * C, 4)),
    bad("weight-strided", ValueError, "weight|contiguous", weight=transposed(torch.randn(C, 4))),
    bad("bias-type", TypeError, "bias|list", bias=[0.0] * C),
    bad("bias-dtype", TypeError, "bias|torch.float64", bias=torch.randn(C).double()),
    bad("bias-shape", ValueError, "bias|[8]|[16]", bias=torch.randn(2 * C)),
    bad("bias-strided", ValueError, "bias|contiguous", bias=torch.randn(2 * C)[::2]),
    bad("cu-dtype", TypeError, "cu_seqlens|torch.int64", cu_seqlens=torch.tensor([0, 16])),
    bad("cu-2d", ValueError, "cu_seqlens|1-D", cu_seqlens=torch.tensor([[0, 16]], dtype=i32)),
    bad("cu-empty", ValueError, "cu_seqlens|[0]", cu_seqlens=torch.zeros(0, dtype=i32)),
    bad(
        "cu-strided",
        ValueError,
        "cu_seqlens|contiguous",
        cu_seqlens=torch.tensor([0, 9, 16, 9], dtype=i32)[::2],
    ),
    bad("out-dtype", TypeError, "out|torch.float32", out=torch.empty(S, C)),
    bad("out-shape", ValueError, "out|[16, 8]|[1, 16, 8]", out=torch.empty(1, S, C, dtype=BF16)),
    bad("out-strided", ValueError, "out|contiguous", out=transposed(X)),
    bad("workspace-dtype", TypeError, "workspace|torch.int32", workspace=torch.zeros(0, dtype=u8)),
    bad(
        "workspace-strided",
        ValueError,
        "workspace|contiguous",
        workspace=torch.zeros(4, dtype=i32)[::2],
    ),
    bad("weight-device", ValueError, "weight|cpu|meta", weight=meta(torch.randn(C, 4))),
    bad("cu-device", ValueError, "cu_seqlens|meta", cu_seqlens=meta(torch.zeros(3, dtype=i32))),
    bad("bias-device", ValueError, "bias|meta", bias=meta(torch.randn(C))),
    bad("out-device", ValueError, "out|meta", out=meta(X)),
    bad(
        "workspace-device", ValueError, "workspace|meta", workspace=meta(torch.zeros(0, dtype=i32))
    ),
    bad("x-align", ValueError, "x|16-byte aligned", x=misaligned(X, 2)),
    bad("weight-f32-align", ValueError, "weight|16-byte", weight=misaligned(torch.randn(C, 4), 4)),
    bad(
        "weight-bf16-align",
        ValueError,
        "weight|8-byte",
        weight=misaligned(torch.randn(C, 4).to(BF16), 4),
    ),
    bad("bias-align", ValueError, "bias|16-byte", bias=misaligned(torch.randn(C), 8)),
    bad("out-align", ValueError, "out|16-byte", out=misaligned(X, 8)),
]

BAD_BACKWARD = [
    bad(
        "policy-unknown",
        ValueError,
        "silu_grad_preactivation|'fp16'",
        silu_grad_preactivation="fp16",
    ),
    bad("policy-type", TypeError, "silu_grad_preactivation|NoneType", silu_grad_preactivation=None),
    bad("x-dtype", TypeError, "x|torch.float32", x=X.float()),
    bad("weight-width", ValueError, "weight|width 5", weight=torch.randn(C, 5)),
    bad("dy-dtype", TypeError, "dy|torch.float32", dy=X.float()),
    bad("dy-shape", ValueError, "dy|[17, 8]", dy=torch.randn(S + 1, C).to(BF16)),
    bad("dy-strided", ValueError, "dy|contiguous", dy=transposed(X)),
    bad("dx-dtype", TypeError, "dx|torch.float32", dx=torch.empty(S, C)),
    bad("dx-shape", ValueError, "dx|[16, 16]", dx=torch.empty(S, 2 * C, dtype=BF16)),
    bad(
        "dweight-dtype", TypeError, "dweight|torch.bfloat16", dweight=torch.empty(C, 4, dtype=BF16)
    ),
    bad("dweight-shape", ValueError, "dweight|[8, 3]", dweight=torch.empty(C, 3)),
    bad("dweight-strided", ValueError, "dweight|contiguous", dweight=transposed(torch.empty(C, 4))),
    bad("dbias-without-bias", ValueError, "dbias|bias is None", bias=None, dbias=torch.empty(C)),
    bad("dbias-dtype", TypeError, "dbias|torch.bfloat16", dbias=torch.empty(C, dtype=BF16)),
    bad("dbias-shape", ValueError, "dbias|[16]", dbias=torch.empty(C + 8)),
    bad("workspace-type", TypeError, "workspace|bytearray", workspace=bytearray(16)),
    bad(
        "workspace-strided",
        ValueError,
        "workspace|contiguous",
        workspace=torch.empty(64, dtype=u8)[::2],
    ),
    bad("dy-device", ValueError, "dy|meta", dy=meta(X)),
    bad("dweight-device", ValueError, "dweight|meta", dweight=meta(torch.empty(C, 4))),
    bad(
        "workspace-device", ValueError, "workspace|meta", workspace=meta(torch.empty(64, dtype=u8))
    ),
    bad("dy-align", ValueError, "dy|16-byte", dy=misaligned(X, 2)),
    bad("dx-align", ValueError, "dx|16-byte", dx=misaligned(X, 8)),
    bad("dweight-align", ValueError, "dweight|16-byte", dweight=misaligned(torch.empty(C, 4), 4)),
    bad("dbias-align", ValueError, "dbias|16-byte", dbias=misaligned(torch.empty(C), 4)),
    bad(
        "workspace-align",
        ValueError,
        "workspace|16-byte",
        workspace=misaligned(torch.empty(64, dtype=u8), 1),
    ),
]


def _check_raises(call, changes, exception, words):
    with pytest.raises(exception) as info:
        call(**changes)
    assert type(info.value) is exception
    message = str(info.value)
    assert message.startswith("cake: ") and " must " in message and "; got " in message, message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


@pytest.mark.parametrize("changes, exception, words", BAD_FORWARD)
def test_forward_rejects(changes, exception, words):
    _check_raises(forward, changes, exception, words)


@pytest.mark.parametrize("changes, exception, words", BAD_BACKWARD)
def test_backward_rejects(changes, exception, words):
    _check_raises(backward, changes, exception, words)


def test_autograd_function_rejects_unknown_policy_at_forward():
    args = valid_args()
    with pytest.raises(ValueError, match="silu_grad_preactivation"):
        cake.cake_causal_conv1d(
            args["x"],
            args["weight"],
            args["cu_seqlens"],
            args["bias"],
            silu_grad_preactivation="bf17",
        )


@pytest.mark.parametrize(
    "call",
    [
        forward,
        backward,
        lambda: forward(x=torch.randn(1, S, C).to(BF16), bias=None),
        lambda: backward(
            weight=torch.randn(C, 4).to(BF16),
            bias=torch.randn(C).to(BF16),
            silu_grad_preactivation="fp32",
        ),
        # Alignment rules met exactly (bf16 weight: 8 bytes) reach the device check.
        lambda: forward(weight=misaligned(torch.randn(C, 4).to(BF16), 8)),
        lambda: cake.cake_causal_conv1d(*list(valid_args().values())[:4]),
    ],
    ids=[
        "forward",
        "backward",
        "forward-1SC",
        "backward-bf16",
        "bf16-weight-8-aligned",
        "autograd",
    ],
)
def test_valid_cpu_call_fails_on_the_device_check(call):
    with pytest.raises(RuntimeError, match="cake: device cpu is not supported"):
        call()

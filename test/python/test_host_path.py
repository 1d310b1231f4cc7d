# SPDX-License-Identifier: Apache-2.0
"""The Python host path without a GPU: launch plans cached per signature, the direct
eager launch and the custom-op route, with cake._C replaced by a recorder that takes CPU
tensors (docs/host-overhead.md).

The recorder checks nothing about the kernels: these tests show which route a call
takes, what reaches the launch, and that what a plan caches never skips a check that
depends on the call (alignment, overlaps, workspace size).
"""

import sys

import cake
import cake._C
import pytest
import torch
from cake import _ops

from cake_testing import OpLog

BF16 = torch.bfloat16
S, C = 16, 8
STREAM = 0x5EED


class Recorder:
    """Stands in for cake._C: records each launch and whether it came through a
    custom op (a frame of the ops' implementations on the stack)."""

    def __init__(self):
        self.launches = []

    def _record(self, kind, args):
        frame, through_op = sys._getframe(2), False
        while frame is not None:
            through_op |= frame.f_code.co_name.startswith("causal_conv1d_")
            frame = frame.f_back
        self.launches.append((kind, args, through_op))

    def forward(self, *args):
        self._record("forward", args)

    def backward(self, *args):
        self._record("backward", args)

    @staticmethod
    def backward_workspace_bytes(channels, index):
        return channels * 132

    # The alignment rules are the manifest's, which need no launch.
    alignments = staticmethod(cake._C.alignments)


@pytest.fixture
def recorder(monkeypatch):
    """Every device "supported" by the recorder, with empty plan caches; the C++
    route (test_torch_ops.py) off, as it launches through the runtime itself."""
    extension = Recorder()
    monkeypatch.setattr(_ops, "torch_ops", None)
    monkeypatch.setattr(_ops, "_load_extension", lambda: (extension, ""))
    monkeypatch.setattr(_ops, "_target", lambda device: (None, 0, lambda: STREAM))
    monkeypatch.setattr(_ops, "_FORWARD_PLANS", {})
    monkeypatch.setattr(_ops, "_BACKWARD_PLANS", {})
    return extension


def inputs(S=S, batch=False, weight_dtype=torch.float32, bias_dtype=torch.float32):
    shape = (1, S, C) if batch else (S, C)
    return {
        "x": torch.randn(shape).to(BF16),
        "weight": torch.randn(C, 4).to(weight_dtype),
        "cu_seqlens": torch.tensor([0, 5, S], dtype=torch.int32),
        "bias": None if bias_dtype is None else torch.randn(C).to(bias_dtype),
    }


def forward(a, **buffers):
    return cake.cake_causal_conv1d_train_forward(
        a["x"], a["weight"], a["cu_seqlens"], bias=a["bias"], **buffers
    )


def test_eager_forward_launches_directly(recorder):
    a = inputs(batch=True, bias_dtype=BF16)
    y = cake.cake_causal_conv1d_train_forward(a["x"], a["weight"], a["cu_seqlens"], bias=a["bias"])
    assert (y.shape, y.dtype) == (a["x"].shape, BF16)
    [(kind, args, through_op)] = recorder.launches
    assert kind == "forward" and not through_op
    pointers = [a[k].data_ptr() for k in ("x", "weight", "cu_seqlens", "bias")]
    assert args == (*pointers, y.data_ptr(), S, C, 2, "f32", "bf16", 0, STREAM)


def test_eager_backward_launches_directly(recorder):
    a = inputs(weight_dtype=BF16, bias_dtype=None)
    dy = torch.randn(S, C).to(BF16)
    dx, dweight, dbias = cake.cake_causal_conv1d_train_backward(
        a["x"], a["weight"], a["cu_seqlens"], dy, silu_grad_preactivation="fp32"
    )
    assert dbias is None and (dx.shape, dweight.dtype) == ((S, C), BF16)
    [(kind, args, through_op)] = recorder.launches
    assert kind == "backward" and not through_op
    assert args[:8] == (
        a["x"].data_ptr(),
        a["weight"].data_ptr(),
        a["cu_seqlens"].data_ptr(),
        0,
        dy.data_ptr(),
        dx.data_ptr(),
        dweight.data_ptr(),
        0,
    )
    assert args[8] != 0 and args[9:] == (S, C, 2, "bf16", "none", "fp32", 0, STREAM)


def test_dispatch_mode_and_grad_take_the_custom_ops(recorder):
    a = inputs()
    call = (a["x"], a["weight"], a["cu_seqlens"])
    # A dispatch mode (as FakeTensorMode, make_fx) must see the op.
    with OpLog() as log:
        cake.cake_causal_conv1d_train_forward(*call, bias=a["bias"])
    assert "cake.causal_conv1d_fwd.default" in log.ops
    # An input that requires grad under grad mode: through the op, which records that
    # it has no autograd formula, as before the direct route existed.
    weight = a["weight"].requires_grad_()
    y = cake.cake_causal_conv1d_train_forward(a["x"], weight, a["cu_seqlens"])
    assert y.grad_fn is not None
    with pytest.raises(RuntimeError, match="no autograd formula"):
        y.float().sum().backward()
    # Without grad mode the same call launches directly.
    with torch.no_grad():
        cake.cake_causal_conv1d_train_forward(a["x"], weight, a["cu_seqlens"])
    assert [through_op for _, _, through_op in recorder.launches] == [True, True, False]
    # Both routes launched the same arguments but y.
    assert {args[:4] + args[5:] for _, args, _ in recorder.launches[1:]} == {
        (*(t.data_ptr() for t in call), 0, S, C, 2, "f32", "none", 0, STREAM)
    }


def test_autograd_launches_directly_in_eager_mode(recorder):
    a = inputs(bias_dtype=BF16)
    x, weight, bias = (a[k].requires_grad_() for k in ("x", "weight", "bias"))
    y = cake.cake_causal_conv1d(x, weight, a["cu_seqlens"], bias, silu_grad_preactivation="fp32")
    y.backward(torch.ones(S, C))  # fp32 grad_y: converted to bf16 before the launch
    assert [(kind, through_op) for kind, _, through_op in recorder.launches] == [
        ("forward", False),
        ("backward", False),
    ]
    assert recorder.launches[1][1][14] == "fp32"
    assert (x.grad.dtype, weight.grad.dtype, bias.grad.dtype) == (BF16, torch.float32, BF16)


def misaligned(t, offset_bytes):
    skip = offset_bytes // t.element_size()
    return torch.empty(t.numel() + skip, dtype=t.dtype)[skip:].view(t.shape)


def test_a_cached_plan_still_checks_pointers(recorder):
    a = inputs()
    call = (a["x"], a["weight"], a["cu_seqlens"])
    out = torch.empty(S, C, dtype=BF16)
    cake.cake_causal_conv1d_train_forward(*call, bias=a["bias"], out=out)
    assert len(_ops._FORWARD_PLANS) == 1 and len(recorder.launches) == 1
    # Same signatures (shapes, dtypes, devices), other pointers: each is checked.
    with pytest.raises(ValueError, match="cake: out must be 16-byte aligned"):
        cake.cake_causal_conv1d_train_forward(*call, bias=a["bias"], out=misaligned(out, 8))
    with pytest.raises(ValueError, match="cake: x must be 16-byte aligned"):
        cake.cake_causal_conv1d_train_forward(misaligned(a["x"], 2), *call[1:], bias=a["bias"])
    with pytest.raises(ValueError, match="cake: out overlaps x"):
        cake.cake_causal_conv1d_train_forward(*call, bias=a["bias"], out=a["x"])
    with pytest.raises(ValueError, match="cake: out overlaps bias"):
        cake.cake_causal_conv1d_train_forward(
            *call, bias=out.view(torch.float32).flatten()[:C], out=out
        )
    assert len(recorder.launches) == 1
    # A new S is a new signature; the same signature again hits the cache.
    forward(inputs(S=24))
    cake.cake_causal_conv1d_train_forward(*call, bias=a["bias"], out=out)
    assert len(_ops._FORWARD_PLANS) == 3 and len(recorder.launches) == 3


def test_a_cached_plan_still_checks_metadata_on_a_miss(recorder):
    a = inputs()
    forward(a)
    with pytest.raises(TypeError, match="cake: weight must have dtype"):
        cake.cake_causal_conv1d_train_forward(a["x"], a["weight"].double(), a["cu_seqlens"])
    with pytest.raises(ValueError, match="cake: x must be contiguous"):
        cake.cake_causal_conv1d_train_forward(
            a["x"].t().contiguous().t(), a["weight"], a["cu_seqlens"]
        )
    with pytest.raises(TypeError, match="cake: cu_seqlens must be a torch.Tensor; got list"):
        cake.cake_causal_conv1d_train_forward(a["x"], a["weight"], [0, S])
    assert len(recorder.launches) == 1


def test_backward_workspace_is_checked_at_launch(recorder):
    a = inputs()
    dy = torch.randn(S, C).to(BF16)
    call = (a["x"], a["weight"], a["cu_seqlens"], dy)
    small = torch.empty(C * 132 - 16, dtype=torch.uint8)
    with pytest.raises(ValueError, match="workspace must hold at least 1056 bytes for C = 8"):
        cake.cake_causal_conv1d_train_backward(*call, bias=a["bias"], workspace=small)
    # The pointer checks come first.
    with pytest.raises(ValueError, match="workspace must be 16-byte aligned"):
        cake.cake_causal_conv1d_train_backward(
            *call, bias=a["bias"], workspace=misaligned(small, 1)
        )
    cake.cake_causal_conv1d_train_backward(
        *call, bias=a["bias"], workspace=torch.empty(C * 132, dtype=torch.uint8)
    )
    assert len(recorder.launches) == 1


def test_given_outputs_get_new_versions(recorder):
    a = inputs()
    dy = torch.randn(S, C).to(BF16)
    out = torch.empty(S, C, dtype=BF16)
    buffers = {
        "dx": torch.empty(S, C, dtype=BF16),
        "dweight": torch.empty(C, 4),
        "dbias": torch.empty(C),
        "workspace": torch.empty(C * 132, dtype=torch.uint8),
    }
    before = [t._version for t in (out, *buffers.values())]
    cake.cake_causal_conv1d_train_forward(a["x"], a["weight"], a["cu_seqlens"], out=out)
    cake.cake_causal_conv1d_train_backward(
        a["x"], a["weight"], a["cu_seqlens"], dy, bias=a["bias"], **buffers
    )
    after = [t._version for t in (out, *buffers.values())]
    assert all(b > a for a, b in zip(before, after, strict=True))
    assert [through_op for _, _, through_op in recorder.launches] == [False, False]


def test_the_plan_cache_is_bounded(recorder, monkeypatch):
    monkeypatch.setattr(_ops, "_MAX_PLANS", 4)
    for tokens in range(8, 20):
        forward(inputs(S=tokens))
    assert 1 <= len(_ops._FORWARD_PLANS) <= 4 and len(recorder.launches) == 12

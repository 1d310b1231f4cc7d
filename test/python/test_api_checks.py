# SPDX-License-Identifier: Apache-2.0
"""Every argument check of the forward and backward, without a GPU.

CPU tensors reach each check: the metadata checks run first, the alignment and
overlap checks inside the custom ops before the launch; the device-mismatch checks
use "meta" tensors. A valid call on CPU tensors runs the host kernels.
"""

import cake
import cake._C
import pytest
import torch
from cake import _checks

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
    bad(
        "workspace-align",
        ValueError,
        "workspace|16-byte",
        workspace=misaligned(torch.empty(64, dtype=u8), 1),
    ),
]


def rows_of(buffer: torch.Tensor, first: int, count: int) -> torch.Tensor:
    """Rows [first, first + count) of a bf16 [n, C] buffer as a [count, C] view (C = 8
    bf16 is 16 bytes a row, so each such view is 16-byte aligned)."""
    return buffer.flatten()[first * C : (first + count) * C].view(count, C)


def f32_view(t: torch.Tensor, count: int, offset: int = 0) -> torch.Tensor:
    """``count`` fp32 elements of ``t``'s bytes, ``offset`` fp32 elements in."""
    return t.view(torch.float32).flatten()[offset : offset + count]


def bf16_buffer() -> torch.Tensor:
    return torch.zeros(S, C, dtype=BF16)


def _x_under_out(a):
    # x is rows 0..15 of a 20-row buffer, out rows 4..19: 12 rows shared.
    buffer = torch.zeros(S + 4, C, dtype=BF16)
    return {"x": rows_of(buffer, 0, S), "out": rows_of(buffer, 4, S)}


def _weight_in_out(a):
    out = bf16_buffer()
    return {"out": out, "weight": f32_view(out, C * 4).view(C, 4)}


def _bias_in_out(a):
    out = bf16_buffer()
    return {"out": out, "bias": f32_view(out, C, offset=12)}


def _cu_in_out(a):
    out = bf16_buffer()
    return {"out": out, "cu_seqlens": out.view(i32).flatten()[60:63]}


def _workspace_in_out(a):
    out = bf16_buffer()
    return {"out": out, "workspace": out.view(i32).flatten()}


def _dweight_and_dbias_in_one_buffer(a):
    # dweight is elements 0..31, dbias 28..35: 16 bytes shared.
    buffer = torch.zeros(C * 5)
    return {"dweight": buffer[: C * 4].view(C, 4), "dbias": buffer[28 : 28 + C]}


def _workspace_in_dx(a):
    dx = bf16_buffer()
    return {"dx": dx, "workspace": dx.view(u8).flatten()[16:]}


def _bias_in_dx(a):
    dx = bf16_buffer()
    return {"dx": dx, "bias": f32_view(dx, C, offset=8)}


def overlap(test_id, call, make, output, other):
    """A call whose argument changes ``make(valid args)`` make ``output`` share bytes
    with ``other``."""
    return pytest.param(call, make, output, other, id=test_id)


OVERLAPS = [
    overlap("fwd-out=x", forward, lambda a: {"out": a["x"]}, "out", "x"),
    overlap("fwd-out-shifted-over-x", forward, _x_under_out, "out", "x"),
    overlap("fwd-out-over-weight", forward, _weight_in_out, "out", "weight"),
    overlap("fwd-out-over-bias", forward, _bias_in_out, "out", "bias"),
    overlap("fwd-out-over-cu", forward, _cu_in_out, "out", "cu_seqlens"),
    overlap(
        "fwd-workspace-in-x",
        forward,
        lambda a: {"workspace": a["x"].view(i32).flatten()[4:8]},
        "workspace",
        "x",
    ),
    overlap("fwd-workspace-in-out", forward, _workspace_in_out, "workspace", "out"),
    overlap("bwd-dx=dy", backward, lambda a: {"dx": a["dy"]}, "dx", "dy"),
    overlap("bwd-dx=x", backward, lambda a: {"dx": a["x"]}, "dx", "x"),
    overlap(
        "bwd-dweight=weight", backward, lambda a: {"dweight": a["weight"]}, "dweight", "weight"
    ),
    overlap("bwd-dbias=bias", backward, lambda a: {"dbias": a["bias"]}, "dbias", "bias"),
    overlap("bwd-dweight-dbias", backward, _dweight_and_dbias_in_one_buffer, "dbias", "dweight"),
    overlap("bwd-workspace-in-dx", backward, _workspace_in_dx, "workspace", "dx"),
    overlap(
        "bwd-workspace=x", backward, lambda a: {"workspace": a["x"].view(u8)}, "workspace", "x"
    ),
    overlap("bwd-dx-over-bias", backward, _bias_in_dx, "dx", "bias"),
]


@pytest.mark.parametrize("call, make, output, other", OVERLAPS)
def test_outputs_overlapping_other_tensors_are_rejected(call, make, output, other):
    # Caught from data pointers inside the custom ops, before the device check: CPU
    # tensors reach it. The message names the output first, then what it overlaps.
    args = valid_args()
    changes = args | make(args)
    _check_raises(call, changes, ValueError, [])
    with pytest.raises(ValueError, match=f"^cake: {output} overlaps {other}: "):
        call(**changes)


def _side_by_side(a):
    buffer = torch.zeros(C * 5)
    return {"dweight": buffer[: C * 4].view(C, 4), "dbias": buffer[C * 4 :]}


def _empty_out_is_x(a):
    x = torch.zeros(0, C, dtype=BF16)
    return {"x": x, "out": x, "cu_seqlens": torch.zeros(1, dtype=i32)}


@pytest.mark.parametrize(
    "call, make",
    [
        (backward, lambda a: {"dy": a["x"]}),
        (forward, lambda a: {"bias": f32_view(a["weight"], C)}),
        (backward, _side_by_side),
        (forward, lambda a: {"workspace": a["x"].view(i32).flatten()[:0]}),
        (forward, _empty_out_is_x),
    ],
    ids=["inputs-dy=x", "inputs-bias-in-weight", "outputs-adjacent", "empty-workspace", "S0-out=x"],
)
def test_allowed_sharing_runs(call, make):
    # Inputs may share memory (they are only read); outputs side by side do not
    # overlap; an empty tensor overlaps nothing. On the CPU, the host kernels run.
    args = valid_args()
    call(**(args | make(args)))


def test_check_no_overlap_byte_extents():
    # Extents are (name, start, bytes), as _ops reads them from data pointers.
    base = 0x7F0000000000
    a, b = ("a", base, 16), ("b", base + 16, 16)
    # Side by side and empty extents: nothing shared.
    _checks.check_no_overlap([a, ("e", base + 16, 0), ("e2", base + 8, 0)], [b])
    # One byte is enough.
    with pytest.raises(ValueError, match=r"^cake: a overlaps b: .*got a at bytes \[0x"):
        _checks.check_no_overlap([("a", base, 17)], [b])
    with pytest.raises(ValueError, match="cake: w overlaps b"):
        _checks.check_no_overlap([("w", base + 12, 16)], [b])
    # Inputs may overlap each other; outputs may not.
    _checks.check_no_overlap([a], [b, ("b again", base + 20, 20)])
    with pytest.raises(ValueError, match="cake: c overlaps a"):
        _checks.check_no_overlap([a, ("c", base + 8, 1)], [])
    # An output overlapping an input and an earlier output names the input.
    with pytest.raises(ValueError, match="cake: c overlaps b"):
        _checks.check_no_overlap([("a", base + 32, 16), ("c", base + 16, 24)], [b])


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
        # Alignment rules met exactly (bf16 weight: 8 bytes) pass.
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
def test_valid_cpu_call_runs(call):
    outputs = call()
    for output in outputs if isinstance(outputs, tuple) else (outputs,):
        assert output is None or bool(output.float().isfinite().all())


def test_alignment_rules_are_the_manifests():
    # The checks take each buffer's alignment from the kernels' manifest: the largest
    # that a kernel of the call (either policy for the backward) assumes of it.
    from cake import _ops

    manifest = cake._C.kernels()
    weight, bias = torch.empty(C, 4), torch.empty(C, dtype=BF16)
    for op, names in (("fwd", _ops._FORWARD_NAMES), ("bwd", _ops._BACKWARD_NAMES)):
        got = dict(zip(names, _ops._alignments(torch.device("cpu"), op, weight, bias, names)))
        ops = ("fwd",) if op == "fwd" else ("bwd", "reduce")
        for name, bytes_ in got.items():
            kernel_name = _ops._KERNEL_NAMES.get(name, name)
            want = max(
                (
                    k["align"][kernel_name]
                    for k in manifest
                    if k["target"] == "host"
                    and k["op"] in ops
                    and (k["weight"], k["bias"]) == ("f32", "bf16")
                    and kernel_name in k["align"]
                ),
                default=1,
            )
            assert bytes_ == want, (op, name)
    # Rows move 16 bytes at a time; the forward never reads its workspace.
    fwd = dict(
        zip(
            _ops._FORWARD_NAMES,
            _ops._alignments(torch.device("cpu"), "fwd", weight, bias, _ops._FORWARD_NAMES),
        )
    )
    assert fwd["x"] == fwd["out"] == 16 and fwd["workspace"] == 1


@pytest.mark.parametrize("launch", ["forward", "backward"])
@pytest.mark.parametrize(
    "bad, message",
    [
        # The kernels count tokens in 32 bits with room for the rows a loop
        # runs past S.
        (dict(S=2**31 - 2**16 + 1), r"S=2147418113 tokens is more than the kernels take"),
        (dict(C=0), r"bad sizes S=8 C=0"),
        (dict(num_docs=-1), r"bad sizes num_docs=-1"),
    ],
)
def test_launch_rejects_bad_sizes(launch, bad, message):
    # The runtime refuses them before it reads any buffer, so these pointers
    # are never followed.
    sizes = dict(S=8, C=8, num_docs=1, weight_dtype="f32", bias_dtype="none") | bad
    where = dict(device_index=-1, stream=0)
    with pytest.raises(RuntimeError, match=message):
        if launch == "forward":
            cake._C.forward(x=0, weight=0, cu_seqlens=0, bias=0, y=0, **sizes, **where)
        else:
            cake._C.backward(x=0, weight=0, cu_seqlens=0, bias=0, dy=0, dx=0, dweight=0, dbias=0,
                             workspace=0, **sizes, policy="bf16", **where)


# Threads an H100 (132 SMs) holds at once of the two GPU forward configurations:
# 4 blocks of 128 an SM at 127 registers, 7 at 72 (what the driver reports there).
H100_RESIDENT = [132 * 4 * 128, 132 * 7 * 128]


@pytest.mark.parametrize(
    "S, C, config, parts",
    [
        (4096, 2048, "", 256),  # the second's grid, 1.11 waves, fills worse
        (16384, 4096, "_long", 1024),  # parts of 16 tokens, the shortest
        (32768, 5376, "_long", 1821),  # 16 waves would be 1408 parts of 23
        (65536, 8192, "_long", 3641),  # 98.5% full against 100%: within 2 points
        (131072, 4096, "_long", 7282),
        (32768, 4096, "_long", 1840),  # 16 waves: parts of 17.8 tokens
        (2000, 1024, "", 125),  # the second's grid is under a wave
        (8192, 16384, "_long", 456),
        (65536, 1024, "_long", 4096),
        (0, 64, "", 0),
    ],
)
def test_gpu_forward_rule(S, C, config, parts):
    # The forward's host rule (docs/kernel-abi.md), computed without a GPU for an
    # H100's residency, against the grids worked out by hand.
    gpu_forwards = {
        k["name"]
        for k in cake._C.kernels()
        if (k["target"], k["op"], k["weight"], k["bias"]) == ("gpu", "fwd", "f32", "f32")
    }
    assert gpu_forwards == {"cake_fwd_wf32_bf32", "cake_fwd_wf32_bf32_long"}
    got = cake._C.gpu_forward_rule(S, C, "f32", "f32", H100_RESIDENT)
    assert got == ("cake_fwd_wf32_bf32" + config, parts)


def test_gpu_forward_rule_needs_a_count_per_configuration():
    with pytest.raises(RuntimeError, match="1 resident thread counts for 2 forward"):
        cake._C.gpu_forward_rule(4096, 64, "f32", "f32", [67584])
    with pytest.raises(RuntimeError, match="resident threads must be positive"):
        cake._C.gpu_forward_rule(4096, 64, "f32", "f32", [67584, 0])


@pytest.mark.parametrize("S, C", [(-1, 64), (4096, 0), (2**31 - 2**16 + 1, 64)])
def test_gpu_forward_rule_checks_sizes_as_a_forward_does(S, C):
    with pytest.raises(RuntimeError, match="bad sizes|more than the kernels take"):
        cake._C.gpu_forward_rule(S, C, "f32", "f32", H100_RESIDENT)

# SPDX-License-Identifier: Apache-2.0
"""The drop-ins on the GPU (docs/drop-ins.md): the Dao-style function and the FLA-style
module against cake's own functional API on the same documents (bitwise) and against
the float64 reference, for seq_idx and cu_seqlens patterns and B > 1; no host sync; a
CUDA graph; the errors; and tiny transformers models trained with
cake.integrations.use_in_transformers against their own PyTorch conv."""

import cake
import pytest
import torch
from cake.dropins import ShortConvolution, causal_conv1d_fn
from cake_testing import Case, assert_bitwise_equal, assert_outputs, requires_cake_gpu
from dropins_testing import FAMILIES, assert_cake_trains_like_the_model, host_document_starts

pytestmark = [pytest.mark.gpu, requires_cake_gpu]

BF16 = torch.bfloat16
NAMES = ("y", "dx", "dweight", "dbias")
ROUTES = [(torch.float32, torch.float32), (BF16, BF16), (torch.float32, None)]


def route_id(route) -> str:
    weight_dtype, bias_dtype = route
    names = {torch.float32: "f32", BF16: "bf16", None: "none"}
    return f"weight_{names[weight_dtype]}-bias_{names[bias_dtype]}"


def seq_idx_rows(batch: int, seqlen: int, kind: str, seed: int) -> torch.Tensor | None:
    """A [B, T] int32 seq_idx (on the CPU) of runs of random lengths: "docs" numbers each
    row's runs 0, 1, 2, ...; "short" too, with runs of 1 to 3 tokens; "not-monotone"
    draws each run's value from 0..2 (a value may come back after another); "negative"
    from -1..1. "none" is no seq_idx."""
    if kind == "none":
        return None
    gen = torch.Generator().manual_seed(seed)
    longest = {"short": 3}.get(kind, max(1, seqlen // 3))
    rows = []
    for _ in range(batch):
        row, run = [], 0
        while len(row) < seqlen:
            length = int(torch.randint(1, longest + 1, (1,), generator=gen))
            if kind in ("docs", "short"):
                value = run
            else:
                low = -1 if kind == "negative" else 0
                value = int(torch.randint(low, low + 3, (1,), generator=gen))
            row += [value] * length
            run += 1
        rows.append(row[:seqlen])
    return torch.tensor(rows, dtype=torch.int32).reshape(batch, seqlen)


def inputs(batch, seqlen, channels, route, seed):
    """x rows [B, T, D] bf16, weight [D, 4], bias [D] or None, dy rows [B, T, D] bf16,
    on the GPU; normal values (weights and bias scaled by 0.5)."""
    weight_dtype, bias_dtype = route
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, dtype, scale=1.0):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=dtype).mul_(scale)

    x = randn(batch, seqlen, channels, dtype=BF16)
    weight = randn(channels, 4, dtype=weight_dtype, scale=0.5)
    bias = None if bias_dtype is None else randn(channels, dtype=bias_dtype, scale=0.5)
    dy = randn(batch, seqlen, channels, dtype=BF16)
    return x, weight, bias, dy


def packed_case(x, weight, bias, dy, starts: list[int]) -> Case:
    """The same tokens as one packed [S, D] batch with documents starting at ``starts``:
    what cake's own API takes, and what the reference checks."""
    total, channels = x.shape[0] * x.shape[1], x.shape[2]
    cu_host = torch.tensor(starts + [total], dtype=torch.int64)
    if starts and starts[0] != 0:
        raise AssertionError(f"documents must start at 0; got {starts[:3]}")
    return Case(
        x=x.reshape(total, channels),
        weight=weight,
        cu_seqlens=cu_host.to(device="cuda", dtype=torch.int32),
        cu_host=cu_host,
        bias=bias,
        dy=dy.reshape(total, channels),
        policy="bf16",
    )


def leaf(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().clone().requires_grad_()


def grad(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.grad


def functional(case: Case):
    """(y, dx, dweight, dbias) of cake.cake_causal_conv1d on the packed case."""
    x, weight, bias = leaf(case.x), leaf(case.weight), leaf(case.bias)
    y = cake.cake_causal_conv1d(x, weight, case.cu_seqlens, bias)
    y.backward(case.dy)
    return y.detach(), x.grad, weight.grad, grad(bias)


def dao(x_rows, weight, bias, dy_rows, seq_idx):
    """(y, dx, dweight, dbias) of the Dao-style function on the channel-last view of
    x_rows, y and dx as packed [S, D] rows."""
    batch, seqlen, channels = x_rows.shape
    x_leaf, weight, bias = leaf(x_rows), leaf(weight), leaf(bias)
    y = causal_conv1d_fn(x_leaf.transpose(1, 2), weight, bias, seq_idx=seq_idx, activation="silu")
    assert y.shape == (batch, channels, seqlen) and y.dtype == BF16 and y.stride(1) == 1
    y.backward(dy_rows.transpose(1, 2))
    rows = batch * seqlen
    return (
        y.detach().transpose(1, 2).reshape(rows, channels),
        x_leaf.grad.reshape(rows, channels),
        weight.grad,
        grad(bias),
    )


def assert_same(case: Case, got, want) -> None:
    """``got`` bitwise equal to cake's own API on the same documents (the same kernels,
    S, C and route: SPEC.md's determinism), and within the reference's tolerances."""
    for name, a, b in zip(NAMES, got, want, strict=True):
        assert_bitwise_equal(name, a, b)
    assert_outputs(case, **dict(zip(NAMES, got, strict=True)))


DAO_CASES = {
    "B1": (1, 3000, 160, "none"),
    "B4": (4, 777, 160, "none"),
    "B1-docs": (1, 5000, 256, "docs"),
    "B3-docs": (3, 1000, 64, "docs"),
    "B2-short-runs": (2, 600, 8, "short"),
    "B2-not-monotone": (2, 900, 136, "not-monotone"),
    "B3-negative": (3, 400, 64, "negative"),
    "B2-T3": (2, 3, 16, "short"),
    "B3-T0": (3, 0, 16, "docs"),
}


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
@pytest.mark.parametrize("case", DAO_CASES.values(), ids=DAO_CASES.keys())
def test_causal_conv1d_fn_matches_cake(case, route):
    batch, seqlen, channels, kind = case
    x, weight, bias, dy = inputs(batch, seqlen, channels, route, seed=seqlen + channels)
    seq_idx = seq_idx_rows(batch, seqlen, kind, seed=seqlen)
    if seq_idx is None:
        starts = list(range(0, batch * seqlen, max(seqlen, 1)))
        got = dao(x, weight, bias, dy, None)
    else:
        starts = host_document_starts(seq_idx)
        got = dao(x, weight, bias, dy, seq_idx.cuda())
    packed = packed_case(x, weight, bias, dy, starts)
    assert_same(packed, got, functional(packed))


def test_causal_conv1d_fn_on_a_slice_of_a_projection():
    # Mamba2's x: channels [D, 2D) of a [B, T, 3D] projection, transposed. It is
    # copied into packed rows; dx lands in that slice of the projection's gradient.
    batch, seqlen, channels = 2, 1500, 160
    projection = torch.randn(batch, seqlen, 3 * channels, device="cuda").to(BF16)
    _, weight, bias, dy = inputs(batch, seqlen, channels, ROUTES[0], seed=90)
    proj_leaf, weight_leaf, bias_leaf = leaf(projection), leaf(weight), leaf(bias)
    x = proj_leaf[..., channels : 2 * channels].transpose(1, 2)
    y = causal_conv1d_fn(x, weight_leaf, bias_leaf, activation="silu")
    y.backward(dy.transpose(1, 2))
    rows = batch * seqlen
    x_rows = projection[..., channels : 2 * channels].contiguous()
    packed = packed_case(x_rows, weight, bias, dy, [0, seqlen])
    got = (
        y.detach().transpose(1, 2).reshape(rows, channels),
        proj_leaf.grad[..., channels : 2 * channels].reshape(rows, channels),
        weight_leaf.grad,
        bias_leaf.grad,
    )
    assert_same(packed, got, functional(packed))
    assert proj_leaf.grad[..., :channels].count_nonzero() == 0
    assert proj_leaf.grad[..., 2 * channels :].count_nonzero() == 0


def short_conv_run(conv, x, dy, **kwargs):
    """(y, dx, dweight [D, 4], dbias) of a ShortConvolution forward and backward."""
    conv.zero_grad(set_to_none=True)
    x_leaf = leaf(x)
    y, state = conv(x_leaf, **kwargs)
    assert state is None and y.shape == x.shape and y.dtype == BF16
    y.backward(dy)
    rows, channels = x.shape[0] * x.shape[1], x.shape[2]
    bias_grad = None if conv.bias is None else conv.bias.grad
    return (
        y.detach().reshape(rows, channels),
        x_leaf.grad.reshape(rows, channels),
        conv.weight.grad.view(channels, 4),
        bias_grad,
    )


def short_conv(channels, route):
    weight_dtype, bias_dtype = route
    conv = ShortConvolution(channels, 4, bias=bias_dtype is not None, device="cuda")
    with torch.no_grad():  # nn.Conv1d's init, then the route's dtypes
        conv.weight.data = conv.weight.data.to(weight_dtype)
        if conv.bias is not None:
            conv.bias.data = conv.bias.data.to(bias_dtype)
    return conv


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_short_convolution_rows_match_cake(route):
    batch, seqlen, channels = 3, 1000, 160
    conv = short_conv(channels, route)
    x, _, _, dy = inputs(batch, seqlen, channels, route, seed=91)
    got = short_conv_run(conv, x, dy)
    weight = conv.weight.detach().view(channels, 4)
    bias = None if conv.bias is None else conv.bias.detach()
    packed = packed_case(x, weight, bias, dy, [0, seqlen, 2 * seqlen])
    assert_same(packed, got, functional(packed))


@pytest.mark.parametrize("cu_dtype", [torch.int32, torch.int64])
def test_short_convolution_cu_seqlens_matches_cake(cu_dtype):
    seqlen, channels = 3000, 256
    starts = [0, 5, 5, 700, 2999]
    conv = short_conv(channels, ROUTES[1])
    x, _, _, dy = inputs(1, seqlen, channels, ROUTES[1], seed=92)
    cu = torch.tensor(starts + [seqlen], dtype=cu_dtype, device="cuda")
    got = short_conv_run(conv, x, dy, cu_seqlens=cu)
    weight, bias = conv.weight.detach().view(channels, 4), conv.bias.detach()
    packed = packed_case(x, weight, bias, dy, starts)
    assert_same(packed, got, functional(packed))


def test_short_convolution_mask_and_residual():
    batch, seqlen, channels = 2, 500, 64
    conv = short_conv(channels, ROUTES[0])
    x, _, _, dy = inputs(batch, seqlen, channels, ROUTES[0], seed=93)
    mask = torch.ones(batch, seqlen, dtype=torch.bool, device="cuda")
    mask[1, :37] = False  # left padding of row 1
    residual = torch.randn(batch, seqlen, channels, device="cuda").to(BF16)
    before = x.clone()
    y, _ = conv(x, residual=residual, mask=mask)
    assert_bitwise_equal("x", x, before)
    masked = x * mask.unsqueeze(-1).to(BF16)
    weight, bias = conv.weight.detach().view(channels, 4), conv.bias.detach()
    rows = cake.dropins.rows_cu_seqlens(batch, seqlen, x.device)
    want = cake.cake_causal_conv1d(masked.reshape(-1, channels), weight, rows, bias)
    assert_bitwise_equal("y", y.detach(), want.view(batch, seqlen, channels) + residual)


def test_dropins_make_no_host_sync():
    # Everything the drop-ins add (packing, cu_seqlens from seq_idx or int64
    # cu_seqlens, the views) runs on the device: torch raises at any synchronizing call.
    batch, seqlen, channels = 2, 2000, 128
    x, weight, bias, dy = inputs(batch, seqlen, channels, ROUTES[0], seed=94)
    seq_idx = seq_idx_rows(batch, seqlen, "docs", seed=95).cuda()
    conv = short_conv(channels, ROUTES[0])
    cu = torch.tensor([0, 100, 100, 4000], dtype=torch.int64, device="cuda")
    x_leaf, weight_leaf = leaf(x), leaf(weight)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        y = causal_conv1d_fn(x_leaf.transpose(1, 2), weight_leaf, bias, seq_idx, activation="silu")
        y.backward(dy.transpose(1, 2))
        y2, _ = conv(x.reshape(1, batch * seqlen, channels), cu_seqlens=cu)
        y2.backward(dy.reshape(1, batch * seqlen, channels))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert x_leaf.grad is not None and conv.weight.grad is not None


def test_causal_conv1d_fn_in_a_cuda_graph():
    # The seq_idx -> cu_seqlens construction is captured with the kernels: a replay on
    # new x, weight, dy and new documents equals an eager call on them, bitwise.
    batch, seqlen, channels = 3, 1200, 96
    x, weight, bias, dy = inputs(batch, seqlen, channels, ROUTES[0], seed=96)
    seq_idx = seq_idx_rows(batch, seqlen, "docs", seed=97).cuda()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up, as torch.cuda.graph capture requires
        dao(x, weight, bias, dy, seq_idx)
    torch.cuda.current_stream().wait_stream(side)

    leaves = [leaf(t) for t in (x, weight, bias)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = causal_conv1d_fn(
            leaves[0].transpose(1, 2), leaves[1], leaves[2], seq_idx, activation="silu"
        )
        y.backward(dy.transpose(1, 2))
    captured = (y, *(t.grad for t in leaves))

    fresh_x, fresh_weight, fresh_bias, fresh_dy = inputs(batch, seqlen, channels, ROUTES[0], 98)
    fresh_seq_idx = seq_idx_rows(batch, seqlen, "short", seed=99)
    with torch.no_grad():
        for static, new in zip(leaves, (fresh_x, fresh_weight, fresh_bias), strict=True):
            static.copy_(new)
    dy.copy_(fresh_dy)
    seq_idx.copy_(fresh_seq_idx)
    for t in captured:
        t.detach().fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()

    rows = batch * seqlen
    got = (
        y.detach().transpose(1, 2).reshape(rows, channels),
        captured[1].reshape(rows, channels),
        captured[2],
        captured[3],
    )
    eager = dao(fresh_x, fresh_weight, fresh_bias, fresh_dy, fresh_seq_idx.cuda())
    for name, a, b in zip(NAMES, got, eager, strict=True):
        assert_bitwise_equal(name, a, b)
    packed = packed_case(
        fresh_x, fresh_weight, fresh_bias, fresh_dy, host_document_starts(fresh_seq_idx)
    )
    assert_outputs(packed, **dict(zip(NAMES, got, strict=True)))


def test_dropins_reject_before_any_launch_on_the_gpu():
    x, weight, bias, _ = inputs(2, 50, 64, ROUTES[0], seed=100)
    channel_last = x.transpose(1, 2)
    calls = [
        (lambda: causal_conv1d_fn(channel_last, weight, bias), ValueError, "activation"),
        (
            lambda: causal_conv1d_fn(channel_last.contiguous(), weight, bias, activation="silu"),
            ValueError,
            "x must be channel-last",
        ),
        (
            lambda: causal_conv1d_fn(
                channel_last,
                weight,
                bias,
                initial_states=x[:, :3].transpose(1, 2),
                activation="silu",
            ),
            ValueError,
            "initial_states must be None",
        ),
        (
            lambda: causal_conv1d_fn(channel_last, weight[:, :3].contiguous(), activation="silu"),
            ValueError,
            "weight must have width 4",
        ),
        (
            lambda: causal_conv1d_fn(channel_last.float(), weight, activation="silu"),
            TypeError,
            "x must have dtype torch.bfloat16",
        ),
        (
            lambda: causal_conv1d_fn(
                channel_last,
                weight,
                seq_idx=torch.zeros(2, 50, dtype=torch.int32),
                activation="silu",
            ),
            ValueError,
            "seq_idx must be on x's device",
        ),
        (
            lambda: short_conv(64, ROUTES[0])(x, cache=torch.zeros(2, 64, 4, device="cuda")),
            ValueError,
            "cache must be None",
        ),
    ]
    for call, exception, message in calls:
        with pytest.raises(exception, match=f"^cake: {message}"):
            call()


@pytest.mark.parametrize("family", FAMILIES)
def test_transformers_training_matches_the_models_own_conv(family, monkeypatch):
    pytest.importorskip("transformers")
    assert_cake_trains_like_the_model(family, "cuda", monkeypatch)

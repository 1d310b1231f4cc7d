# SPDX-License-Identifier: Apache-2.0
"""The drop-ins (cake.dropins) without a GPU: seq_idx to cu_seqlens against a host
construction, every argument check, and the plumbing (packing, layouts, documents,
gradients) with the float64 reference standing in for the kernels."""

import cake
import cake.dropins
import pytest
import torch
from cake.dropins import ShortConvolution, causal_conv1d_fn, cu_seqlens_from_seq_idx
from cake_testing import requires_cake_cpu
from dropins_testing import (
    bf16_close,
    conv1d_silu_reference,
    host_document_starts,
    reference_cake_causal_conv1d,
    reference_grads,
)
from hypothesis import given, settings
from hypothesis import strategies as st

BF16 = torch.bfloat16
I32 = torch.int32


@pytest.fixture
def reference_kernels(monkeypatch):
    """Runs the drop-ins on the float64 reference instead of the kernels."""
    monkeypatch.setattr(cake.dropins, "cake_causal_conv1d", reference_cake_causal_conv1d)


def seq_idx_of(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=I32).reshape(len(rows), -1)


def assert_documents(seq_idx: torch.Tensor) -> None:
    """cu_seqlens_from_seq_idx(seq_idx) holds exactly the documents of the host
    construction: B*T + 1 int32 entries from 0 to B*T, non-decreasing, entry i the
    start of token i's document, repeats (empty documents) aside."""
    cu = cu_seqlens_from_seq_idx(seq_idx)
    total = seq_idx.numel()
    starts = host_document_starts(seq_idx)
    assert cu.dtype == I32 and cu.shape == (total + 1,) and cu.device == seq_idx.device
    values = cu.tolist()
    assert values[0] == 0 and values[-1] == total
    assert all(a <= b for a, b in zip(values[:-1], values[1:], strict=True))
    assert sorted(set(values)) == sorted(set(starts + [total]))
    for token in range(total):
        assert values[token] == max(s for s in starts if s <= token)


SEQ_IDX_PATTERNS = {
    "one-doc": [[0] * 9],
    "docs": [[0, 0, 0, 1, 1, 2, 3, 3, 3, 3]],
    "rows-restart": [[0, 0, 1, 1, 1], [0, 0, 0, 1, 2]],
    "rows-same-value": [[7, 7, 7], [7, 7, 7], [7, 7, 7]],
    "runs-of-one": [[0, 1, 2, 3, 4, 5]],
    "not-monotone": [[0, 0, 1, 1, 0, 0, 2, 2]],
    "negative": [[-1, -1, 0, 0, -1, 3]],
    "one-token-rows": [[5], [5], [6]],
}


@pytest.mark.parametrize("rows", SEQ_IDX_PATTERNS.values(), ids=SEQ_IDX_PATTERNS.keys())
def test_cu_seqlens_from_seq_idx_patterns(rows):
    assert_documents(seq_idx_of(rows))


def test_cu_seqlens_from_seq_idx_by_hand():
    seq_idx = seq_idx_of([[0, 0, 1, 1, 1, 5], [0, 0, 0, 2, 2, 0]])
    # Documents [0, 2) [2, 5) [5, 6) | [6, 9) [9, 11) [11, 12), each entry the start of
    # its token's document, then the end.
    expected = [0, 0, 2, 2, 2, 5, 6, 6, 6, 9, 9, 11, 12]
    assert cu_seqlens_from_seq_idx(seq_idx).tolist() == expected


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_cu_seqlens_from_empty_seq_idx(shape):
    assert cu_seqlens_from_seq_idx(torch.zeros(shape, dtype=I32)).tolist() == [0]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.integers(1, 4).flatmap(
        lambda b: st.lists(
            st.lists(st.integers(-2, 3), min_size=0, max_size=12), min_size=b, max_size=b
        )
    ),
    st.booleans(),
)
def test_cu_seqlens_from_random_seq_idx(rows, monotone):
    seqlen = min(len(r) for r in rows)
    rows = [sorted(r[:seqlen]) if monotone else r[:seqlen] for r in rows]
    assert_documents(torch.tensor(rows, dtype=I32).reshape(len(rows), seqlen))


def test_cu_seqlens_reads_no_data():
    # On "meta" tensors there is no data to read: the construction only launches.
    cu = cu_seqlens_from_seq_idx(torch.zeros(3, 100, dtype=I32, device="meta"))
    assert cu.shape == (301,) and cu.dtype == I32 and cu.device.type == "meta"
    rows = cake.dropins.rows_cu_seqlens(3, 100, torch.device("meta"))
    assert rows.shape == (4,) and rows.dtype == I32


def test_rows_cu_seqlens():
    assert cake.dropins.rows_cu_seqlens(3, 5, "cpu").tolist() == [0, 5, 10, 15]
    assert cake.dropins.rows_cu_seqlens(2, 0, "cpu").tolist() == [0, 0, 0]


# --- causal_conv1d_fn (Dao-style) -----------------------------------------------------


def dao_inputs(batch, channels, seqlen, *, weight_dtype=torch.float32, bias_dtype=torch.float32):
    """Leaves (x_rows [B, T, D] bf16, weight [D, 4], bias [D] or None) with grads on."""
    gen = torch.Generator().manual_seed(batch * 1000 + seqlen)
    x_rows = torch.randn(batch, seqlen, channels, generator=gen).to(BF16)
    weight = (0.5 * torch.randn(channels, 4, generator=gen)).to(weight_dtype)
    bias = (
        None if bias_dtype is None else (0.5 * torch.randn(channels, generator=gen)).to(bias_dtype)
    )
    return [t if t is None else t.requires_grad_() for t in (x_rows, weight, bias)]


CONV_CASES = {
    "B1": (1, 40, None),
    "B3": (3, 17, None),
    "B1-docs": (1, 12, [[0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3, 4]]),
    "B2-rows-restart": (2, 7, [[0, 0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 2, 2, 2]]),
    "B2-not-monotone": (2, 6, [[0, 0, 1, 0, 0, 0], [3, 3, 3, 3, 3, 3]]),
    "B2-T2": (2, 2, [[0, 0], [0, 1]]),
    "B2-T0": (2, 0, None),
}


@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
@pytest.mark.parametrize(
    "weight_dtype, bias_dtype",
    [(torch.float32, torch.float32), (BF16, None), (torch.float32, BF16)],
    ids=["w32-b32", "w16-nobias", "w32-b16"],
)
def test_causal_conv1d_fn_matches_reference(reference_kernels, case, weight_dtype, bias_dtype):
    batch, seqlen, rows = case
    seq_idx = None if rows is None else seq_idx_of(rows)
    x_rows, weight, bias = dao_inputs(
        batch, 16, seqlen, weight_dtype=weight_dtype, bias_dtype=bias_dtype
    )
    x = x_rows.transpose(1, 2)  # channel-last [B, D, T], as Mamba2 passes it
    y = causal_conv1d_fn(x, weight, bias, seq_idx=seq_idx, activation="silu")
    assert y.shape == x.shape and y.dtype == BF16 and y.stride(1) == 1
    want = conv1d_silu_reference(x, weight, bias, seq_idx)
    bf16_close(y, want)
    if seqlen == 0:
        return

    # Gradients reach x's rows, weight and bias in their layouts and dtypes as the op's
    # backward of the packed rows gives them (here the stand-in's, so exactly).
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(5)).to(BF16)
    y.backward(dy)
    starts = host_document_starts(seq_idx) if rows else list(range(0, batch * seqlen, seqlen))
    want = reference_grads(x_rows, weight, bias, dy.transpose(1, 2), starts)
    got = (x_rows.grad.reshape(-1, 16), weight.grad, None if bias is None else bias.grad)
    for name, g, w in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        assert (g is None) == (bias is None and name == "dbias"), name
        if g is not None:
            assert g.dtype == w.dtype and torch.equal(g, w), name


def test_causal_conv1d_fn_copies_a_strided_view_once(reference_kernels):
    # Mamba2's x is a channel slice of a wider projection: x.transpose(1, 2) is not
    # packed. It is copied into packed rows; the gradient reaches the projection.
    batch, seqlen, channels = 2, 9, 16
    projection = torch.randn(batch, seqlen, 3 * channels).to(BF16).requires_grad_()
    x = projection[..., channels : 2 * channels].transpose(1, 2)
    assert x.stride(1) == 1 and not x.transpose(1, 2).is_contiguous()
    _, weight, bias = dao_inputs(batch, channels, seqlen)
    y = causal_conv1d_fn(x, weight, bias, activation="swish")
    bf16_close(y, conv1d_silu_reference(x, weight, bias))
    y.float().sum().backward()
    assert projection.grad[..., :channels].abs().sum() == 0
    assert projection.grad[..., 2 * channels :].abs().sum() == 0
    assert projection.grad[..., channels : 2 * channels].abs().sum() > 0


def test_causal_conv1d_fn_passes_packed_rows_without_a_copy(monkeypatch):
    seen = {}

    def spy(x, weight, cu_seqlens, bias=None):
        seen.update(x=x, cu_seqlens=cu_seqlens)
        return torch.empty_like(x)

    monkeypatch.setattr(cake.dropins, "cake_causal_conv1d", spy)
    x_rows, weight, bias = dao_inputs(3, 8, 5)
    causal_conv1d_fn(x_rows.transpose(1, 2), weight, bias, activation="silu")
    assert seen["x"].shape == (15, 8) and seen["x"].data_ptr() == x_rows.data_ptr()
    assert seen["cu_seqlens"].tolist() == [0, 5, 10, 15]


@requires_cake_cpu
def test_causal_conv1d_fn_runs_the_host_kernels_on_cpu():
    # The real path, off the GPU: every check passes, the packing and cu_seqlens are
    # built, and the host kernels run.
    x_rows, weight, bias = dao_inputs(2, 8, 6)
    seq_idx = seq_idx_of([[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    x = x_rows.transpose(1, 2)
    y = causal_conv1d_fn(x, weight, bias, seq_idx, activation="silu")
    bf16_close(y, conv1d_silu_reference(x, weight, bias, seq_idx))


def bad(test_id, exception, words, **changes):
    return pytest.param(changes, exception, words.split("|"), id=test_id)


D, T, B = 16, 6, 2
X = torch.randn(B, T, D).to(BF16).transpose(1, 2)
SEQ = torch.zeros(B, T, dtype=I32)

BAD_DAO = [
    bad("activation-none", ValueError, "activation|('silu', 'swish')|None", activation=None),
    bad("activation-relu", ValueError, "activation|'relu'", activation="relu"),
    bad("activation-type", TypeError, "activation|str|int", activation=1),
    bad("initial-states", ValueError, "initial_states|None|a tensor", initial_states=X[..., :3]),
    bad("return-final", ValueError, "return_final_states|False|True", return_final_states=True),
    bad("final-out", ValueError, "final_states_out|None|a tensor", final_states_out=X[..., :3]),
    bad("x-type", TypeError, "x|torch.Tensor|list", x=[[0.0]]),
    bad("x-dtype", TypeError, "x|torch.bfloat16|torch.float32", x=X.float()),
    bad("x-rank", ValueError, "x|[B, D, T]|[6, 16]", x=X[0].t()),
    bad("x-channel-first", ValueError, "x|channel-last|[96, 6, 1]", x=X.contiguous()),
    bad("x-D%8", ValueError, "x|multiple of 8|D = 12", x=X[:, :12]),
    bad("weight-width3", ValueError, "weight|width 4|width 3", weight=torch.randn(D, 3)),
    bad("weight-conv1d", ValueError, "weight|[16, 4]|[16, 1, 4]", weight=torch.randn(D, 1, 4)),
    bad("weight-dtype", TypeError, "weight|torch.float16", weight=torch.randn(D, 4).half()),
    bad("weight-D", ValueError, "weight|[16, 4]|[8, 4]", weight=torch.randn(8, 4)),
    bad("bias-shape", ValueError, "bias|[16]|[8]", bias=torch.randn(8)),
    bad("seq-idx-dtype", TypeError, "seq_idx|torch.int32|torch.int64", seq_idx=SEQ.long()),
    bad("seq-idx-shape", ValueError, "seq_idx|[2, 6]|[1, 6]", seq_idx=SEQ[:1]),
    bad("seq-idx-device", ValueError, "seq_idx|cpu|meta", seq_idx=SEQ.to("meta")),
    bad("weight-device", ValueError, "weight|meta", weight=torch.randn(D, 4, device="meta")),
]


@pytest.mark.parametrize("changes, exception, words", BAD_DAO)
def test_causal_conv1d_fn_rejects(changes, exception, words):
    args = (
        dict(x=X, weight=torch.randn(D, 4), bias=torch.randn(D), seq_idx=SEQ, activation="silu")
        | changes
    )
    with pytest.raises(exception) as info:
        causal_conv1d_fn(**args)
    message = str(info.value)
    assert type(info.value) is exception and message.startswith("cake: "), message
    for word in words:
        assert word in message, (word, message)


def test_causal_conv1d_fn_rejects_too_many_tokens():
    # 2**31 tokens, on the meta device: nothing is allocated, only the shape is read.
    x = torch.empty(2**16, 2**15, 8, dtype=BF16, device="meta").transpose(1, 2)
    with pytest.raises(ValueError, match=r"cake: x must hold at most 2\*\*31 - 1 tokens"):
        causal_conv1d_fn(x, torch.randn(8, 4), activation="silu")


def test_causal_conv1d_fn_checks_meta_tensors():
    # Every check reads metadata only: a valid call on meta tensors gets through them
    # (and then to the custom op, whose fake implementation gives y's shape).
    x = torch.empty(B, T, D, dtype=BF16, device="meta").transpose(1, 2)
    weight = torch.empty(D, 4, device="meta")
    y = causal_conv1d_fn(x, weight, seq_idx=SEQ.to("meta"), activation="silu")
    assert y.shape == (B, D, T) and y.device.type == "meta"


# --- ShortConvolution (FLA-style) ------------------------------------------------------


def short_conv(hidden_size=16, bias=True, dtype=torch.float32):
    torch.manual_seed(3)
    return ShortConvolution(hidden_size, 4, bias=bias, activation="silu", dtype=dtype)


def test_short_convolution_parameters_are_fla_s():
    conv = short_conv()
    assert isinstance(conv, torch.nn.Conv1d)
    assert conv.weight.shape == (16, 1, 4) and conv.bias.shape == (16,)
    assert conv.kernel_size == (4,) and conv.groups == 16 and conv.padding == (3,)
    assert conv.state_size == 64 and conv.activation == "silu"
    # A state dict of FLA's layer (same names and shapes) loads as it is.
    conv.load_state_dict({"weight": torch.zeros(16, 1, 4), "bias": torch.zeros(16)})
    assert ShortConvolution(8, 4, backend="cuda", use_fast_conv1d=True).bias is None


@pytest.mark.parametrize(
    "kwargs, exception, words",
    [
        (dict(kernel_size=3), ValueError, "kernel_size|4|got 3"),
        (dict(activation=None), ValueError, "activation|None"),
        (dict(activation="gelu"), ValueError, "activation|'gelu'"),
        (dict(hidden_size=12), ValueError, "hidden_size|multiple of 8|got 12"),
    ],
)
def test_short_convolution_rejects_at_construction(kwargs, exception, words):
    args = dict(hidden_size=16, kernel_size=4) | kwargs
    with pytest.raises(exception) as info:
        ShortConvolution(**args)
    for word in words.split("|"):
        assert word in str(info.value)


def short_conv_reference(conv, x, seq_idx=None):
    """FLA's layer from its semantics: each sequence (row, or document of cu_seqlens)
    convolved on its own, in float64."""
    return conv1d_silu_reference(
        x.transpose(1, 2), conv.weight.squeeze(1), conv.bias, seq_idx
    ).transpose(1, 2)


@pytest.mark.parametrize("param_dtype", [torch.float32, BF16])
def test_short_convolution_rows(reference_kernels, param_dtype):
    conv = short_conv(dtype=param_dtype)
    x = torch.randn(3, 11, 16).to(BF16).requires_grad_()
    y, state = conv(x)
    assert state is None and y.shape == x.shape and y.dtype == BF16
    bf16_close(y, short_conv_reference(conv, x))
    dy = torch.randn(3, 11, 16).to(BF16)
    y.backward(dy)
    assert conv.weight.grad.shape == (16, 1, 4) and conv.weight.grad.dtype == param_dtype
    want = reference_grads(x, conv.weight.view(16, 4), conv.bias, dy, [0, 11, 22])
    got = (x.grad.reshape(-1, 16), conv.weight.grad.view(16, 4), conv.bias.grad)
    for name, g, w in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        assert torch.equal(g, w), name


@pytest.mark.parametrize("cu_dtype", [torch.int32, torch.int64])
def test_short_convolution_cu_seqlens(reference_kernels, cu_dtype):
    conv = short_conv(bias=False)
    x = torch.randn(1, 20, 16).to(BF16)
    cu = torch.tensor([0, 3, 3, 4, 20], dtype=cu_dtype)
    y, _ = conv(x, cu_seqlens=cu, chunk_indices=torch.zeros(3, 2, dtype=torch.int64))
    seq_idx = torch.repeat_interleave(torch.arange(4), cu.diff()).to(I32)[None]
    bf16_close(y, short_conv_reference(conv, x, seq_idx))


def test_short_convolution_mask_and_residual(reference_kernels):
    conv = short_conv()
    x = torch.randn(2, 9, 16).to(BF16)
    before = x.clone()
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[0, :4] = False  # left padding of row 0
    residual = torch.randn(2, 9, 16).to(BF16)
    y, _ = conv(x, residual=residual, mask=mask)
    assert torch.equal(x, before), "the caller's x must not change"
    want = short_conv_reference(conv, x * mask[..., None]) + residual.double()
    torch.testing.assert_close(y.double(), want, rtol=2.0**-7, atol=2.0**-7)


BAD_SHORT = [
    bad("cache", ValueError, "cache|None|a tensor", cache=torch.zeros(2, 16, 4)),
    bad("final-state", ValueError, "output_final_state|False|True", output_final_state=True),
    bad("x-dtype", TypeError, "x|torch.bfloat16|torch.float32", x=torch.randn(2, 5, 16)),
    bad("x-D", ValueError, "x|[B, T, 16]|[2, 5, 8]", x=torch.randn(2, 5, 8).to(BF16)),
    bad("x-rank", ValueError, "x|[B, T, 16]|[10, 16]", x=torch.randn(10, 16).to(BF16)),
    bad("cu-batch", ValueError, "x|batch size 1|[2, 5, 16]", cu_seqlens=torch.tensor([0, 10])),
    bad("cu-dtype", TypeError, "cu_seqlens|torch.float32", cu_seqlens=torch.tensor([0.0, 5.0])),
    bad("cu-rank", ValueError, "cu_seqlens|1-D", cu_seqlens=torch.zeros(1, 2, dtype=I32)),
    bad(
        "mask-and-cu",
        ValueError,
        "mask|cu_seqlens",
        mask=torch.ones(2, 5),
        cu_seqlens=torch.tensor([0, 10]),
    ),
    bad("mask-shape", ValueError, "mask|[2, 5]|[2, 6]", mask=torch.ones(2, 6)),
    bad("residual-shape", ValueError, "residual|[2, 5, 16]", residual=torch.zeros(2, 5, 8)),
    bad("mask-device", ValueError, "mask|meta", mask=torch.ones(2, 5, device="meta")),
]


@pytest.mark.parametrize("changes, exception, words", BAD_SHORT)
def test_short_convolution_rejects(changes, exception, words):
    args = dict(x=torch.randn(2, 5, 16).to(BF16)) | changes
    with pytest.raises(exception) as info:
        short_conv()(**args)
    message = str(info.value)
    assert type(info.value) is exception and message.startswith("cake: "), message
    for word in words:
        assert word in message, (word, message)


@requires_cake_cpu
def test_short_convolution_runs_the_host_kernels_on_cpu():
    conv = short_conv()
    x = torch.randn(1, 8, 16).to(BF16)
    y, _ = conv(x, cu_seqlens=torch.tensor([0, 3, 8]))
    seq_idx = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]], dtype=I32)
    bf16_close(y, short_conv_reference(conv, x, seq_idx))

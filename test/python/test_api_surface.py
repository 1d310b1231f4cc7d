# SPDX-License-Identifier: Apache-2.0
"""The public API's surface without a GPU: exports, signatures, device support, and
the workspace functions' checks."""

import inspect

import cake
import pytest
import torch


def test_import_exports_the_spec_api():
    names = {
        "is_cake_causal_conv1d_train_supported",
        "cake_causal_conv1d_train_forward_workspace_bytes",
        "cake_causal_conv1d_train_forward_workspace",
        "cake_causal_conv1d_train_forward",
        "cake_causal_conv1d_train_backward_workspace_bytes",
        "cake_causal_conv1d_train_backward_workspace",
        "cake_causal_conv1d_train_backward",
        "cake_causal_conv1d",
        "CakeCausalConv1dFunction",
    }
    assert set(cake.__all__) == names
    assert all(getattr(cake, n) is getattr(cake.cake_causal_conv1d_train, n) for n in names)
    assert issubclass(cake.CakeCausalConv1dFunction, torch.autograd.Function)


# Parameter names, kinds and defaults of the spec (annotations aside).
SIGNATURES = {
    "is_cake_causal_conv1d_train_supported": "(device)",
    "cake_causal_conv1d_train_forward_workspace_bytes": "(S, C, device)",
    "cake_causal_conv1d_train_forward_workspace": "(S, C, device)",
    "cake_causal_conv1d_train_backward_workspace_bytes": "(S, C, device)",
    "cake_causal_conv1d_train_backward_workspace": "(S, C, device)",
    "cake_causal_conv1d_train_forward": (
        "(x, weight, cu_seqlens, *, bias=None, out=None, workspace=None)"
    ),
    "cake_causal_conv1d_train_backward": (
        "(x, weight, cu_seqlens, dy, *, bias=None, silu_grad_preactivation='bf16', "
        "workspace=None, dx=None, dweight=None, dbias=None)"
    ),
    "cake_causal_conv1d": "(x, weight, cu_seqlens, bias=None, *, silu_grad_preactivation='bf16')",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signatures_match_the_spec(name):
    signature = inspect.signature(getattr(cake, name))
    params = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    assert str(signature.replace(parameters=params)).split(" -> ")[0] == SIGNATURES[name]


def test_autograd_function_forward_signature():
    params = list(inspect.signature(cake.CakeCausalConv1dFunction.forward).parameters.values())
    assert [(p.name, p.default) for p in params] == [
        ("ctx", inspect.Parameter.empty),
        ("x", inspect.Parameter.empty),
        ("weight", inspect.Parameter.empty),
        ("cu_seqlens", inspect.Parameter.empty),
        ("bias", None),
        ("silu_grad_preactivation", "bf16"),
    ]


def test_supported_devices():
    # The host kernels run on an x86-64-v3 CPU, which every CI machine has.
    assert cake.is_cake_causal_conv1d_train_supported("cpu") is True
    assert cake.is_cake_causal_conv1d_train_supported(torch.device("meta")) is False
    if not torch.cuda.is_available():
        assert cake.is_cake_causal_conv1d_train_supported("cuda") is False
        assert cake.is_cake_causal_conv1d_train_supported(0) is False


def test_forward_workspace_is_empty():
    assert cake.cake_causal_conv1d_train_forward_workspace_bytes(1 << 20, 4096, "cuda") == 0
    assert cake.cake_causal_conv1d_train_forward_workspace_bytes(0, 8, torch.device("cuda", 1)) == 0


WORKSPACE_FUNCTIONS = [
    cake.cake_causal_conv1d_train_forward_workspace_bytes,
    cake.cake_causal_conv1d_train_forward_workspace,
    cake.cake_causal_conv1d_train_backward_workspace_bytes,
    cake.cake_causal_conv1d_train_backward_workspace,
]
BAD_WORKSPACE_ARGS = [
    ((-1, 8, "cuda"), ValueError, "S must be >= 0; got -1"),
    ((1.5, 8, "cuda"), TypeError, "S must be an int; got float"),
    ((True, 8, "cuda"), TypeError, "S must be an int; got bool"),
    ((16, 12, "cuda"), ValueError, "C must be a positive multiple of 8; got 12"),
    ((16, 0, "cuda"), ValueError, "C must be a positive multiple of 8; got 0"),
    ((16, "8", "cuda"), TypeError, "C must be an int; got str"),
    ((16, 8, 2.0), TypeError, "device must be a torch.device, str or int; got float"),
    ((16, 8, "meta"), RuntimeError, "device meta is not supported"),
]


@pytest.mark.parametrize("function", WORKSPACE_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args, exception, message", BAD_WORKSPACE_ARGS, ids=lambda v: repr(v))
def test_workspace_functions_reject(function, args, exception, message):
    with pytest.raises(exception) as info:
        function(*args)
    assert type(info.value) is exception and message in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error when there is no GPU")
def test_backward_workspace_needs_a_gpu():
    with pytest.raises(RuntimeError, match="cannot run on cuda"):
        cake.cake_causal_conv1d_train_backward_workspace_bytes(16, 8, "cuda")


class _FakeExtension:
    """Stands in for cake._C where the workspace size needs a supported GPU."""

    @staticmethod
    def backward_workspace_bytes(C, device_index):
        assert type(C) is int and type(device_index) is int
        return C * 132


@pytest.fixture
def fake_gpu(monkeypatch):
    """Makes every device 'supported' for the workspace functions."""
    monkeypatch.setattr(cake._ops, "require_supported", lambda device: (_FakeExtension, 0))


def test_workspace_functions_take_numpy_integers(fake_gpu):
    np = pytest.importorskip("numpy")
    for S, C in ((np.int64(100), np.int32(64)), (np.uint16(0), 64), (7, np.int8(8))):
        assert cake.cake_causal_conv1d_train_forward_workspace_bytes(S, C, "cuda") == 0
        assert cake.cake_causal_conv1d_train_backward_workspace_bytes(S, C, "cuda") == int(C) * 132
        workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, "meta")
        assert workspace.shape == (int(C) * 132,) and workspace.dtype == torch.uint8
    for bad in (np.bool_(True), np.float32(8.0)):
        with pytest.raises(TypeError, match="C must be an int; got"):
            cake.cake_causal_conv1d_train_backward_workspace_bytes(8, bad, "cuda")
    with pytest.raises(ValueError, match="S must be >= 0; got -3"):
        cake.cake_causal_conv1d_train_forward_workspace_bytes(np.int64(-3), 8, "cuda")


def test_workspace_functions_trace_with_dynamic_shapes(fake_gpu):
    # Under torch.compile(dynamic=True), x.shape holds SymInts: the functions trace
    # without a graph break, S stays symbolic (a new S reuses the graph) and C is
    # specialized (a new C compiles again).
    import torch._dynamo.testing

    def step(x):
        S, C = x.shape
        forward = cake.cake_causal_conv1d_train_forward_workspace_bytes(S, C, "cuda")
        workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, "meta")
        return x.sum() + forward + workspace.numel() + S

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(step, dynamic=True, fullgraph=True, backend=counter)
    for S, C, frames in ((5, 16, 1), (9, 16, 1), (2000, 16, 1), (9, 24, 2)):
        x = torch.ones(S, C)
        assert compiled(x).item() == S * C + C * 132 + S
        assert counter.frame_count == frames

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


def test_supported_is_false_off_gpu():
    assert cake.is_cake_causal_conv1d_train_supported("cpu") is False
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
    ((16, 8, "cpu"), RuntimeError, "device cpu is not supported"),
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

# SPDX-License-Identifier: Apache-2.0
"""The kernels inside PyTorch: autograd, determinism, CUDA graphs, torch.compile."""

import cake
import pytest
import torch
from cake_testing import (
    assert_bitwise_equal,
    assert_outputs,
    make_case,
    random_lengths,
    requires_cake_gpu,
    run_into_buffers,
)

pytestmark = [pytest.mark.gpu, requires_cake_gpu]

NAMES = ("y", "dx", "dweight", "dbias")


def leaves(case):
    """Fresh leaf copies of (x, weight, bias) that require grad."""
    return tuple(t.detach().clone().requires_grad_() for t in (case.x, case.weight, case.bias))


@pytest.mark.parametrize(
    "weight_dtype, bias_dtype, policy",
    [
        (torch.float32, torch.float32, "bf16"),
        (torch.bfloat16, torch.bfloat16, "fp32"),
        (torch.float32, torch.bfloat16, "bf16"),
    ],
)
def test_autograd_function_gradients(weight_dtype, bias_dtype, policy):
    case = make_case(
        random_lengths(4000, 10, seed=30),
        200,
        weight_dtype=weight_dtype,
        bias_dtype=bias_dtype,
        policy=policy,
        seed=31,
        batch_dim=True,
    )
    x, weight, bias = leaves(case)
    cu = case.cu_seqlens
    y = cake.cake_causal_conv1d(x, weight, cu, bias, silu_grad_preactivation=policy)
    assert y.requires_grad and y.shape == x.shape
    # An fp32, non-contiguous grad_y holding dy's values: the backward converts it.
    grad_y = case.dy.float().transpose(1, 2).contiguous().transpose(1, 2)
    assert not grad_y.is_contiguous()
    y.backward(grad_y)
    assert (x.grad.dtype, weight.grad.dtype, bias.grad.dtype) == (
        torch.bfloat16,
        weight_dtype,
        bias_dtype,
    )
    assert_outputs(case, y=y.detach(), dx=x.grad, dweight=weight.grad, dbias=bias.grad)

    # The autograd function computes what the explicit API computes.
    explicit = cake.cake_causal_conv1d_train_backward(
        case.x, case.weight, cu, case.dy, bias=case.bias, silu_grad_preactivation=policy
    )
    for name, a, b in zip(NAMES[1:], (x.grad, weight.grad, bias.grad), explicit, strict=True):
        assert_bitwise_equal(name, a, b)


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_bitwise_identical_across_20_runs(policy):
    case = make_case(random_lengths(30_000, 97, seed=32), 512, policy=policy, seed=33)
    first = run_into_buffers(case)
    assert_outputs(case, **dict(zip(NAMES, first, strict=True)))
    for _ in range(19):
        for name, a, b in zip(NAMES, run_into_buffers(case), first, strict=True):
            assert_bitwise_equal(name, a, b)


def test_cuda_graph_replay_matches_eager():
    S, C, num_docs = 6000, 320, 17
    case = make_case(random_lengths(S, num_docs, seed=34), C, seed=35)
    workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, "cuda")

    def step():
        y = cake.cake_causal_conv1d_train_forward(
            case.x, case.weight, case.cu_seqlens, bias=case.bias
        )
        grads = cake.cake_causal_conv1d_train_backward(
            case.x,
            case.weight,
            case.cu_seqlens,
            case.dy,
            bias=case.bias,
            silu_grad_preactivation=case.policy,
            workspace=workspace,
        )
        return (y, *grads)

    # Warm up on a side stream, as torch.cuda.graph capture requires.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()

    # New values in the same tensors, new document lengths included: the graph must
    # read them at replay, not what it saw at capture.
    fresh = make_case(random_lengths(S, num_docs, seed=36), C, seed=37)
    for static, new in (
        (case.x, fresh.x),
        (case.weight, fresh.weight),
        (case.cu_seqlens, fresh.cu_seqlens),
        (case.bias, fresh.bias),
        (case.dy, fresh.dy),
    ):
        static.copy_(new)
    for _ in range(2):  # replaying twice reuses the workspace
        for t in captured:
            t.fill_(float("nan"))
        graph.replay()
    torch.cuda.synchronize()

    eager = step()
    for name, a, b in zip(NAMES, captured, eager, strict=True):
        assert_bitwise_equal(name, a, b)
    assert_outputs(fresh, **dict(zip(NAMES, captured, strict=True)))


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_torch_compile_fullgraph_matches_eager(policy):
    case = make_case(random_lengths(5000, 12, seed=38), 256, policy=policy, seed=39, batch_dim=True)

    def model(x, weight, cu_seqlens, bias):
        return cake.cake_causal_conv1d(x, weight, cu_seqlens, bias, silu_grad_preactivation=policy)

    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    results = []
    for fn in (compiled, model):
        x, weight, bias = leaves(case)
        y = fn(x, weight, case.cu_seqlens, bias)
        y.backward(case.dy)
        results.append((y.detach(), x.grad, weight.grad, bias.grad))
    for name, a, b in zip(NAMES, *results, strict=True):
        assert_bitwise_equal(name, a, b)
    assert_outputs(case, **dict(zip(NAMES, results[0], strict=True)))


def test_torch_compile_dynamic_shapes_sizes_workspaces_from_x():
    # The workspace functions take x.shape's SymInts: no graph break (fullgraph), and
    # a second S runs the same graph (fail_on_recompile) with the right results.
    def step(x, weight, cu_seqlens, bias, dy):
        S, C = x.shape[0], x.shape[1]
        forward_workspace = cake.cake_causal_conv1d_train_forward_workspace(S, C, x.device)
        backward_workspace = cake.cake_causal_conv1d_train_backward_workspace(S, C, x.device)
        y = cake.cake_causal_conv1d_train_forward(
            x, weight, cu_seqlens, bias=bias, workspace=forward_workspace
        )
        grads = cake.cake_causal_conv1d_train_backward(
            x, weight, cu_seqlens, dy, bias=bias, workspace=backward_workspace
        )
        return (y, *grads)

    torch._dynamo.reset()
    compiled = torch.compile(step, dynamic=True, fullgraph=True)
    cases = [
        make_case(random_lengths(S, docs, seed=41 + S), 192, seed=42 + S)
        for S, docs in ((3000, 7), (4100, 11))
    ]
    for i, case in enumerate(cases):
        args = (case.x, case.weight, case.cu_seqlens, case.bias, case.dy)
        if i == 0:
            got = compiled(*args)
        else:
            with torch.compiler.set_stance("fail_on_recompile"):
                got = compiled(*args)
        for name, a, b in zip(NAMES, got, step(*args), strict=True):
            assert_bitwise_equal(name, a, b)
        assert_outputs(case, **dict(zip(NAMES, got, strict=True)))

# SPDX-License-Identifier: Apache-2.0
"""The C++ eager route, cake._torch_ops (docs/host-overhead.md), with the real kernels
(the host kernels on the CPU; the GPU's under the marker ``gpu``): it gives the Python
route's bits, runs only the calls of its rule, and leaves every other call to the
Python route, which raises the documented errors; its autograd function keeps the
Python one's semantics; it loads only under the torch it was built for."""

import importlib.util
import os
import subprocess
import sys

import cake
import pytest
import torch
from cake import _ops

from cake_testing import (
    ROUTES,
    OpLog,
    assert_bitwise_equal,
    capture,
    every_device,
    make_case,
    random_lengths,
    requires_cake_cpu,
    requires_cake_gpu,
    route_id,
    run_case,
    run_into_buffers,
)

BF16 = torch.bfloat16
NAMES = ("y", "dx", "dweight", "dbias")
_ROUTE_SKIP = None if _ops.torch_ops is not None else f"no C++ route: {_ops.eager_route()[1]}"
requires_torch_ops = pytest.mark.skipif(_ROUTE_SKIP is not None, reason=_ROUTE_SKIP or "")


class Spy:
    """Stands in for cake._torch_ops: records each call as (function, ran), ran being
    False when it returned None (the call left to the Python route)."""

    def __init__(self, module):
        self.module, self.calls = module, []

    def __getattr__(self, name):
        function = getattr(self.module, name)

        def call(*args):
            result = function(*args)
            self.calls.append((name, result is not None))
            return result

        return call


@pytest.fixture
def spy(monkeypatch):
    recorder = Spy(_ops.torch_ops)
    monkeypatch.setattr(_ops, "torch_ops", recorder)
    return recorder


def test_the_route_is_torch_ops_whenever_it_was_built_for_this_torch():
    # A build with torch (CI's) must load it: a silent fallback would hide a bug.
    if os.environ.get("CAKE_TORCH_OPS") == "0":
        assert cake.eager_route() == ("python", "CAKE_TORCH_OPS=0 is set")
    elif importlib.util.find_spec("cake._torch_ops_version") is None:
        assert cake.eager_route()[0] == "python"
    else:
        from cake._torch_ops_version import TORCH_VERSION

        assert TORCH_VERSION == torch.__version__, "the build's torch is not this one"
        assert cake.eager_route() == ("torch_ops", "")


def test_another_torch_version_falls_back_to_the_python_route(monkeypatch):
    monkeypatch.delenv("CAKE_TORCH_OPS", raising=False)
    monkeypatch.setattr(torch, "__version__", "2.4.0")
    module, why = _ops._load_torch_ops()
    if importlib.util.find_spec("cake._torch_ops_version") is not None:
        assert module is None and why.endswith("not 2.4.0") and "built for torch" in why
    monkeypatch.setenv("CAKE_TORCH_OPS", "0")
    assert _ops._load_torch_ops() == (None, "CAKE_TORCH_OPS=0 is set")


@requires_cake_cpu
def test_a_mismatched_torch_never_loads_the_extension():
    # In a fresh process whose torch claims another version: cake runs on the Python
    # route, and cake._torch_ops (linked to another libtorch) is never imported.
    script = """
import sys, torch
torch.__version__ = "2.4.0"
import cake
x = torch.randn(16, 8).to(torch.bfloat16)
y = cake.cake_causal_conv1d_train_forward(x, torch.randn(8, 4), torch.tensor([0, 16], dtype=torch.int32))
print(cake.eager_route()[0], "cake._torch_ops" in sys.modules, y.shape)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["python", "False", "torch.Size([16,", "8])"]


def run_autograd(case):
    leaves = [
        t.detach().requires_grad_() for t in (case.x, case.weight, case.bias) if t is not None
    ]
    bias = leaves[2] if case.bias is not None else None
    y = cake.cake_causal_conv1d(
        leaves[0], leaves[1], case.cu_seqlens, bias, silu_grad_preactivation=case.policy
    )
    y.backward(case.dy)
    return y.detach(), *(t.grad for t in leaves), *([None] if bias is None else [])


@requires_torch_ops
@every_device
@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_the_cpp_route_gives_the_python_routes_bits(device, route, spy, monkeypatch):
    bias_dtype, weight_dtype, policy = route
    case = make_case(
        random_lengths(700, 6, seed=3), 64, weight_dtype=weight_dtype, bias_dtype=bias_dtype,
        policy=policy, seed=4, batch_dim=bias_dtype is torch.bfloat16, device=device,
    )  # fmt: skip
    runs = {}
    for name, module in (("torch_ops", spy), ("python", None)):
        monkeypatch.setattr(_ops, "torch_ops", module)
        runs[name] = (run_case(case), run_into_buffers(case), run_autograd(case))
    # Every call ran on the C++ route: forward, backward (twice each), autograd.
    assert spy.calls == [
        ("forward", True), ("backward", True), ("forward", True), ("backward", True),
        ("conv1d", True),
    ]  # fmt: skip
    for cpp, python in zip(runs["torch_ops"], runs["python"], strict=True):
        for name, a, b in zip(NAMES, cpp, python, strict=True):
            assert_bitwise_equal(name, a, b)
    # Determinism: the C++ route again, the same bits.
    monkeypatch.setattr(_ops, "torch_ops", spy)
    for name, a, b in zip(NAMES, run_case(case), runs["torch_ops"][0], strict=True):
        assert_bitwise_equal(name, a, b)


def cpu_inputs(S=16, C=8, bias=True):
    return (
        torch.randn(S, C).to(BF16),
        torch.randn(C, 4),
        torch.tensor([0, 5, S], dtype=torch.int32),
        torch.randn(C) if bias else None,
    )


class Subclass(torch.Tensor):
    pass


@requires_torch_ops
@requires_cake_cpu
def test_the_route_rule(spy):
    x, weight, cu_seqlens, bias = cpu_inputs()
    forward = cake.cake_causal_conv1d_train_forward
    # A plain eager call, and one whose inputs require grad without grad mode.
    forward(x, weight, cu_seqlens, bias=bias)
    with torch.no_grad():
        forward(x, weight.requires_grad_(), cu_seqlens)
    assert spy.calls == [("forward", True), ("forward", True)]
    # Inputs requiring grad under grad mode: left to the custom op, as before.
    y = forward(x, weight, cu_seqlens)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        y.float().sum().backward()
    weight.requires_grad_(False)
    # A subclass, meta tensors, a misaligned pointer: declined.
    forward(x.as_subclass(Subclass), weight, cu_seqlens)
    meta = forward(*(t.to("meta") for t in (x, weight, cu_seqlens)))
    assert meta.device.type == "meta"
    out = torch.empty(x.numel() + 1, dtype=BF16)[1:].view(x.shape)
    with pytest.raises(ValueError, match="cake: out must be 16-byte aligned"):
        forward(x, weight, cu_seqlens, out=out)
    assert spy.calls[2:] == [("forward", False)] * 4
    # Under a dispatch mode (FakeTensorMode, make_fx...) the C++ route is not asked.
    with OpLog() as log:
        forward(x, weight, cu_seqlens, bias=bias)
        cake.cake_causal_conv1d(x, weight, cu_seqlens, bias)
    assert "cake.causal_conv1d_fwd.default" in log.ops and len(spy.calls) == 6


def bad_calls():
    """(id, call) pairs each raising one documented error, of every kind."""
    x, weight, cu_seqlens, bias = cpu_inputs()
    dy = torch.randn(x.shape).to(BF16)
    fwd = cake.cake_causal_conv1d_train_forward
    bwd = cake.cake_causal_conv1d_train_backward
    small = torch.empty(16, dtype=torch.uint8)
    return [
        ("weight dtype", lambda: fwd(x, weight.half(), cu_seqlens)),
        ("C % 8", lambda: fwd(torch.zeros(4, 12, dtype=BF16), torch.zeros(12, 4), cu_seqlens)),
        ("width", lambda: fwd(x, torch.zeros(8, 3), cu_seqlens)),
        ("x contiguity", lambda: fwd(x.t().contiguous().t(), weight, cu_seqlens)),
        ("cu_seqlens type", lambda: fwd(x, weight, [0, 16])),
        ("device", lambda: fwd(x, weight, cu_seqlens.to("meta"))),
        ("out overlaps x", lambda: fwd(x, weight, cu_seqlens, out=x)),
        ("dx overlaps dy", lambda: bwd(x, weight, cu_seqlens, dy, dx=dy)),
        ("policy", lambda: bwd(x, weight, cu_seqlens, dy, silu_grad_preactivation="fp16")),
        ("policy type", lambda: cake.cake_causal_conv1d(x, weight, cu_seqlens, bias, silu_grad_preactivation=1)),
        ("dbias without bias", lambda: bwd(x, weight, cu_seqlens, dy, dbias=bias)),
        ("workspace size", lambda: bwd(x, weight, cu_seqlens, dy, workspace=small)),
        ("dweight dtype", lambda: bwd(x, weight, cu_seqlens, dy, dweight=weight.bfloat16())),
    ]  # fmt: skip


@requires_torch_ops
@requires_cake_cpu
@pytest.mark.parametrize("index", range(len(bad_calls())), ids=[i for i, _ in bad_calls()])
def test_declined_calls_raise_the_python_routes_errors(index, spy, monkeypatch):
    call, errors = bad_calls()[index][1], []  # the same tensors (pointers) on both routes
    for module in (spy, None):
        monkeypatch.setattr(_ops, "torch_ops", module)
        with pytest.raises((TypeError, ValueError, RuntimeError)) as error:
            call()
        errors.append((error.type, str(error.value)))
    assert errors[0] == errors[1]
    assert spy.calls and not any(ran for _, ran in spy.calls)


@requires_torch_ops
@requires_cake_cpu
def test_autograd_on_the_cpp_route():
    x, weight, cu_seqlens, bias = cpu_inputs(S=64, C=16)
    dy = torch.randn(x.shape).to(BF16)
    # Only weight requires grad: the others get none, as on the Python route.
    weight.requires_grad_()
    y = cake.cake_causal_conv1d(x, weight, cu_seqlens, bias)
    assert type(y.grad_fn).__name__ == "CppFunction" and y.requires_grad
    y.backward(dy.float())  # fp32 grad_y: made bf16 first, as the Python Function does
    _, want, _ = cake.cake_causal_conv1d_train_backward(
        x, weight.detach(), cu_seqlens, dy, bias=bias
    )
    assert_bitwise_equal("dweight", weight.grad, want)
    assert x.grad is None and bias.grad is None
    # No grad mode, or nothing requiring grad: no graph.
    with torch.no_grad():
        assert cake.cake_causal_conv1d(x, weight, cu_seqlens, bias).grad_fn is None
    # A saved tensor changed in place: autograd says so at the backward.
    x.requires_grad_()
    y = cake.cake_causal_conv1d(x, weight, cu_seqlens, bias)
    with torch.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(dy)
    # A grad_y the kernels cannot take: the backward leaves it to the Python route,
    # which raises the documented error.
    y = cake.cake_causal_conv1d(x, weight, cu_seqlens, bias)
    misaligned = torch.empty(dy.numel() + 1, dtype=BF16)[1:].view(dy.shape)
    with pytest.raises(ValueError, match="cake: dy must be 16-byte aligned"):
        y.backward(misaligned)


@requires_torch_ops
@requires_cake_cpu
def test_given_outputs_get_new_versions_on_the_cpp_route(spy):
    x, weight, cu_seqlens, bias = cpu_inputs()
    dy = torch.randn(x.shape).to(BF16)
    out, dx, dweight, dbias = (torch.empty_like(t) for t in (x, x, weight, bias))
    workspace = cake.cake_causal_conv1d_train_backward_workspace(16, 8, "cpu")
    buffers = (out, dx, dweight, dbias, workspace)
    before = [t._version for t in buffers]
    cake.cake_causal_conv1d_train_forward(x, weight, cu_seqlens, bias=bias, out=out)
    cake.cake_causal_conv1d_train_backward(
        x, weight, cu_seqlens, dy, bias=bias, workspace=workspace, dx=dx, dweight=dweight,
        dbias=dbias,
    )  # fmt: skip
    assert all(b > a for a, b in zip(before, (t._version for t in buffers), strict=True))
    assert spy.calls == [("forward", True), ("backward", True)]


@requires_torch_ops
@pytest.mark.gpu
@requires_cake_gpu
def test_cpp_route_in_a_cuda_graph_on_a_side_stream(spy, monkeypatch):
    # The autograd step on the C++ route, captured on a side stream (its launches go to
    # the current stream, its allocations to the graph's pool), replayed with new
    # values, gives the bits of the Python route's eager step.
    case = make_case(random_lengths(3000, 7, seed=80), 256, bias_dtype=BF16, seed=81)
    x, weight, bias = (t.detach().requires_grad_() for t in (case.x, case.weight, case.bias))

    def step():
        y = cake.cake_causal_conv1d(x, weight, case.cu_seqlens, bias)
        return (y.detach(), *torch.autograd.grad(y, (x, weight, bias), case.dy))

    graph, captured = capture(step)
    assert spy.calls == [("conv1d", True)] * 2
    fresh = make_case(random_lengths(3000, 7, seed=82), 256, bias_dtype=BF16, seed=83)
    with torch.no_grad():
        for static, new in zip((x, weight, case.cu_seqlens, bias, case.dy), (
            fresh.x, fresh.weight, fresh.cu_seqlens, fresh.bias, fresh.dy
        )):  # fmt: skip
            static.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    monkeypatch.setattr(_ops, "torch_ops", None)
    for name, a, b in zip(NAMES, captured, step(), strict=True):
        assert_bitwise_equal(name, a, b)

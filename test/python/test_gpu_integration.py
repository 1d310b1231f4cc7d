# SPDX-License-Identifier: Apache-2.0
"""The kernels inside PyTorch: autograd, determinism, CUDA graphs (a process's very
first call included), torch.compile, threads on streams, and the kernel image."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import cake
import pytest
import torch

from cake_testing import (
    assert_bitwise_equal,
    assert_outputs,
    capture,
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

    graph, captured = capture(step)

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


def test_direct_launch_matches_the_custom_ops():
    # Eager calls launch directly (docs/host-overhead.md); torch.compile goes through
    # the cake:: ops. Both must give the same bits.
    case = make_case(random_lengths(3000, 9, seed=70), 256, bias_dtype=torch.bfloat16, seed=71)
    inputs = (case.x, case.weight, case.cu_seqlens)
    direct = (
        cake.cake_causal_conv1d_train_forward(*inputs, bias=case.bias),
        *cake.cake_causal_conv1d_train_backward(*inputs, case.dy, bias=case.bias),
    )
    through_ops = (
        torch.ops.cake.causal_conv1d_fwd(*inputs, case.bias),
        *torch.ops.cake.causal_conv1d_bwd(*inputs, case.bias, case.dy, "bf16"),
    )
    for name, a, b in zip(NAMES, direct, through_ops, strict=True):
        assert_bitwise_equal(name, a, b)
    assert_outputs(case, **dict(zip(NAMES, direct, strict=True)))


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


def test_two_threads_on_two_streams_match_serial_calls():
    # Launches that may run at once need a workspace each (SPEC.md); with that, two
    # Python threads looping on their own streams, with their own buffers, get what
    # serial calls get, bitwise, at every iteration.
    cases = [
        make_case(random_lengths(20_000, 31, seed=60), 512, seed=61),
        make_case(
            random_lengths(12_000, 7, seed=62),
            768,
            weight_dtype=torch.bfloat16,
            bias_dtype=torch.bfloat16,
            policy="fp32",
            seed=63,
        ),
    ]
    serial = [run_into_buffers(case) for case in cases]
    torch.cuda.synchronize()
    iterations = 40
    results = [[] for _ in cases]
    errors = []
    barrier = threading.Barrier(len(cases))

    def work(i):
        try:
            case = cases[i]
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                workspace = cake.cake_causal_conv1d_train_backward_workspace(case.S, case.C, "cuda")
                barrier.wait()
                # Fresh buffers each time, all kept: no memory moves between streams.
                for _ in range(iterations):
                    results[i].append(run_into_buffers(case, workspace=workspace))
            stream.synchronize()
        except BaseException as error:  # re-raised in the main thread
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    for i, case in enumerate(cases):
        assert len(results[i]) == iterations
        for outputs in results[i]:
            for name, a, b in zip(NAMES, outputs, serial[i], strict=True):
                assert_bitwise_equal(f"{name} of case {i}", a, b)
        assert_outputs(case, **dict(zip(NAMES, serial[i], strict=True)))


def run_python(code: str, **env_changes: str) -> str:
    """Runs ``code`` in a fresh Python process that finds cake and cake_testing as this
    one does; returns its stdout, failing with its output when it fails."""
    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, *sys.path]), **env_changes)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"the child failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# A process whose very first cake call, forward and backward through the autograd
# function, is inside a CUDA graph capture: the kernels are loaded then.
FIRST_CALL_IN_CAPTURE = """
import sys
import torch
import cake

S, C, policy = 3000, 256, "fp32"
cu_values = [0, 1, 700, 700, 2048, 3000]


def inputs(seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return dict(
        x=torch.randn(S, C, generator=gen, device="cuda").bfloat16(),
        weight=torch.randn(C, 4, generator=gen, device="cuda").mul_(0.5),
        bias=torch.randn(C, generator=gen, device="cuda").mul_(0.5),
        dy=torch.randn(S, C, generator=gen, device="cuda").bfloat16(),
    )


static = inputs(70)
cu = torch.tensor(cu_values, dtype=torch.int32, device="cuda")
x, weight, bias = (static[k].requires_grad_() for k in ("x", "weight", "bias"))

# What a capture needs of torch itself (its autograd engine, allocator, streams) is
# warmed up on a side stream, with no cake call.
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    a = torch.randn(S, C, device="cuda", requires_grad=True)
    (a.bfloat16().float() * 2).sum().backward()
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
assert "cake._C" not in sys.modules, "something loaded the extension before the capture"

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    y = cake.cake_causal_conv1d(x, weight, cu, bias, silu_grad_preactivation=policy)
    y.backward(static["dy"])
captured = (y, x.grad, weight.grad, bias.grad)

# New values in the same tensors; the replay must use them.
fresh = inputs(71)
with torch.no_grad():
    for name, value in fresh.items():
        static[name].copy_(value)
for t in captured:
    t.detach().fill_(float("nan"))
graph.replay()
torch.cuda.synchronize()

leaves = [fresh[k].clone().requires_grad_() for k in ("x", "weight", "bias")]
y_eager = cake.cake_causal_conv1d(*leaves[:2], cu, leaves[2], silu_grad_preactivation=policy)
y_eager.backward(fresh["dy"])
eager = (y_eager, *(t.grad for t in leaves))

from cake_testing import Case, assert_bitwise_equal, assert_outputs

names = ("y", "dx", "dweight", "dbias")
for name, a, b in zip(names, captured, eager):
    assert_bitwise_equal(name, a.detach(), b.detach())
case = Case(
    x=fresh["x"],
    weight=fresh["weight"],
    cu_seqlens=cu,
    cu_host=torch.tensor(cu_values),
    bias=fresh["bias"],
    dy=fresh["dy"],
    policy=policy,
)
assert_outputs(case, **{n: t.detach() for n, t in zip(names, captured)})
print("ok", cake._ops.require_supported(x.device)[0].load_kernels(x.device.index))
"""


def test_first_call_of_a_process_inside_cuda_graph_capture():
    assert run_python(FIRST_CALL_IN_CAPTURE).split()[-2] == "ok"


# Runs a case in a fresh process and prints the kernel image its device loaded.
RUN_A_CASE = """
import torch
import cake
from cake_testing import assert_outputs, make_case, random_lengths, run_into_buffers

case = make_case(random_lengths(5000, 9, seed=72), 264, policy="fp32", seed=73)
outputs = run_into_buffers(case)
assert_outputs(case, **dict(zip(("y", "dx", "dweight", "dbias"), outputs)))
index = torch.cuda.current_device()
print(cake._ops.require_supported(case.x.device)[0].load_kernels(index))
"""


def test_kernel_image_is_the_checked_cubin_on_9_0():
    # docs/kernel-abi.md: the embedded sm_90a cubin on compute capability 9.0, the
    # PTX elsewhere; CAKE_KERNEL_IMAGE=ptx forces the PTX, which must compute the
    # same thing, and a bad value is an error at the first load.
    index = torch.cuda.current_device()
    extension, _ = cake._ops.require_supported(torch.device("cuda", index))
    on_9_0 = torch.cuda.get_device_capability(index) == (9, 0)
    assert extension.load_kernels(index) == ("cubin" if on_9_0 else "ptx")
    assert run_python(RUN_A_CASE).split()[-1] == ("cubin" if on_9_0 else "ptx")
    assert run_python(RUN_A_CASE, CAKE_KERNEL_IMAGE="ptx").split()[-1] == "ptx"
    with pytest.raises(AssertionError, match="CAKE_KERNEL_IMAGE must be 'auto', 'cubin' or 'ptx'"):
        run_python(RUN_A_CASE, CAKE_KERNEL_IMAGE="sass")

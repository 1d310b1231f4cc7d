# SPDX-License-Identifier: Apache-2.0
"""The cake:: custom ops without a GPU: schemas, fake (meta) shape inference, and
torch.compile(fullgraph=True) tracing the whole API with no graph break.

"meta" tensors carry no data, so these also show that the Python layer never reads
cu_seqlens (or any tensor) on the host.
"""

import cake
import pytest
import torch

BF16 = torch.bfloat16


def meta_inputs(S=16, C=8, weight_dtype=torch.float32, bias_dtype=torch.float32, batch=False):
    shape = (1, S, C) if batch else (S, C)
    return dict(
        x=torch.empty(shape, dtype=BF16, device="meta"),
        weight=torch.empty(C, 4, dtype=weight_dtype, device="meta"),
        cu_seqlens=torch.empty(3, dtype=torch.int32, device="meta"),
        bias=None if bias_dtype is None else torch.empty(C, dtype=bias_dtype, device="meta"),
        dy=torch.empty(shape, dtype=BF16, device="meta"),
    )


def test_op_schemas():
    schemas = {
        name: str(getattr(torch.ops.cake, name).default._schema)
        for name in (
            "causal_conv1d_fwd",
            "causal_conv1d_fwd_out",
            "causal_conv1d_bwd",
            "causal_conv1d_bwd_out",
        )
    }
    assert schemas["causal_conv1d_fwd"] == (
        "cake::causal_conv1d_fwd(Tensor x, Tensor weight, Tensor cu_seqlens, Tensor? bias)"
        " -> Tensor"
    )
    assert "Tensor(a4!) out, Tensor(a5!)? workspace) -> ()" in schemas["causal_conv1d_fwd_out"]
    assert schemas["causal_conv1d_bwd"].endswith(
        "Tensor dy, str silu_grad_preactivation) -> (Tensor, Tensor, Tensor)"
    )
    assert schemas["causal_conv1d_bwd_out"].endswith(
        "Tensor(a6!)? workspace, Tensor(a7!) dx, Tensor(a8!) dweight, Tensor(a9!)? dbias) -> ()"
    )


@pytest.mark.parametrize("weight_dtype", [torch.float32, BF16])
@pytest.mark.parametrize("bias_dtype", [None, torch.float32, BF16])
@pytest.mark.parametrize("batch", [False, True])
def test_fake_shapes_and_dtypes(weight_dtype, bias_dtype, batch):
    a = meta_inputs(weight_dtype=weight_dtype, bias_dtype=bias_dtype, batch=batch)
    y = cake.cake_causal_conv1d_train_forward(a["x"], a["weight"], a["cu_seqlens"], bias=a["bias"])
    assert (y.shape, y.dtype, y.device.type) == (a["x"].shape, BF16, "meta")
    dx, dweight, dbias = cake.cake_causal_conv1d_train_backward(
        a["x"], a["weight"], a["cu_seqlens"], a["dy"], bias=a["bias"]
    )
    assert (dx.shape, dx.dtype) == (a["x"].shape, BF16)
    assert (dweight.shape, dweight.dtype) == (a["weight"].shape, weight_dtype)
    if bias_dtype is None:
        assert dbias is None
    else:
        assert (dbias.shape, dbias.dtype) == (a["bias"].shape, bias_dtype)


def test_empty_input_shapes():
    a = meta_inputs(S=0)
    y = cake.cake_causal_conv1d_train_forward(a["x"], a["weight"], a["cu_seqlens"])
    assert y.shape == (0, 8)


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_compile_fullgraph_traces_forward_and_backward(policy):
    torch._dynamo.reset()
    a = meta_inputs(batch=True)
    x, weight, bias = (a[k].requires_grad_() for k in ("x", "weight", "bias"))

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(x, weight, cu_seqlens, bias):
        return cake.cake_causal_conv1d(x, weight, cu_seqlens, bias, silu_grad_preactivation=policy)

    y = step(x, weight, a["cu_seqlens"], bias)
    # An fp32, non-contiguous grad_y: the backward converts it.
    y.backward(torch.empty(8, 16, 1, device="meta").permute(2, 1, 0))
    assert (x.grad.dtype, weight.grad.dtype, bias.grad.dtype) == (
        BF16,
        torch.float32,
        torch.float32,
    )
    assert x.grad.shape == x.shape


def test_compile_fullgraph_traces_the_out_variants():
    torch._dynamo.reset()
    a = meta_inputs()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(x, weight, cu_seqlens, bias, dy, y, dx, dweight, dbias, workspace):
        forward_workspace = torch.zeros(0, dtype=torch.int32, device=x.device)
        cake.cake_causal_conv1d_train_forward(
            x, weight, cu_seqlens, bias=bias, out=y, workspace=forward_workspace
        )
        return cake.cake_causal_conv1d_train_backward(
            x,
            weight,
            cu_seqlens,
            dy,
            bias=bias,
            workspace=workspace,
            dx=dx,
            dweight=dweight,
            dbias=dbias,
        )

    buffers = [torch.empty_like(a[k]) for k in ("x", "x", "weight", "bias")]
    workspace = torch.empty(1024, dtype=torch.uint8, device="meta")
    dx, dweight, dbias = step(*a.values(), *buffers, workspace)
    assert (dx.shape, dweight.shape, dbias.shape) == ((16, 8), (8, 4), (8,))


def test_compile_dynamic_autograd_compiles_once_for_every_S():
    # dynamic=True: a new S (and document count) runs the same graph, forward and
    # backward, with no graph break.
    import torch._dynamo.testing

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

    @torch.compile(fullgraph=True, dynamic=True, backend=counter)
    def step(x, weight, cu_seqlens, bias):
        return cake.cake_causal_conv1d(x, weight, cu_seqlens, bias)

    for S, docs in ((16, 2), (40, 5), (1000, 9)):
        a = meta_inputs(S=S)
        cu_seqlens = torch.empty(docs + 1, dtype=torch.int32, device="meta")
        x, weight, bias = (a[k].requires_grad_() for k in ("x", "weight", "bias"))
        y = step(x, weight, cu_seqlens, bias)
        y.backward(torch.empty_like(y))
        assert x.grad.shape == (S, 8) and weight.grad.shape == (8, 4)
    assert counter.frame_count == 1

# SPDX-License-Identifier: Apache-2.0
"""The kernels against the float64 reference: every route, edge shapes, buffers.

Outputs go into NaN-poisoned preallocated buffers, so an element a kernel does not
write fails. Tolerances: see cake_testing.
"""

import cake
import pytest
import torch
from cake_testing import (
    ROUTES,
    assert_bitwise_equal,
    assert_outputs,
    make_case,
    nan_like,
    random_lengths,
    requires_cake_gpu,
    run_into_buffers,
)

pytestmark = [pytest.mark.gpu, requires_cake_gpu]


def check_case(case):
    y, dx, dweight, dbias = run_into_buffers(case)
    assert_outputs(case, y=y, dx=dx, dweight=dweight, dbias=dbias)


def _route_id(route):
    bias_dtype, weight_dtype, policy = route
    name = {None: "none", torch.float32: "f32", torch.bfloat16: "bf16"}
    return f"bias_{name[bias_dtype]}-weight_{name[weight_dtype]}-policy_{policy}"


@pytest.mark.parametrize(
    "bias_dtype, weight_dtype, policy", ROUTES, ids=[_route_id(r) for r in ROUTES]
)
def test_route_matches_reference(bias_dtype, weight_dtype, policy):
    lengths = random_lengths(5000, 11, seed=10)
    check_case(
        make_case(
            lengths, 264, weight_dtype=weight_dtype, bias_dtype=bias_dtype, policy=policy, seed=11
        )
    )


@pytest.mark.parametrize(
    "lengths", [[], [0], [0, 0, 0]], ids=["no-docs", "one-empty", "three-empty"]
)
@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_empty_input(lengths, policy):
    # S == 0: y and dx are empty, dweight and dbias are written as zeros.
    case = make_case(lengths, 64, policy=policy, seed=12)
    check_case(case)
    y = cake.cake_causal_conv1d_train_forward(case.x, case.weight, case.cu_seqlens)
    assert y.shape == (0, 64)


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_documents_of_length_0_to_3(policy):
    gen = torch.Generator().manual_seed(13)
    lengths = [0, 1, 2, 3] * 64
    lengths = [lengths[i] for i in torch.randperm(len(lengths), generator=gen)]
    check_case(make_case([0] + lengths + [0], 128, policy=policy, seed=14))


def test_thousands_of_short_documents():
    gen = torch.Generator().manual_seed(15)
    lengths = torch.randint(0, 17, (4000,), generator=gen).tolist()
    check_case(make_case(lengths, 256, weight_dtype=torch.bfloat16, seed=16))


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_one_long_document(policy):
    check_case(make_case([200_000], 64, policy=policy, seed=17))


@pytest.mark.parametrize("C, S", [(8, 20_000), (8200, 1500)])
def test_channel_extremes(C, S):
    check_case(make_case(random_lengths(S, 9, seed=18), C, seed=19))


def test_batch_dim_input():
    case = make_case(random_lengths(3000, 6, seed=20), 96, batch_dim=True, seed=21)
    check_case(case)
    y = cake.cake_causal_conv1d_train_forward(case.x, case.weight, case.cu_seqlens, bias=case.bias)
    dx, _, _ = cake.cake_causal_conv1d_train_backward(
        case.x, case.weight, case.cu_seqlens, case.dy, bias=case.bias
    )
    assert y.shape == dx.shape == (1, 3000, 96)


def test_preallocated_buffers_and_workspaces():
    C = 136
    first = make_case(random_lengths(7000, 13, seed=22), C, seed=23)
    second = make_case(random_lengths(900, 4, seed=24), C, seed=25)
    # One backward workspace serves calls of any S for its C, reused as is.
    workspace = cake.cake_causal_conv1d_train_backward_workspace(first.S, C, "cuda")
    assert workspace.dtype == torch.uint8 and workspace.is_contiguous()
    assert workspace.numel() == cake.cake_causal_conv1d_train_backward_workspace_bytes(5, C, "cuda")
    assert workspace.numel() == cake.cake_causal_conv1d_train_backward_workspace_bytes(
        10**6, C, "cuda"
    )
    forward_workspace = cake.cake_causal_conv1d_train_forward_workspace(first.S, C, "cuda")
    assert forward_workspace.dtype == torch.int32 and forward_workspace.numel() == 0
    for case in (second, first, second):  # ends on `second`, used below
        outputs = run_into_buffers(case, workspace=workspace)
        assert_outputs(case, y=outputs[0], dx=outputs[1], dweight=outputs[2], dbias=outputs[3])

    # Preallocating some outputs only, or none, gives the same bits.
    case = second
    dweight = nan_like(case.weight)
    partial = cake.cake_causal_conv1d_train_backward(
        case.x, case.weight, case.cu_seqlens, case.dy, bias=case.bias, dweight=dweight
    )
    none = cake.cake_causal_conv1d_train_backward(
        case.x, case.weight, case.cu_seqlens, case.dy, bias=case.bias
    )
    assert partial[1] is dweight
    for name, a, b, c in zip(("dx", "dweight", "dbias"), partial, none, outputs[1:], strict=True):
        assert_bitwise_equal(name, a, b)
        assert_bitwise_equal(name, a, c)

    # Buffers the kernels cannot use are rejected before any launch.
    with pytest.raises(ValueError, match="workspace must hold at least"):
        cake.cake_causal_conv1d_train_backward(
            case.x,
            case.weight,
            case.cu_seqlens,
            case.dy,
            bias=case.bias,
            workspace=workspace[: workspace.numel() - 16],
        )
    with pytest.raises(ValueError, match="workspace must be 16-byte aligned"):
        cake.cake_causal_conv1d_train_backward(
            case.x, case.weight, case.cu_seqlens, case.dy, bias=case.bias, workspace=workspace[8:]
        )
    # 4 bf16 elements = 8 bytes past the allocation's (aligned) start.
    out = torch.empty(case.x.numel() + 4, dtype=torch.bfloat16, device="cuda")[4:].view(
        case.x.shape
    )
    with pytest.raises(ValueError, match="out must be 16-byte aligned"):
        cake.cake_causal_conv1d_train_forward(case.x, case.weight, case.cu_seqlens, out=out)


@pytest.mark.parametrize(
    "cu_values",
    [[0, -5, 3000, 7, 2**31 - 1], [9999, 5, 5, -(2**31), 0], [0, 2**31 - 1]],
    ids=["non-monotone", "out-of-range", "past-the-end"],
)
def test_garbage_cu_seqlens_stays_inside_the_tensors(cu_values):
    # The host never reads cu_seqlens, so it cannot reject these; whatever they
    # hold, the kernels must only touch their own tensors (scripts/gpu.sh runs
    # this test under compute-sanitizer's memcheck too). Each tensor sits
    # between NaN guard bands that must come back untouched.
    S, C, guard = 1000, 72, 4096

    def guarded(shape, dtype, fill):
        n = torch.Size(shape).numel()
        storage = torch.full((n + 2 * guard,), float("nan"), dtype=dtype, device="cuda")
        inner = storage[guard : guard + n].view(shape)
        if fill is not None:
            inner.copy_(fill)
        return storage, inner

    g = torch.Generator(device="cpu").manual_seed(20)
    x_store, x = guarded((S, C), torch.bfloat16, torch.randn(S, C, generator=g))
    dy_store, dy = guarded((S, C), torch.bfloat16, torch.randn(S, C, generator=g))
    weight = torch.randn(C, 4, generator=g).cuda()
    bias = torch.randn(C, generator=g).cuda()
    cu = torch.tensor(cu_values, dtype=torch.int32, device="cuda")
    y_store, y = guarded((S, C), torch.bfloat16, None)
    dx_store, dx = guarded((S, C), torch.bfloat16, None)

    cake.cake_causal_conv1d_train_forward(x, weight, cu, bias=bias, out=y)
    cake.cake_causal_conv1d_train_backward(x, weight, cu, dy, bias=bias, dx=dx)
    torch.cuda.synchronize()
    for name, store in (("x", x_store), ("dy", dy_store), ("y", y_store), ("dx", dx_store)):
        bands = torch.cat([store[:guard], store[-guard:]])
        assert bands.float().isnan().all(), f"a kernel wrote outside {name}"
    assert not y.float().isnan().any() and not dx.float().isnan().any()

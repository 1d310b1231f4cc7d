# SPDX-License-Identifier: Apache-2.0
"""The kernels against the float64 reference: every route, edge shapes, extreme
magnitudes, buffers, bad buffers and garbage cu_seqlens, on each target: the GPU
kernels on a supported CUDA device, the host kernels (the same IR lowered for the
CPU) on the CPU, so that CI without a GPU runs the tiling and boundary logic too.

Outputs go into NaN-poisoned preallocated buffers, so an element a kernel does not
write fails. Tolerances: see cake_testing.
"""

import math

import cake
import pytest
import torch
from cake_testing import (
    ROUTES,
    assert_bitwise_equal,
    assert_outputs,
    every_device,
    make_case,
    make_extreme_case,
    nan_like,
    random_lengths,
    route_id,
    run_into_buffers,
    synchronize,
)

pytestmark = every_device

every_route = pytest.mark.parametrize(
    "bias_dtype, weight_dtype, policy", ROUTES, ids=[route_id(r) for r in ROUTES]
)


def check_case(case):
    y, dx, dweight, dbias = run_into_buffers(case)
    assert_outputs(case, y=y, dx=dx, dweight=dweight, dbias=dbias)
    return y, dx, dweight, dbias


@every_route
def test_route_matches_reference(bias_dtype, weight_dtype, policy, device):
    lengths = random_lengths(5000, 11, seed=10)
    check_case(
        make_case(
            lengths,
            264,
            weight_dtype=weight_dtype,
            bias_dtype=bias_dtype,
            policy=policy,
            seed=11,
            device=device,
        )
    )


@every_route
def test_small_forward_backward(bias_dtype, weight_dtype, policy, device):
    # A small step on every route, which scripts/gpu.sh also runs under
    # compute-sanitizer's racecheck, initcheck and synccheck (slow tools: keep it small).
    # C = 40 is a multiple of 8 but not of 16.
    lengths = [0, 1, 2, 3, 70, 0, 150]
    check_case(
        make_case(
            lengths,
            40,
            weight_dtype=weight_dtype,
            bias_dtype=bias_dtype,
            policy=policy,
            seed=53,
            device=device,
        )
    )


@every_route
@pytest.mark.parametrize("sign", [-1.0, 1.0], ids=["pre_-400", "pre_+400"])
def test_large_preactivation_saturates(bias_dtype, weight_dtype, policy, sign, device):
    # x = -100 everywhere and weight = 1: pre = -100, -200, -300, then -400 as a
    # document's taps fill. SiLU and SiLU' must saturate (y and g to 0; to x and dy for
    # +400), not give NaN, as the fp32 policy's dx, dweight and dbias did on all its
    # routes.
    case = make_case(
        [1, 2, 3, 4, 100, 400],
        64,
        weight_dtype=weight_dtype,
        bias_dtype=bias_dtype,
        policy=policy,
        seed=50,
        device=device,
    )
    case.x.fill_(sign * 100)
    case.weight.fill_(1)
    if case.bias is not None:
        case.bias.zero_()
    outputs = check_case(case)
    for name, value in zip(("y", "dx", "dweight", "dbias"), outputs, strict=True):
        assert value is None or bool(value.isfinite().all()), f"{name} is not finite"


@every_route
def test_extreme_magnitudes(bias_dtype, weight_dtype, policy, device):
    # |pre| up to about 1e4, pass-through channels in the band where exp(-|pre|) is an
    # fp32 subnormal, bf16 subnormal x, and +-inf and NaN in x at document starts and
    # inside documents: every output as the float64 formula says, NaN and inf included
    # (docs/bad-inputs.md), every other element exact as usual.
    lengths = [0, 1, 2, 3, 64, 700, 2000, 0, 333, 5]
    check_case(
        make_extreme_case(
            lengths,
            64,
            weight_dtype=weight_dtype,
            bias_dtype=bias_dtype,
            policy=policy,
            seed=51,
            device=device,
        )
    )


@pytest.mark.parametrize(
    "lengths", [[], [0], [0, 0, 0]], ids=["no-docs", "one-empty", "three-empty"]
)
@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_empty_input(lengths, policy, device):
    # S == 0: y and dx are empty, dweight and dbias are written as zeros.
    case = make_case(lengths, 64, policy=policy, seed=12, device=device)
    check_case(case)
    y = cake.cake_causal_conv1d_train_forward(case.x, case.weight, case.cu_seqlens)
    assert y.shape == (0, 64)


# On a GPU, 256 channels make the forward's tiles of a part whole 32-lane
# subgroups, which search cu_seqlens together; 128 leave each thread to search alone.
@pytest.mark.parametrize("C", [128, 256])
@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_documents_of_length_0_to_3(C, policy, device):
    gen = torch.Generator().manual_seed(13)
    lengths = [0, 1, 2, 3] * 64
    lengths = [lengths[i] for i in torch.randperm(len(lengths), generator=gen)]
    check_case(make_case([0] + lengths + [0], C, policy=policy, seed=14, device=device))


def test_thousands_of_short_documents(device):
    gen = torch.Generator().manual_seed(15)
    lengths = torch.randint(0, 17, (4000,), generator=gen).tolist()
    check_case(make_case(lengths, 256, weight_dtype=torch.bfloat16, seed=16, device=device))


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_bitwise_identical_across_20_runs(policy, device):
    # The weight gradient sums fixed parts in a fixed order, on the host as on the
    # GPU, whichever cores or blocks run which tiles.
    case = make_case(
        random_lengths(30_000, 97, seed=32), 512, policy=policy, seed=33, device=device
    )
    first = run_into_buffers(case)
    assert_outputs(case, y=first[0], dx=first[1], dweight=first[2], dbias=first[3])
    for _ in range(19):
        for name, a, b in zip(
            ("y", "dx", "dweight", "dbias"), run_into_buffers(case), first, strict=True
        ):
            assert_bitwise_equal(name, a, b)


@pytest.mark.parametrize("policy", ["bf16", "fp32"])
def test_one_long_document(policy, device):
    check_case(make_case([200_000], 64, policy=policy, seed=17, device=device))


# Forward shapes (S, C, documents), cheapest first: documents shorter than the
# window on average, then long ones on grids of a fraction of a wave to many.
FORWARD_LAUNCH_SHAPES = [
    (4096, 64, 2048),
    (2000, 1024, 3),
    (4096, 2048, 2),
    (30_000, 512, 97),
    (200_000, 64, 1),
    (65_536, 1024, 32),
]


def test_forward_launch_reaches_every_configuration(device):
    # The forward's host rule (docs/kernel-abi.md) picks among the route's
    # configurations by S, C and the device, never the documents: every one
    # must be picked for some shape here (else it is dead weight in the
    # library, or the rule is broken), and each runs right where picked.
    extension, index = cake._ops.require_supported(torch.device(device))
    target = "host" if index == extension.HOST_DEVICE_INDEX else "gpu"
    configs = [
        k["name"]
        for k in extension.kernels()
        if (k["target"], k["op"], k["weight"], k["bias"]) == (target, "fwd", "f32", "f32")
    ]
    first_shape_of = {}
    for S, C, docs in FORWARD_LAUNCH_SHAPES:
        name, parts = extension.forward_launch(S, C, "f32", "f32", index)
        assert name in configs and 1 <= parts <= S
        first_shape_of.setdefault(name, (S, C, docs))
    assert sorted(first_shape_of) == sorted(configs)
    for S, C, docs in first_shape_of.values():
        check_case(make_case(random_lengths(S, docs, seed=S), C, seed=C, device=device))


@pytest.mark.parametrize("C, S", [(8, 20_000), (8200, 1500)])
def test_channel_extremes(C, S, device):
    check_case(make_case(random_lengths(S, 9, seed=18), C, seed=19, device=device))


def test_batch_dim_input(device):
    case = make_case(random_lengths(3000, 6, seed=20), 96, batch_dim=True, seed=21, device=device)
    check_case(case)
    y = cake.cake_causal_conv1d_train_forward(case.x, case.weight, case.cu_seqlens, bias=case.bias)
    dx, _, _ = cake.cake_causal_conv1d_train_backward(
        case.x, case.weight, case.cu_seqlens, case.dy, bias=case.bias
    )
    assert y.shape == dx.shape == (1, 3000, 96)


def manifest_alignment(device, op, case, name):
    """The bytes of alignment the manifest asks of the API's buffer ``name``."""
    weight, bias = case.weight, case.bias
    (bytes_,) = cake._ops._alignments(torch.device(device), op, weight, bias, (name,))
    assert bytes_ >= 4, f"{op} {name} needs only {bytes_} bytes: nothing to test"
    return bytes_


def test_preallocated_buffers_and_workspaces(device):
    C = 136
    first = make_case(random_lengths(7000, 13, seed=22), C, seed=23, device=device)
    second = make_case(random_lengths(900, 4, seed=24), C, seed=25, device=device)
    # One backward workspace serves calls of any S for its C, reused as is.
    workspace = cake.cake_causal_conv1d_train_backward_workspace(first.S, C, device)
    assert workspace.dtype == torch.uint8 and workspace.is_contiguous()
    assert workspace.numel() == cake.cake_causal_conv1d_train_backward_workspace_bytes(5, C, device)
    assert workspace.numel() == cake.cake_causal_conv1d_train_backward_workspace_bytes(
        10**6, C, device
    )
    forward_workspace = cake.cake_causal_conv1d_train_forward_workspace(first.S, C, device)
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
    # Half the alignment the library's kernels need (the manifest says how much) past
    # the allocation's aligned start.
    workspace_align = manifest_alignment(device, "bwd", case, "workspace")
    with pytest.raises(ValueError, match=f"workspace must be {workspace_align}-byte aligned"):
        cake.cake_causal_conv1d_train_backward(
            case.x,
            case.weight,
            case.cu_seqlens,
            case.dy,
            bias=case.bias,
            workspace=workspace[workspace_align // 2 :],
        )
    out_align = manifest_alignment(device, "fwd", case, "out")
    skip = out_align // 2 // case.x.element_size()
    out = torch.empty(case.x.numel() + skip, dtype=torch.bfloat16, device=device)[skip:].view(
        case.x.shape
    )
    with pytest.raises(ValueError, match=f"out must be {out_align}-byte aligned"):
        cake.cake_causal_conv1d_train_forward(case.x, case.weight, case.cu_seqlens, out=out)


def test_overlapping_outputs_are_rejected_before_any_launch(device):
    case = make_case([300, 0, 200], 64, seed=52, device=device)
    C, nbytes = case.C, case.x.numel() * 2
    need = cake.cake_causal_conv1d_train_backward_workspace_bytes(case.S, C, device)
    params = torch.full((C * 5,), float("nan"), device=device)
    # dx, then a workspace whose first 16 bytes are dx's last 16.
    dx_and_workspace = torch.full((nbytes + need,), 0xFF, dtype=torch.uint8, device=device)
    dx = dx_and_workspace[:nbytes].view(torch.bfloat16).view(case.x.shape)
    inputs = {name: getattr(case, name).clone() for name in ("x", "weight", "bias", "dy")}

    def forward(**buffers):
        return cake.cake_causal_conv1d_train_forward(
            case.x, case.weight, case.cu_seqlens, bias=case.bias, **buffers
        )

    def backward(**buffers):
        return cake.cake_causal_conv1d_train_backward(
            case.x, case.weight, case.cu_seqlens, case.dy, bias=case.bias, **buffers
        )

    calls = [
        (lambda: forward(out=case.x), "out", "x"),
        (lambda: forward(workspace=case.x.view(torch.int32).flatten()), "workspace", "x"),
        (lambda: backward(dx=case.dy), "dx", "dy"),
        (lambda: backward(dx=case.x), "dx", "x"),
        (lambda: backward(dweight=case.weight), "dweight", "weight"),
        (
            lambda: backward(dweight=params[: C * 4].view(C, 4), dbias=params[C * 4 - 4 : -4]),
            "dbias",
            "dweight",
        ),
        (lambda: backward(dx=dx, workspace=dx_and_workspace[nbytes - 16 :]), "workspace", "dx"),
        (lambda: backward(workspace=case.dy.view(torch.uint8).flatten()), "workspace", "dy"),
    ]
    for call, output, other in calls:
        with pytest.raises(ValueError, match=f"^cake: {output} overlaps {other}: "):
            call()
    synchronize(device)
    # Nothing ran: the inputs and the outputs' bytes are as they were.
    for name, before in inputs.items():
        assert_bitwise_equal(name, getattr(case, name), before)
    assert bool(params.isnan().all()) and bool((dx_and_workspace == 0xFF).all())


#: Elements of guard band on each side of every tensor of the garbage test.
GUARD = 4096


def guarded(shape, dtype, device, fill=None):
    """(storage, tensor): a ``shape`` tensor in the middle of a storage whose GUARD
    elements on each side hold 0xFF bytes (NaN in float tensors), as the tensor does
    unless ``fill`` gives its values."""
    n = math.prod(shape)
    storage = torch.empty(n + 2 * GUARD, dtype=dtype, device=device)
    storage.view(torch.uint8).fill_(0xFF)
    tensor = storage[GUARD : GUARD + n].view(shape)
    if fill is not None:
        tensor.copy_(fill)
    return storage, tensor


@every_route
@pytest.mark.parametrize(
    "cu_values",
    [[0, -5, 3000, 7, 2**31 - 1], [9999, 5, 5, -(2**31), 0], [0, 2**31 - 1]],
    ids=["non-monotone", "out-of-range", "past-the-end"],
)
@pytest.mark.parametrize("C", [72, 256])  # each thread's search; the subgroup's
def test_garbage_cu_seqlens_stays_inside_the_tensors(
    bias_dtype, weight_dtype, policy, cu_values, C, device
):
    # The host never reads cu_seqlens, so it cannot reject these; whatever they hold,
    # the kernels must only touch their own tensors (scripts/gpu.sh runs this test
    # under compute-sanitizer's memcheck too, which sees accesses past the guard bands)
    # and write every output element, with a finite value as the inputs are finite.
    # Every tensor, inputs, outputs and workspace, sits between guard bands that must
    # come back untouched.
    S = 1000
    case = make_case(
        [S],
        C,
        weight_dtype=weight_dtype,
        bias_dtype=bias_dtype,
        policy=policy,
        seed=20,
        device=device,
    )
    cu = torch.tensor(cu_values, dtype=torch.int32)
    need = cake.cake_causal_conv1d_train_backward_workspace_bytes(S, C, device)
    guards = {
        "x": guarded((S, C), torch.bfloat16, device, case.x),
        "dy": guarded((S, C), torch.bfloat16, device, case.dy),
        "weight": guarded((C, 4), weight_dtype, device, case.weight),
        "cu_seqlens": guarded(tuple(cu.shape), torch.int32, device, cu),
        "y": guarded((S, C), torch.bfloat16, device),
        "dx": guarded((S, C), torch.bfloat16, device),
        "dweight": guarded((C, 4), weight_dtype, device),
        "workspace": guarded((need,), torch.uint8, device),
    }
    if bias_dtype is not None:
        guards["bias"] = guarded((C,), bias_dtype, device, case.bias)
        guards["dbias"] = guarded((C,), bias_dtype, device)
    t = {name: tensor for name, (_, tensor) in guards.items()}

    cake.cake_causal_conv1d_train_forward(
        t["x"], t["weight"], t["cu_seqlens"], bias=t.get("bias"), out=t["y"]
    )
    cake.cake_causal_conv1d_train_backward(
        t["x"],
        t["weight"],
        t["cu_seqlens"],
        t["dy"],
        bias=t.get("bias"),
        silu_grad_preactivation=policy,
        workspace=t["workspace"],
        dx=t["dx"],
        dweight=t["dweight"],
        dbias=t.get("dbias"),
    )
    synchronize(device)
    for name, (storage, _) in guards.items():
        bands = storage.view(torch.uint8)
        width = GUARD * storage.element_size()
        assert bool((bands[:width] == 0xFF).all() and (bands[-width:] == 0xFF).all()), (
            f"a kernel wrote outside {name}"
        )
    for name in ("x", "dy", "weight", "bias"):
        assert_bitwise_equal(name, t.get(name), getattr(case, name))
    for name in ("y", "dx", "dweight", "dbias"):
        if name in t:
            assert bool(t[name].float().isfinite().all()), f"{name} has unwritten or NaN elements"

# SPDX-License-Identifier: Apache-2.0
"""Argument checks of the cake_causal_conv1d_train API.

Every check raises before any launch, with a message that names the argument, what
was expected and what was given: ``cake: <arg> must <expected>; got <given>``.

Exception types (docs/python-api.md):
- TypeError: an argument of the wrong Python type, or a tensor of the wrong dtype;
- ValueError: any other bad argument value: shape, contiguity, device placement,
  alignment, an output overlapping another tensor, workspace size, an unknown
  ``silu_grad_preactivation``;
- RuntimeError: a device that cannot run the kernels (raised by ``_ops``).

The checks here read tensor metadata only (``check_alignment`` and
``check_no_overlap`` take data pointers read by ``_ops``); none reads tensor contents,
so none synchronizes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import torch
from torch.fx.experimental.symbolic_shapes import guard_scalar

try:
    import numpy
except ImportError:  # torch runs without numpy; then no value is a numpy integer
    numpy = None


@functools.cache
def _launch_contract() -> dict:
    """What every call must respect, read off the kernels' manifest by the extension
    (docs/kernel-abi.md): the convolution width and the multiple C must be of."""
    from . import _ops  # _ops imports this module

    extension, why = _ops._load_extension()
    if extension is None:
        raise RuntimeError(f"cake: {why}")
    return extension.launch_contract()


# Constants to torch.compile, which cannot trace into the extension: fixed per build.
@torch.compiler.assume_constant_result
def width() -> int:
    """Taps of the convolution; the kernels implement this width only."""
    return _launch_contract()["width"]


@torch.compiler.assume_constant_result
def channel_multiple() -> int:
    """The multiple C must be of: every kernel's channels per vector access divide it."""
    return _launch_contract()["channel_multiple"]


#: Values of ``silu_grad_preactivation``.
POLICIES = ("bf16", "fp32")
#: Dtypes allowed for ``weight`` and ``bias``.
PARAM_DTYPES = (torch.float32, torch.bfloat16)
#: Numpy's integer scalar types, when numpy is there.
NUMPY_INTEGERS = (numpy.integer,) if numpy is not None else ()
#: What the workspace functions take for S and C (bool aside): under
#: torch.compile(dynamic=True), x.shape's sizes are SymInts (Dynamo sees them as int).
INTEGERS = (int, torch.SymInt, *NUMPY_INTEGERS)


def _dtype_names(dtypes: Sequence[torch.dtype]) -> str:
    return " or ".join(str(d) for d in dtypes)


def check_tensor(name: str, value: object, dtypes: Sequence[torch.dtype] | None = None) -> None:
    """Checks that ``value`` is a tensor of one of ``dtypes`` (of any dtype if None)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"cake: {name} must be a torch.Tensor; got {type(value).__name__}")
    if dtypes is not None and value.dtype not in dtypes:
        raise TypeError(f"cake: {name} must have dtype {_dtype_names(dtypes)}; got {value.dtype}")


def check_contiguous(name: str, value: torch.Tensor) -> None:
    if not value.is_contiguous():
        raise ValueError(
            f"cake: {name} must be contiguous; got shape {list(value.shape)} "
            f"with strides {list(value.stride())}"
        )


def check_shape(name: str, value: torch.Tensor, shape: Sequence[int]) -> None:
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"cake: {name} must have shape {list(shape)}; got {list(value.shape)}")


def check_x(x: object) -> int:
    """Checks ``x`` ([S, C] or [1, S, C] bf16, contiguous) and returns C."""
    check_tensor("x", x, (torch.bfloat16,))
    if not (x.dim() == 2 or (x.dim() == 3 and x.shape[0] == 1)):
        raise ValueError(f"cake: x must have shape [S, C] or [1, S, C]; got {list(x.shape)}")
    channels = x.shape[-1]
    multiple = channel_multiple()
    if channels == 0 or channels % multiple != 0:
        raise ValueError(
            f"cake: x must have a channel count C (last dimension) that is a positive "
            f"multiple of {multiple}; got C = {channels}"
        )
    check_contiguous("x", x)
    return channels


def check_weight(weight: object, channels: int) -> None:
    check_tensor("weight", weight, PARAM_DTYPES)
    taps = width()
    if weight.dim() != 2:
        raise ValueError(
            f"cake: weight must have shape [C, {taps}] = [{channels}, {taps}]; "
            f"got {list(weight.shape)}"
        )
    # Named separately: another width is a supported op elsewhere, not a typo.
    if weight.shape[1] != taps:
        raise ValueError(
            f"cake: weight must have width {taps} (shape [C, {taps}]); "
            f"got width {weight.shape[1]} (shape {list(weight.shape)})"
        )
    check_shape("weight", weight, (channels, taps))
    check_contiguous("weight", weight)


def check_bias(bias: object, channels: int) -> None:
    if bias is None:
        return
    check_tensor("bias", bias, PARAM_DTYPES)
    check_shape("bias", bias, (channels,))
    check_contiguous("bias", bias)


def check_cu_seqlens(cu_seqlens: object) -> None:
    check_tensor("cu_seqlens", cu_seqlens, (torch.int32,))
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        raise ValueError(
            "cake: cu_seqlens must be 1-D with at least one element ([num_docs + 1]); "
            f"got shape {list(cu_seqlens.shape)}"
        )
    check_contiguous("cu_seqlens", cu_seqlens)


def check_inputs(x: object, weight: object, cu_seqlens: object, bias: object) -> int:
    """Checks the inputs shared by the forward and the backward; returns C."""
    channels = check_x(x)
    check_weight(weight, channels)
    check_cu_seqlens(cu_seqlens)
    check_bias(bias, channels)
    return channels


def check_like(name: str, value: object, like: torch.Tensor, dtype: torch.dtype) -> None:
    """Checks a tensor that must have ``like``'s shape, the given dtype, and be contiguous."""
    check_tensor(name, value, (dtype,))
    check_shape(name, value, like.shape)
    check_contiguous(name, value)


def check_workspace(name: str, value: object, dtypes: Sequence[torch.dtype] | None) -> None:
    """Checks a workspace: a contiguous tensor of one of ``dtypes`` (any if None)."""
    check_tensor(name, value, dtypes)
    check_contiguous(name, value)


def check_policy(value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"cake: silu_grad_preactivation must be a str; got {type(value).__name__}")
    if value not in POLICIES:
        raise ValueError(f"cake: silu_grad_preactivation must be one of {POLICIES}; got {value!r}")


def check_same_device(x: torch.Tensor, **others: torch.Tensor | None) -> None:
    """Checks that every tensor in ``others`` (None skipped) is on x's device."""
    for name, value in others.items():
        if value is not None and value.device != x.device:
            raise ValueError(f"cake: {name} must be on x's device {x.device}; got {value.device}")


def check_forward_args(x, weight, cu_seqlens, bias, out, workspace) -> None:
    """The metadata checks of the forward, in the order of docs/python-api.md."""
    check_inputs(x, weight, cu_seqlens, bias)
    if out is not None:
        check_like("out", out, x, torch.bfloat16)
    if workspace is not None:
        check_workspace("workspace", workspace, (torch.int32,))
    check_same_device(
        x, weight=weight, cu_seqlens=cu_seqlens, bias=bias, out=out, workspace=workspace
    )


def check_backward_args(x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace) -> None:
    """The metadata checks of the backward (the policy aside: it is checked first, by
    the caller), in the order of docs/python-api.md."""
    check_inputs(x, weight, cu_seqlens, bias)
    check_like("dy", dy, x, torch.bfloat16)
    if dx is not None:
        check_like("dx", dx, x, torch.bfloat16)
    if dweight is not None:
        check_like("dweight", dweight, weight, weight.dtype)
    if dbias is not None:
        if bias is None:
            raise ValueError("cake: dbias must be None when bias is None; got a tensor")
        check_like("dbias", dbias, bias, bias.dtype)
    if workspace is not None:
        check_workspace("workspace", workspace, None)
    check_same_device(
        x,
        weight=weight,
        cu_seqlens=cu_seqlens,
        bias=bias,
        dy=dy,
        workspace=workspace,
        dx=dx,
        dweight=dweight,
        dbias=dbias,
    )


def check_alignment(pointers: Iterable[tuple[str, int, int]]) -> None:
    """Checks each (name, data pointer, bytes): the pointer must be a multiple of bytes.

    Takes pointers, not tensors: they are read once per launch (_ops) and serve this
    check, the overlap check and the launch.
    """
    for name, pointer, align in pointers:
        if pointer % align != 0:
            raise ValueError(
                f"cake: {name} must be {align}-byte aligned; got data pointer "
                f"{pointer:#x} ({pointer % align} bytes past a boundary)"
            )


def check_no_overlap(
    outputs: Sequence[tuple[str, int, int]], inputs: Sequence[tuple[str, int, int]]
) -> None:
    """Checks that no output shares a byte with an input or another output.

    Each item is (name, data pointer, bytes): the tensor's extent is
    [data_ptr, data_ptr + numel * element_size) (every tensor here is contiguous).
    A kernel reading what another thread of it writes gives wrong or racy results,
    so an output (out, dx, dweight, dbias, a workspace) that overlaps anything else
    the launch touches is rejected, naming both. An empty tensor (0 bytes) overlaps
    nothing. Inputs may overlap each other: they are only read.
    """
    for i, (name, start, size) in enumerate(outputs):
        end = start + size
        for other, other_start, other_size in (*inputs, *outputs[:i]):
            other_end = other_start + other_size
            if size and other_size and start < other_end and other_start < end:
                raise ValueError(
                    f"cake: {name} overlaps {other}: an output must not share memory with "
                    f"an input or another output; got {name} at bytes [{start:#x}, {end:#x}) "
                    f"and {other} at [{other_start:#x}, {other_end:#x})"
                )


def check_workspace_size(
    name: str, have: int, need: int, channels: int, device: torch.device
) -> None:
    """Checks that a workspace of ``have`` bytes holds the ``need`` bytes of a launch."""
    if have < need:
        raise ValueError(
            f"cake: {name} must hold at least {need} bytes for C = {channels} on "
            f"{device}; got {have} bytes"
        )


def check_sizes(S: object, C: object) -> None:
    """Checks the (S, C) arguments of the workspace functions: ints, numpy integers or
    SymInts. The comparisons on a SymInt are guards, not specializations."""
    for name, value in (("S", S), ("C", C)):
        # bool is an int subclass, but True is not a token count.
        if isinstance(value, bool) or not isinstance(value, INTEGERS):
            raise TypeError(f"cake: {name} must be an int; got {type(value).__name__}")
    if S < 0:
        raise ValueError(f"cake: S must be >= 0; got {S}")
    multiple = channel_multiple()
    if C <= 0 or C % multiple != 0:
        raise ValueError(f"cake: C must be a positive multiple of {multiple}; got {C}")


def concrete_int(value: int) -> int:
    """A size accepted by ``check_sizes`` as a Python int. A SymInt is specialized:
    the caller's compiled code is guarded on its value (Dynamo traces guard_scalar)."""
    if isinstance(value, NUMPY_INTEGERS):
        return int(value)
    return guard_scalar(value)


def as_device(device: object) -> torch.device:
    """Accepts what torch.device accepts (device, str, int); TypeError otherwise."""
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int)):
        raise TypeError(
            f"cake: device must be a torch.device, str or int; got {type(device).__name__}"
        )
    return torch.device(device)

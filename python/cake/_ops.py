# SPDX-License-Identifier: Apache-2.0
"""Launch layer: the ``cake._C`` extension, device support, and the torch custom ops.

The kernels are launched from ``torch.library.custom_op``s in namespace ``cake`` so
that torch.compile sees them as single opaque nodes (no graph break) and CUDA graphs
capture them like any other launch. Each op has a fake implementation for shape and
dtype inference. The ops expect arguments already checked by ``_checks`` in the
traceable wrappers of ``cake_causal_conv1d_train``; what needs real tensors or the
extension (alignment, outputs overlapping other tensors, device support, workspace
size) is checked here, before the launch.

``cake._C`` is imported on first use, so ``import cake`` works without a GPU and
without a built extension.
"""

import functools
import importlib
from types import ModuleType
from typing import Optional

import torch

from . import _checks

_DTYPE_NAMES = {torch.float32: "f32", torch.bfloat16: "bf16"}


@functools.cache
def _load_extension() -> tuple[ModuleType | None, str]:
    """Returns (cake._C, "") or (None, why it could not be imported)."""
    try:
        return importlib.import_module("cake._C"), ""
    except ImportError as error:
        return None, f"the compiled extension cake._C is missing or failed to load ({error})"


@functools.cache
def _device_support(index: int) -> tuple[bool, str]:
    extension, _ = _load_extension()
    if extension.is_supported(index):
        return True, ""
    # unavailable_reason() is empty when the driver loads but the device falls short.
    return False, extension.unavailable_reason(index) or (
        "cake._C.is_supported is false (it needs compute capability >= 9.0)"
    )


def device_type_problem(device: torch.device) -> str | None:
    """Returns why no kernel of Cake's can run on ``device``'s type, or None."""
    if device.type not in ("cuda", "cpu"):
        return (
            f"cake: device {device} is not supported; the kernels run on CUDA devices and the CPU"
        )
    return None


def support_problem(device: torch.device) -> str | None:
    """Returns why ``device`` cannot run the kernels, or None when it can."""
    problem = device_type_problem(device)
    if problem is not None:
        return problem
    extension, why = _load_extension()
    if extension is None:
        return f"cake: cannot run on {device}: {why}"
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"cake: cannot run on {device}: torch sees no CUDA device"
    index = _index(device)
    supported, why = _device_support(index)
    if not supported:
        return f"cake: device {_name(device, index)} is not supported: {why}"
    return None


def require_supported(device: torch.device) -> tuple[ModuleType, int]:
    """Returns (cake._C, device index); raises RuntimeError when ``device`` cannot run."""
    problem = support_problem(device)
    if problem is not None:
        raise RuntimeError(problem)
    return _load_extension()[0], _index(device)


def _host_index() -> int:
    """The extension's device index of the host, whose CPU runs the host kernels."""
    return _load_extension()[0].HOST_DEVICE_INDEX


def _index(device: torch.device) -> int:
    if device.type == "cpu":
        return _host_index()
    return device.index if device.index is not None else torch.cuda.current_device()


def _name(device: torch.device, index: int) -> str:
    return "cpu" if device.type == "cpu" else f"cuda:{index}"


def _stream(index: int) -> int:
    """The stream to launch on: the current one; the host kernels run at once."""
    return 0 if index == _host_index() else torch.cuda.current_stream(index).cuda_stream


# Under torch.compile the count is computed when tracing and kept as a constant, as
# Dynamo cannot trace into the extension: it depends only on the arguments (C
# specialized, the device a constant) and the device, fixed per device.
@torch.compiler.assume_constant_result
def backward_workspace_bytes(channels: int, device: torch.device) -> int:
    extension, index = require_supported(device)
    return extension.backward_workspace_bytes(channels, index)


def _ptr(value: torch.Tensor | None) -> int:
    return 0 if value is None else value.data_ptr()


def _dtype_name(value: torch.Tensor | None) -> str:
    return "none" if value is None else _DTYPE_NAMES[value.dtype]


def _input_alignments(x, weight, cu_seqlens, bias):
    """(name, tensor, bytes) of the alignment rules of docs/kernel-abi.md."""
    return [
        ("x", x, 16),
        ("weight", weight, 16 if weight.dtype == torch.float32 else 8),
        ("cu_seqlens", cu_seqlens, 4),
        ("bias", bias, 16),
    ]


def _inputs(x, weight, cu_seqlens, bias):
    """(name, tensor) of the inputs shared by the forward and the backward."""
    return [("x", x), ("weight", weight), ("cu_seqlens", cu_seqlens), ("bias", bias)]


def _launch_forward(x, weight, cu_seqlens, bias, out, workspace=None) -> None:
    _checks.check_alignment(_input_alignments(x, weight, cu_seqlens, bias) + [("out", out, 16)])
    # The forward does not use its workspace, but the API lets it: it is an output.
    _checks.check_no_overlap(
        [("out", out), ("workspace", workspace)], _inputs(x, weight, cu_seqlens, bias)
    )
    extension, index = require_supported(x.device)
    channels = x.shape[-1]
    extension.forward(
        x.data_ptr(),
        weight.data_ptr(),
        cu_seqlens.data_ptr(),
        _ptr(bias),
        out.data_ptr(),
        x.numel() // channels,
        channels,
        cu_seqlens.numel() - 1,
        _DTYPE_NAMES[weight.dtype],
        _dtype_name(bias),
        index,
        _stream(index),
    )


def _launch_backward(x, weight, cu_seqlens, bias, dy, policy, workspace, dx, dweight, dbias):
    # dweight and dbias follow their parameter's rule: the reduce kernel stores them
    # with the same vector width as the forward loads the parameters.
    _checks.check_alignment(
        _input_alignments(x, weight, cu_seqlens, bias)
        + [
            ("dy", dy, 16),
            ("dx", dx, 16),
            ("dweight", dweight, 16 if dweight.dtype == torch.float32 else 8),
            ("dbias", dbias, 16),
            ("workspace", workspace, 16),
        ]
    )
    # A workspace allocated below is fresh; one passed in is checked like the outputs.
    _checks.check_no_overlap(
        [("dx", dx), ("dweight", dweight), ("dbias", dbias), ("workspace", workspace)],
        _inputs(x, weight, cu_seqlens, bias) + [("dy", dy)],
    )
    extension, index = require_supported(x.device)
    channels = x.shape[-1]
    need = extension.backward_workspace_bytes(channels, index)
    if workspace is None:
        workspace = torch.empty(need, dtype=torch.uint8, device=x.device)
    else:
        _checks.check_workspace_size("workspace", workspace, need, channels)
    extension.backward(
        x.data_ptr(),
        weight.data_ptr(),
        cu_seqlens.data_ptr(),
        _ptr(bias),
        dy.data_ptr(),
        dx.data_ptr(),
        dweight.data_ptr(),
        _ptr(dbias),
        workspace.data_ptr(),
        x.numel() // channels,
        channels,
        cu_seqlens.numel() - 1,
        _DTYPE_NAMES[weight.dtype],
        _dtype_name(bias),
        policy,
        index,
        _stream(index),
    )


# The ops register one implementation for every device type: a tensor on an
# unsupported device then reaches require_supported() and gets Cake's own error
# instead of the dispatcher's "no kernel for CPU". Their schemas are inferred from
# the annotations, written with Optional (and without postponed evaluation) as
# every torch >= 2.4 reads them.


@torch.library.custom_op("cake::causal_conv1d_fwd", mutates_args=())
def causal_conv1d_fwd(
    x: torch.Tensor, weight: torch.Tensor, cu_seqlens: torch.Tensor, bias: Optional[torch.Tensor]
) -> torch.Tensor:
    out = torch.empty_like(x)
    _launch_forward(x, weight, cu_seqlens, bias, out)
    return out


@causal_conv1d_fwd.register_fake
def _(x, weight, cu_seqlens, bias):
    return torch.empty_like(x)


@torch.library.custom_op("cake::causal_conv1d_fwd_out", mutates_args=("out", "workspace"))
def causal_conv1d_fwd_out(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    bias: Optional[torch.Tensor],
    out: torch.Tensor,
    workspace: Optional[torch.Tensor],
) -> None:
    """Writes y into ``out``. ``workspace`` is the caller's forward workspace: unused
    by the kernels (docs/python-api.md), but passed so that it is checked, at launch,
    like every output."""
    _launch_forward(x, weight, cu_seqlens, bias, out, workspace)


@causal_conv1d_fwd_out.register_fake
def _(x, weight, cu_seqlens, bias, out, workspace):
    return None


@torch.library.custom_op("cake::causal_conv1d_bwd", mutates_args=())
def causal_conv1d_bwd(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    bias: Optional[torch.Tensor],
    dy: torch.Tensor,
    silu_grad_preactivation: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (dx, dweight, dbias); dbias is an empty tensor when bias is None
    (a custom op cannot return None)."""
    dx, dweight = torch.empty_like(x), torch.empty_like(weight)
    dbias = torch.empty_like(bias) if bias is not None else None
    _launch_backward(
        x, weight, cu_seqlens, bias, dy, silu_grad_preactivation, None, dx, dweight, dbias
    )
    return dx, dweight, dbias if dbias is not None else weight.new_empty(0)


@causal_conv1d_bwd.register_fake
def _(x, weight, cu_seqlens, bias, dy, silu_grad_preactivation):
    dbias = torch.empty_like(bias) if bias is not None else weight.new_empty(0)
    return torch.empty_like(x), torch.empty_like(weight), dbias


@torch.library.custom_op(
    "cake::causal_conv1d_bwd_out", mutates_args=("workspace", "dx", "dweight", "dbias")
)
def causal_conv1d_bwd_out(
    x: torch.Tensor,
    weight: torch.Tensor,
    cu_seqlens: torch.Tensor,
    bias: Optional[torch.Tensor],
    dy: torch.Tensor,
    silu_grad_preactivation: str,
    workspace: Optional[torch.Tensor],
    dx: torch.Tensor,
    dweight: torch.Tensor,
    dbias: Optional[torch.Tensor],
) -> None:
    _launch_backward(
        x, weight, cu_seqlens, bias, dy, silu_grad_preactivation, workspace, dx, dweight, dbias
    )


@causal_conv1d_bwd_out.register_fake
def _(x, weight, cu_seqlens, bias, dy, silu_grad_preactivation, workspace, dx, dweight, dbias):
    return None

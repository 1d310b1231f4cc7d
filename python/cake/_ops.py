# SPDX-License-Identifier: Apache-2.0
"""Launch layer: the ``cake._C`` extension, device support, launch plans, and the
torch custom ops.

Every launch goes through ``run_forward`` / ``run_backward`` with a plan from
``forward_plan`` / ``backward_plan``. A plan holds what a call's tensor metadata
decides (the metadata checks passed, the device's support, sizes, dtypes, extents,
alignment rules, the backward workspace size): it is cached per signature (each
tensor's type, dtype, shape, contiguity, device, requires_grad), and the metadata
checks of ``_checks`` run on every miss. What depends on data pointers (alignment,
outputs overlapping other tensors) is checked at every launch, from the plan's rules.
docs/host-overhead.md says why and what it saves.

In eager mode (``eager()``) the public functions first offer the call to
``torch_ops``, the C++ route (``cake._torch_ops``, when it was built for this torch),
which runs the common valid call and returns None for any other; then they launch
directly (the plan is ``direct``); under torch.compile, tracing, a torch function or
dispatch mode, or for tensor subclasses, meta tensors and inputs that require grad
under grad mode, they go through the ``cake::`` custom ops, which torch.compile sees
as single opaque nodes (no graph break) and whose fake implementations give shapes
and dtypes. The Python routes launch through the same plans and run functions.

``cake._C`` is imported on first use, so ``import cake`` works without a GPU and
without a built extension; ``cake._torch_ops`` at import, when it matches torch.
"""

import functools
import importlib
import os
from collections.abc import Callable
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


def _load_torch_ops() -> tuple[ModuleType | None, str]:
    """Returns (cake._torch_ops, "") when eager calls may take the C++ route, else
    (None, why not). The extension links the libtorch it was built against, so it is
    imported only under that torch version (recorded by the build)."""
    if os.environ.get("CAKE_TORCH_OPS", "1") == "0":
        return None, "CAKE_TORCH_OPS=0 is set"
    try:
        from ._torch_ops_version import TORCH_VERSION
    except ImportError:
        return None, "cake._torch_ops was not built (the build had no torch)"
    if TORCH_VERSION != torch.__version__:
        return None, f"cake._torch_ops was built for torch {TORCH_VERSION}, not {torch.__version__}"
    try:
        return importlib.import_module("cake._torch_ops"), ""
    except ImportError as error:
        return None, f"cake._torch_ops failed to load ({error})"


#: The C++ route of eager calls (cake._torch_ops), or None; and why not.
torch_ops, _torch_ops_problem = _load_torch_ops()


def eager_route() -> tuple[str, str]:
    """("torch_ops", "") when eager calls try the C++ route first, else ("python",
    why not)."""
    return ("torch_ops", "") if torch_ops is not None else ("python", _torch_ops_problem)


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


def _no_stream() -> int:
    """The host kernels run at once, on no stream."""
    return 0


def _target(device: torch.device) -> tuple[str | None, int, Callable[[], int] | None]:
    """The one place that decides whether and how ``device`` runs the kernels:
    (None, the device index cake._C takes, a function returning the handle of the
    device's current stream) when it can, (why not, -1, None) when it cannot. The CPU
    runs the host kernels: the extension's HOST_DEVICE_INDEX, no stream."""
    problem = device_type_problem(device)
    if problem is not None:
        return problem, -1, None
    extension, why = _load_extension()
    if extension is None:
        return f"cake: cannot run on {device}: {why}", -1, None
    if device.type == "cpu":
        index = extension.HOST_DEVICE_INDEX
        supported, why = _device_support(index)
        if not supported:
            return f"cake: device cpu is not supported: {why}", -1, None
        return None, index, _no_stream
    if not torch.cuda.is_available():
        return f"cake: cannot run on {device}: torch sees no CUDA device", -1, None
    index = device.index if device.index is not None else torch.cuda.current_device()
    supported, why = _device_support(index)
    if not supported:
        return f"cake: device cuda:{index} is not supported: {why}", -1, None
    # The raw handle, without building a torch.cuda.Stream object (a few us per call).
    return None, index, functools.partial(torch._C._cuda_getCurrentRawStream, index)


def support_problem(device: torch.device) -> str | None:
    """Returns why ``device`` cannot run the kernels, or None when it can."""
    return _target(device)[0]


def require_supported(device: torch.device) -> tuple[ModuleType, int]:
    """Returns (cake._C, device index); raises RuntimeError when ``device`` cannot run."""
    problem, index, _ = _target(device)
    if problem is not None:
        raise RuntimeError(problem)
    return _load_extension()[0], index


# Under torch.compile the count is computed when tracing and kept as a constant, as
# Dynamo cannot trace into the extension: it depends only on the arguments (C
# specialized, the device a constant) and the device, fixed per device.
@torch.compiler.assume_constant_result
def backward_workspace_bytes(channels: int, device: torch.device) -> int:
    extension, index = require_supported(device)
    return extension.backward_workspace_bytes(channels, index)


def launches_directly(plan: "Plan") -> bool:
    """Whether an eager call with this plan may launch without the custom ops: plain
    tensors off "meta" (whose ops run the fake implementations), and no input that
    requires grad under grad mode (through the ops autograd then says that the op
    has no formula, where a direct launch would silently give no gradient)."""
    return plan.direct and not (plan.requires_grad and torch.is_grad_enabled())


def eager() -> bool:
    """Whether a call may launch without going through the dispatcher: not under
    torch.compile or torch.export (Dynamo reads is_compiling() as True and stops
    there), not under torch.jit.trace, and with no torch function or dispatch mode
    active (FakeTensorMode, make_fx, ``with torch.device(...)``...), all of which must
    see the custom ops."""
    return not (
        torch.compiler.is_compiling()
        or torch._C._is_tracing()
        or torch._C._is_torch_function_mode_enabled()
        or torch._C._len_torch_dispatch_stack()
    )


# Tensor types launched directly: others may override torch functions or dispatch.
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
#: Plans kept per op before the cache starts over (a new S or document count is a
#: new signature; a training loop uses a handful).
_MAX_PLANS = 1024


class Plan:
    """What a call's metadata decides; see the module's docstring."""

    __slots__ = (
        "aligns",
        "bias_dtype",
        "channels",
        "direct",
        "extension",
        "index",
        "inputs",
        "names",
        "num_docs",
        "outputs",
        "problem",
        "requires_grad",
        "stream",
        "tokens",
        "weight_dtype",
        "workspace_bytes",
        "workspace_problem",
    )


def _signature(t: torch.Tensor | None) -> tuple | None:
    """What the metadata checks and the plan read of a tensor (None stays None). A
    non-tensor raises AttributeError."""
    if t is None:
        return None
    return (type(t), t.dtype, t.shape, t.is_contiguous(), t.device, t.requires_grad)


def _cached_plan(cache: dict, tensors: tuple, check, make) -> Plan:
    """The plan of ``tensors`` from ``cache``, keyed by their signatures; on a miss,
    ``check(*tensors)`` (the full metadata checks, which raise on a bad argument) then
    ``make(*tensors)``. An argument that is not a tensor is never cached: the checks
    raise its TypeError."""
    try:
        key = tuple(map(_signature, tensors))
    except AttributeError:
        key = None
    plan = cache.get(key)
    if plan is None:
        check(*tensors)
        plan = make(*tensors)
        if key is not None:
            if len(cache) >= _MAX_PLANS:
                cache.clear()
            cache[key] = plan
    return plan


def _new_plan(tensors: tuple, names: tuple, aligns: tuple, output_names: frozenset) -> Plan:
    """The plan fields shared by the forward and the backward: ``tensors`` (None for
    an argument not given) are called ``names``, need ``aligns`` bytes of alignment,
    and those in ``output_names`` are outputs."""
    x, weight, cu_seqlens, bias = tensors[:4]
    plan = Plan()
    plan.direct = x.device.type != "meta" and all(
        type(t) in _PLAIN_TYPES for t in tensors if t is not None
    )
    plan.requires_grad = any(t.requires_grad for t in tensors if t is not None)
    plan.problem, plan.index, plan.stream = _target(x.device)
    plan.extension = _load_extension()[0] if plan.problem is None else None
    plan.channels = x.shape[-1]
    plan.tokens = x.numel() // plan.channels
    plan.num_docs = cu_seqlens.numel() - 1
    plan.weight_dtype = _DTYPE_NAMES[weight.dtype]
    plan.bias_dtype = "none" if bias is None else _DTYPE_NAMES[bias.dtype]
    plan.names, plan.aligns = names, aligns
    # (name, position, bytes) of the inputs and of the outputs given, for the overlaps.
    inputs, outputs = [], []
    for i, (name, t) in enumerate(zip(names, tensors, strict=True)):
        if t is not None:
            extent = (name, i, t.numel() * t.element_size())
            (outputs if name in output_names else inputs).append(extent)
    plan.inputs, plan.outputs = tuple(inputs), tuple(outputs)
    plan.workspace_bytes, plan.workspace_problem = 0, None
    return plan


#: The kernels' names of the API's buffers (docs/kernel-abi.md).
_KERNEL_NAMES = {"out": "y", "workspace": "partials"}


def _alignments(device: torch.device, op: str, weight, bias, names: tuple) -> tuple:
    """The bytes each of ``names`` (the API's) must be aligned to for the kernels of
    ``op`` ("fwd", or "bwd" with its reduce, under either policy) on ``device``'s
    target, as the manifest says (cake._C.alignments); 1 for a buffer no kernel
    reads, and for all when no kernel can run there (the device check then raises)."""
    extension, _ = _load_extension()
    if extension is None or device_type_problem(device) is not None:
        return (1,) * len(names)
    target = "host" if device.type == "cpu" else "gpu"
    weight_dtype = _DTYPE_NAMES[weight.dtype]
    bias_dtype = "none" if bias is None else _DTYPE_NAMES[bias.dtype]
    tables = [
        extension.alignments(target, op, weight_dtype, bias_dtype, policy)
        for policy in (("none",) if op == "fwd" else _checks.POLICIES)
    ]
    return tuple(
        max(table.get(_KERNEL_NAMES.get(name, name), 1) for table in tables) for name in names
    )


_FORWARD_NAMES = ("x", "weight", "cu_seqlens", "bias", "out", "workspace")
# The forward does not use its workspace, but the API lets it: it is an output.
_FORWARD_OUTPUTS = frozenset(("out", "workspace"))
_FORWARD_PLANS: dict = {}


def _make_forward_plan(x, weight, cu_seqlens, bias, out, workspace) -> Plan:
    tensors = (x, weight, cu_seqlens, bias, out, workspace)
    aligns = _alignments(x.device, "fwd", weight, bias, _FORWARD_NAMES)
    return _new_plan(tensors, _FORWARD_NAMES, aligns, _FORWARD_OUTPUTS)


def forward_plan(x, weight, cu_seqlens, bias, out, workspace) -> Plan:
    """The forward's plan; raises what ``_checks.check_forward_args`` raises."""
    return _cached_plan(
        _FORWARD_PLANS,
        (x, weight, cu_seqlens, bias, out, workspace),
        _checks.check_forward_args,
        _make_forward_plan,
    )


_BACKWARD_NAMES = (
    "x", "weight", "cu_seqlens", "bias", "dy", "dx", "dweight", "dbias", "workspace"
)  # fmt: skip
_BACKWARD_OUTPUTS = frozenset(("dx", "dweight", "dbias", "workspace"))
_BACKWARD_PLANS: dict = {}


def _make_backward_plan(x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace) -> Plan:
    tensors = (x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace)
    aligns = _alignments(x.device, "bwd", weight, bias, _BACKWARD_NAMES)
    plan = _new_plan(tensors, _BACKWARD_NAMES, aligns, _BACKWARD_OUTPUTS)
    if plan.problem is None:
        plan.workspace_bytes = plan.extension.backward_workspace_bytes(plan.channels, plan.index)
        if workspace is not None:
            try:
                _checks.check_workspace_size(
                    "workspace",
                    workspace.numel() * workspace.element_size(),
                    plan.workspace_bytes,
                    plan.channels,
                    x.device,
                )
            except ValueError as error:  # raised at launch, after the pointer checks
                plan.workspace_problem = str(error)
    return plan


def backward_plan(x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace) -> Plan:
    """The backward's plan; raises what ``_checks.check_backward_args`` raises."""
    return _cached_plan(
        _BACKWARD_PLANS,
        (x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace),
        _checks.check_backward_args,
        _make_backward_plan,
    )


def _check_launch(plan: Plan, pointers: list) -> None:
    """The checks that read data pointers, then the device's support: each raises
    before any launch."""
    # A missing tensor's pointer is 0, which meets every rule.
    _checks.check_alignment(zip(plan.names, pointers, plan.aligns))
    if plan.outputs:  # outputs allocated here are fresh: they overlap nothing
        _checks.check_no_overlap(
            [(name, pointers[i], size) for name, i, size in plan.outputs],
            [(name, pointers[i], size) for name, i, size in plan.inputs],
        )
    if plan.problem is not None:
        raise RuntimeError(plan.problem)


def _increment_version_list(tensors: list) -> None:
    """torch._C._increment_version on a list (one call; torch >= 2.6 takes lists)."""
    torch._C._increment_version(tensors)


def _increment_version_each(tensors: list) -> None:
    """torch.autograd.graph.increment_version, one tensor at a time (older torch)."""
    for tensor in tensors:
        torch.autograd.graph.increment_version(tensor)


# _increment_versions(outputs) bumps the version counters of the outputs a caller
# gave, as an in-place aten op does, so that autograd sees that they changed (through
# the custom ops the dispatcher bumps them too; a second bump is harmless). One call
# for the list where torch takes one (4 bumps cost 2 us one at a time).
try:
    torch._C._increment_version([])
    _increment_versions = _increment_version_list
except TypeError:
    _increment_versions = _increment_version_each


def run_forward(plan: Plan, x, weight, cu_seqlens, bias, out, workspace) -> torch.Tensor:
    """Checks the pointers, allocates ``out`` when None, launches; returns out."""
    tensors = (x, weight, cu_seqlens, bias, out, workspace)
    pointers = [0 if t is None else t.data_ptr() for t in tensors]
    _check_launch(plan, pointers)
    if out is None:
        out = torch.empty_like(x)
    else:
        _increment_versions([out])
    plan.extension.forward(
        pointers[0],
        pointers[1],
        pointers[2],
        pointers[3],
        out.data_ptr(),
        plan.tokens,
        plan.channels,
        plan.num_docs,
        plan.weight_dtype,
        plan.bias_dtype,
        plan.index,
        plan.stream(),
    )
    return out


def run_backward(
    plan: Plan, x, weight, cu_seqlens, bias, dy, policy, dx, dweight, dbias, workspace
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Checks the pointers and the workspace size, allocates the outputs that are None
    (dbias only with bias; a workspace per call, from PyTorch's caching allocator),
    launches; returns (dx, dweight, dbias)."""
    tensors = (x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace)
    pointers = [0 if t is None else t.data_ptr() for t in tensors]
    _check_launch(plan, pointers)
    if plan.workspace_problem is not None:
        raise ValueError(plan.workspace_problem)
    given = [t for t in tensors[5:] if t is not None]
    if given:
        _increment_versions(given)
    if dx is None:
        dx = torch.empty_like(x)
    if dweight is None:
        dweight = torch.empty_like(weight)
    if dbias is None and bias is not None:
        dbias = torch.empty_like(bias)
    if workspace is None:
        workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=x.device)
    plan.extension.backward(
        pointers[0],
        pointers[1],
        pointers[2],
        pointers[3],
        pointers[4],
        dx.data_ptr(),
        dweight.data_ptr(),
        0 if dbias is None else dbias.data_ptr(),
        workspace.data_ptr(),
        plan.tokens,
        plan.channels,
        plan.num_docs,
        plan.weight_dtype,
        plan.bias_dtype,
        policy,
        plan.index,
        plan.stream(),
    )
    return dx, dweight, dbias


# The ops register one implementation for every device type: a tensor on an
# unsupported device then reaches the launch's device check and gets Cake's own error
# instead of the dispatcher's "no kernel for CPU". Their schemas are inferred from
# the annotations, written with Optional (and without postponed evaluation) as
# every torch >= 2.4 reads them.


@torch.library.custom_op("cake::causal_conv1d_fwd", mutates_args=())
def causal_conv1d_fwd(
    x: torch.Tensor, weight: torch.Tensor, cu_seqlens: torch.Tensor, bias: Optional[torch.Tensor]
) -> torch.Tensor:
    plan = forward_plan(x, weight, cu_seqlens, bias, None, None)
    return run_forward(plan, x, weight, cu_seqlens, bias, None, None)


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
    plan = forward_plan(x, weight, cu_seqlens, bias, out, workspace)
    run_forward(plan, x, weight, cu_seqlens, bias, out, workspace)


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
    plan = backward_plan(x, weight, cu_seqlens, bias, dy, None, None, None, None)
    dx, dweight, dbias = run_backward(
        plan, x, weight, cu_seqlens, bias, dy, silu_grad_preactivation, None, None, None, None
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
    plan = backward_plan(x, weight, cu_seqlens, bias, dy, dx, dweight, dbias, workspace)
    run_backward(
        plan,
        x,
        weight,
        cu_seqlens,
        bias,
        dy,
        silu_grad_preactivation,
        dx,
        dweight,
        dbias,
        workspace,
    )


@causal_conv1d_bwd_out.register_fake
def _(x, weight, cu_seqlens, bias, dy, silu_grad_preactivation, workspace, dx, dweight, dbias):
    return None

# SPDX-License-Identifier: Apache-2.0
"""One-line switches that make other libraries' models run their causal conv1d on
Cake (docs/drop-ins.md).

transformers (5.x) calls the conv of its Mamba2-family and Gated DeltaNet / KDA models
through a module-level ``causal_conv1d_fn`` in each ``modeling_<model>.py``: a hook
that resolved, when the module was imported, to Dao's causal-conv1d when installed,
else to a PyTorch fallback (or, with the ``kernels`` package, to a hub kernel), and
that the layers look up by name at every call. ``use_in_transformers()`` replaces that
name in the modules of ``TRANSFORMERS_MODELS`` with Cake's drop-in. The Mamba2-family
mixers also have a fused conv + scan path (mamba_ssm's
``mamba_split_conv1d_scan_combined``) that does the conv itself; the switch turns it
off, so that these layers take their unfused path, whose conv is the one above.

Importing this module imports neither transformers nor any model.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable

import torch

from . import dropins
from ._ops import support_problem

__all__ = ["TRANSFORMERS_MODELS", "TransformersSwitch", "use_in_transformers"]

#: The transformers models whose layers call ``causal_conv1d_fn`` with a channel-last
#: [B, D, T] x and a [D, W] weight, as Dao's function takes them: Mamba2 and the hybrids
#: built on its mixer, then Gated DeltaNet (Qwen3-Next, Qwen3.5, OLMo hybrid) and KDA.
#: A model missing from the installed transformers is skipped.
TRANSFORMERS_MODELS = (
    "mamba2",
    "bamba",
    "falcon_h1",
    "granitemoehybrid",
    "nemotron_h",
    "zamba2",
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_moe",
    "olmo_hybrid",
    "kimi_linear",
)
#: The fused conv + scan entry points that the switch turns off (they return None,
#: which the layers read as "take the unfused path", as with no kernel installed).
_FUSED = ("mamba2_split_conv1d_scan_combined",)


# Under torch.compile the answer is taken when tracing and kept: it depends only on
# the device (and Dynamo cannot trace into the extension).
@torch.compiler.assume_constant_result
def _device_problem(device: torch.device) -> str | None:
    return support_problem(device)


def _cake_causal_conv1d_fn(model: str, original: Callable, strict: bool) -> Callable:
    """The ``causal_conv1d_fn`` that the switch puts in ``model``'s module: transformers'
    hook signature; the call goes to ``dropins.causal_conv1d_fn`` with the hook's
    seq_idx (other keywords are the model's kwargs, which Dao's function never sees
    either). When it cannot serve a call, ``original`` serves it, with a warning, or
    with ``strict`` the drop-in's error is raised."""

    def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None, **kwargs):
        seq_idx = kwargs.get("seq_idx")
        if not strict:
            why = _why_not(hidden_states, weight, bias, seq_idx, activation)
            if why is not None:
                warnings.warn(
                    f"cake: transformers' {model} runs this causal_conv1d_fn call with its "
                    f"own implementation: {why}",
                    stacklevel=2,
                )
                return original(hidden_states, weight, bias, activation=activation, **kwargs)
        # Looked up at each call, so that a test can watch it.
        return dropins.causal_conv1d_fn(
            hidden_states, weight, bias, seq_idx=seq_idx, activation=activation
        )

    causal_conv1d_fn.cake_original = original
    return causal_conv1d_fn


def _why_not(x, weight, bias, seq_idx, activation) -> str | None:
    """Why Cake cannot serve a call (its error message), or None. Metadata only: the
    drop-in's checks, then whether x's device runs the kernels."""
    try:
        dropins.check_causal_conv1d_fn_args(x, weight, bias, seq_idx, activation=activation)
    except (TypeError, ValueError) as error:
        return str(error)
    return _device_problem(x.device)


def _no_fused_path(*args, **kwargs) -> None:
    return None


class TransformersSwitch:
    """What ``use_in_transformers`` changed; ``undo()`` (or leaving a ``with`` block)
    puts every replaced name back. ``models`` lists the models switched."""

    def __init__(self) -> None:
        self.models: list[str] = []
        self._replaced: list[tuple[object, str, object]] = []

    def _replace(self, module: object, name: str, value: object) -> None:
        self._replaced.append((module, name, getattr(module, name)))
        setattr(module, name, value)

    def undo(self) -> None:
        for module, name, value in reversed(self._replaced):
            setattr(module, name, value)
        self._replaced.clear()
        self.models.clear()

    def __enter__(self) -> TransformersSwitch:
        return self

    def __exit__(self, *exc_info) -> None:
        self.undo()


def use_in_transformers(*, strict: bool = False) -> TransformersSwitch:
    """Makes the transformers models of ``TRANSFORMERS_MODELS`` run their causal conv1d
    on Cake, forward and backward: call it once before training (models built before
    or after are both switched; the layers look the function up at every call).

    Each call of a switched model's ``causal_conv1d_fn`` goes to
    ``cake.dropins.causal_conv1d_fn``. One that Cake cannot serve (an fp32 or fp16
    model, a conv width other than 4, a channel-first x as generation's cache prefill
    passes, no activation, a CPU tensor) goes to the model's own implementation with a
    warning, or, with ``strict=True``, raises the drop-in's error. Returns a
    ``TransformersSwitch``: ``undo()`` restores the models' own functions, and ``with
    cake.integrations.use_in_transformers(): ...`` switches for the block only.
    """
    try:
        import transformers  # noqa: F401 (only to fail early, with a clear message)
    except ImportError as error:
        raise ImportError(
            f"cake: use_in_transformers needs transformers (pip install 'transformers>=5'); "
            f"it failed to import: {error}"
        ) from error
    switch = TransformersSwitch()
    for model in TRANSFORMERS_MODELS:
        try:
            module = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
        except ImportError:  # not in this transformers version
            continue
        if not hasattr(module, "causal_conv1d_fn"):
            continue
        original = module.causal_conv1d_fn
        switch._replace(module, "causal_conv1d_fn", _cake_causal_conv1d_fn(model, original, strict))
        for name in _FUSED:
            if hasattr(module, name):
                switch._replace(module, name, _no_fused_path)
        switch.models.append(model)
    return switch

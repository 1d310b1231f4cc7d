# SPDX-License-Identifier: Apache-2.0
"""Cake: MLIR-generated GPU kernels for a packed variable-length causal depthwise
conv1d (width 4) + bias + SiLU, forward and backward, as a drop-in for
``flashinfer.cake_causal_conv1d_train``.

Importing cake needs neither a GPU nor the compiled extension ``cake._C``; the
extension is loaded on the first launch. ``cake.reference`` holds a float64
pure-PyTorch reference of the op.
"""

import pkgutil

# Also search other `cake` folders on sys.path for submodules: the source tree
# (python/) then finds the extensions a CMake build puts in <build>/python/cake/
# (before the imports below: _ops imports cake._torch_ops).
__path__ = pkgutil.extend_path(__path__, __name__)

from . import cake_causal_conv1d_train
from ._ops import eager_route as eager_route  # not the spec's: not in __all__
from .cake_causal_conv1d_train import *  # noqa: F403 (the spec's API, re-exported)

__all__ = cake_causal_conv1d_train.__all__

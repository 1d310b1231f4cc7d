# SPDX-License-Identifier: Apache-2.0
"""Cake: MLIR-generated GPU kernels for a packed variable-length causal depthwise
conv1d (width 4) + bias + SiLU, forward and backward, as a drop-in for
``flashinfer.cake_causal_conv1d_train``.

Importing cake needs neither a GPU nor the compiled extension ``cake._C``; the
extension is loaded on the first launch. ``cake.reference`` holds a float64
pure-PyTorch reference of the op.
"""

import pkgutil

from . import cake_causal_conv1d_train
from .cake_causal_conv1d_train import *  # noqa: F403 (the spec's API, re-exported)

__all__ = cake_causal_conv1d_train.__all__

# Also search other `cake` folders on sys.path for submodules: the source tree
# (python/) then finds the extension a CMake build puts in <build>/python/cake/.
__path__ = pkgutil.extend_path(__path__, __name__)

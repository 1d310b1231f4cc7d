# SPDX-License-Identifier: Apache-2.0
"""pytest setup: the `gpu` marker, and cake from the source tree when not installed."""

import importlib.util
import sys
from pathlib import Path

# Tests run against an installed cake when there is one, else against python/.
if importlib.util.find_spec("cake") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: launches Cake's kernels; skipped without a supported CUDA device"
    )

# SPDX-License-Identifier: Apache-2.0
"""The GPU benchmark's shapes and the SxCxDOCS syntax the benchmark scripts share."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Iterator

# (S, C, documents): the shapes of docs/benchmarks.md's records.
SHAPES = [
    (4096, 2048, 2),
    (16384, 4096, 8),
    (32768, 5376, 16),
    (65536, 8192, 64),
    (32768, 4096, 512),
    (32768, 4096, 16384),
    (65536, 1024, 32),
    (8192, 16384, 4),
]


def parse_shapes(text: str, all_shapes: list[tuple[int, int, int]] = SHAPES):
    """ "SxCxDOCS,..." -> shapes; "all" -> `all_shapes`."""
    if text == "all":
        return list(all_shapes)
    shapes = []
    for item in text.split(","):
        try:
            S, C, docs = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"shape {item!r} is not SxCxDOCS") from None
        if S < 1 or C < 8 or C % 8 or not 1 <= docs <= S:
            raise argparse.ArgumentTypeError(
                f"shape {item!r}: need S >= 1, C a multiple of 8, 1 <= docs <= S"
            )
        shapes.append((S, C, docs))
    return shapes


def shape_label(shape: tuple[int, int, int]) -> str:
    return "x".join(map(str, shape))


def within_budget(
    shapes: Iterable[tuple[int, int, int]], seconds: float | None, skipped: list[str]
) -> Iterator[tuple[int, int, int]]:
    """Yields the shapes, the first always, the others while `seconds` (None: no
    limit) have not passed since the first began; the labels of those left out go to
    `skipped`."""
    start = time.monotonic()
    for i, shape in enumerate(shapes):
        if i and seconds is not None and time.monotonic() - start > seconds:
            skipped.append(shape_label(shape))
            continue
        yield shape

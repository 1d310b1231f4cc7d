# SPDX-License-Identifier: Apache-2.0
"""Randomized GPU tests: hypothesis draws shapes, document patterns, routes and dirty
buffers, and every output is checked against the float64 reference (cake_testing).

- S and C: C a multiple of 8 up to 9000 (small ones, the edges of the kernels' channel
  blocks and random ones), S up to 2**21 // C tokens;
- documents: none or only empty ones, many of 0-3 tokens, one long one among short
  ones, or random cuts;
- every route, [S, C] or [1, S, C] input;
- outputs and workspaces preallocated dirty (NaN, random bits or huge values; the
  backward workspace a slice of one buffer that every example reuses, so it holds what
  earlier calls of other shapes and routes left) or not passed at all.

About 400 examples, derandomized (the same ones every run) and without a deadline:
about a minute on an H200. Failing examples are reported as found (no shrinking,
which would cost GPU time). The module is skipped where hypothesis is not installed;
scripts/setup.sh installs it.
"""

import cake
import pytest
import torch
from cake_testing import (
    ROUTES,
    assert_outputs,
    make_case,
    make_extreme_case,
    requires_cake_gpu,
    route_id,
    run_case,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = [pytest.mark.gpu, requires_cake_gpu]

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Largest S * C of an example: keeps the float64 reference quick.
MAX_ELEMENTS = 2**21
#: Channel counts around the kernels' tiles: 8 channels a thread, 128 threads a block.
EDGE_CHANNELS = [8, 16, 24, 40, 120, 128, 136, 1016, 1024, 1032, 4096, 8184, 8192, 8200, 9000]

channels = st.one_of(st.sampled_from(EDGE_CHANNELS), st.integers(1, 9000 // 8).map(lambda k: 8 * k))


@st.composite
def documents(draw, max_tokens: int) -> list[int]:
    """Document lengths of one of the patterns of the module docstring."""
    pattern = draw(st.sampled_from(["empty", "short", "one-long", "random"]))
    note(f"documents: {pattern}")
    if pattern == "empty":
        return draw(st.lists(st.just(0), max_size=3))
    short = st.lists(st.integers(0, 3), max_size=min(300, max_tokens // 3))
    if pattern == "short":
        return draw(short)
    if pattern == "one-long":
        before, after = draw(short), draw(short)
        room = max_tokens - sum(before) - sum(after)
        if room < 1:
            return before
        return before + [draw(st.integers(1, room))] + after
    S = draw(st.integers(1, max_tokens))
    cuts = draw(st.lists(st.integers(0, S), max_size=60))
    bounds = [0, *sorted(cuts), S]
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


@st.composite
def dirty(draw, like: torch.Tensor | None) -> torch.Tensor | None:
    """A buffer like ``like`` (on its device) full of garbage, or None."""
    if like is None:
        return None
    fill = draw(st.sampled_from(["nan", "bits", "huge"]))
    if fill == "nan":
        return torch.full_like(like, float("nan"))
    if fill == "huge":
        return torch.full_like(like, -3e38)
    gen = torch.Generator(device=like.device).manual_seed(draw(st.integers(0, 2**31 - 1)))
    nbytes = like.numel() * like.element_size()
    bits = torch.randint(0, 256, (nbytes,), generator=gen, dtype=torch.uint8, device=like.device)
    return bits.view(like.dtype).view(like.shape)


_shared_workspace = {}


def dirty_workspace(need: int, scribble: bool, seed: int) -> torch.Tensor:
    """A 16-byte aligned slice of ``need`` bytes of one buffer that every example reuses
    (grown when too small), full of what earlier calls left; ``scribble`` adds garbage."""
    buffer = _shared_workspace.get("buffer")
    if buffer is None or buffer.numel() < need:
        buffer = torch.empty(max(need, 1 << 20), dtype=torch.uint8, device="cuda")
        buffer.fill_(0xFF)
        _shared_workspace["buffer"] = buffer
    if scribble:
        gen = torch.Generator(device="cuda").manual_seed(seed)
        buffer.random_(0, 256, generator=gen)
    return buffer[:need]


def run_and_check(case, data) -> None:
    """Forward and backward of ``case``, with buffers drawn from ``data``, against the
    reference."""
    note(
        f"S={case.S} C={case.C} docs={case.cu_host.tolist()[:12]}... "
        f"weight={case.weight.dtype} bias={None if case.bias is None else case.bias.dtype} "
        f"policy={case.policy} shape={list(case.x.shape)}"
    )
    preallocate = data.draw(st.booleans(), label="preallocate")
    y = dx = dweight = dbias = workspace = forward_workspace = None
    if preallocate:
        y, dx = data.draw(dirty(case.x)), data.draw(dirty(case.x))
        dweight, dbias = data.draw(dirty(case.weight)), data.draw(dirty(case.bias))
        need = cake.cake_causal_conv1d_train_backward_workspace_bytes(case.S, case.C, "cuda")
        workspace = dirty_workspace(
            need, data.draw(st.booleans()), data.draw(st.integers(0, 2**31 - 1))
        )
        # The forward's workspace is unused (0 bytes needed) but may be any int32 size.
        size = data.draw(st.integers(0, 64))
        forward_workspace = torch.full((size,), -1, dtype=torch.int32, device="cuda")
    got_y, *got = run_case(
        case,
        y=y,
        dx=dx,
        dweight=dweight,
        dbias=dbias,
        workspace=workspace,
        forward_workspace=forward_workspace,
    )
    if preallocate:
        assert got_y is y and got[0] is dx and got[1] is dweight and got[2] is dbias
    assert_outputs(case, y=got_y, dx=got[0], dweight=got[1], dbias=got[2])


@st.composite
def shapes(draw, min_channels: int = 8) -> tuple[list[int], int]:
    C = draw(channels.filter(lambda c: c >= min_channels))
    return draw(documents(max(1, MAX_ELEMENTS // C))), C


@settings(max_examples=320, **SETTINGS)
@given(
    shape=shapes(),
    route=st.sampled_from(ROUTES),
    batch_dim=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_random_cases_match_reference(shape, route, batch_dim, seed, data):
    lengths, C = shape
    bias_dtype, weight_dtype, policy = route
    note(f"route {route_id(route)}")
    case = make_case(
        lengths,
        C,
        weight_dtype=weight_dtype,
        bias_dtype=bias_dtype,
        policy=policy,
        seed=seed,
        batch_dim=batch_dim,
    )
    run_and_check(case, data)


@settings(max_examples=80, **SETTINGS)
@given(
    shape=shapes(min_channels=16),
    route=st.sampled_from(ROUTES),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_random_extreme_cases_match_reference(shape, route, seed, data):
    # make_extreme_case: |pre| up to 1e4, the exp-underflow band, +-inf and NaN in x.
    lengths, C = shape
    bias_dtype, weight_dtype, policy = route
    note(f"route {route_id(route)}")
    case = make_extreme_case(
        lengths, C, weight_dtype=weight_dtype, bias_dtype=bias_dtype, policy=policy, seed=seed
    )
    run_and_check(case, data)

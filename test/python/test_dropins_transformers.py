# SPDX-License-Identifier: Apache-2.0
"""cake.integrations.use_in_transformers without a GPU: which names it switches and
restores, the fallback and strict modes, the hook's arguments, and the training test
of test_gpu_dropins.py with the float64 reference standing in for the kernels.

Needs transformers (the `test` extra); skipped without it."""

import warnings

import cake.dropins
import cake.integrations
import pytest
import torch
from dropins_testing import (
    FAMILIES,
    assert_cake_trains_like_the_model,
    reference_cake_causal_conv1d,
    transformers_module,
)

pytest.importorskip("transformers")

BF16 = torch.bfloat16


@pytest.fixture
def reference_kernels(monkeypatch):
    """The switch sends every call to the drop-in, which runs on the float64 reference."""
    monkeypatch.setattr(cake.dropins, "cake_causal_conv1d", reference_cake_causal_conv1d)
    monkeypatch.setattr(cake.integrations, "_device_problem", lambda device: None)


def test_switch_replaces_and_restores_the_hooks():
    modules = {f: transformers_module(f) for f in FAMILIES}
    before = {f: m.causal_conv1d_fn for f, m in modules.items()}
    fused_before = modules["mamba2"].mamba2_split_conv1d_scan_combined
    with cake.integrations.use_in_transformers() as switch:
        assert set(FAMILIES) <= set(switch.models)
        assert set(switch.models) <= set(cake.integrations.TRANSFORMERS_MODELS)
        for family, module in modules.items():
            assert module.causal_conv1d_fn is not before[family]
            assert module.causal_conv1d_fn.cake_original is before[family]
        assert modules["mamba2"].mamba2_split_conv1d_scan_combined(1, x=2) is None
    assert switch.models == []
    for family, module in modules.items():
        assert module.causal_conv1d_fn is before[family]
    assert modules["mamba2"].mamba2_split_conv1d_scan_combined is fused_before


def test_undo_restores_nested_switches_in_order():
    module = transformers_module("qwen3_next")
    own = module.causal_conv1d_fn
    first = cake.integrations.use_in_transformers()
    second = cake.integrations.use_in_transformers(strict=True)
    assert module.causal_conv1d_fn.cake_original.cake_original is own
    second.undo()
    first.undo()
    assert module.causal_conv1d_fn is own


def hook_args(channels=16, seqlen=7, dtype=BF16):
    """A transformers-style call: x [B, D, T] channel-last, weight [D, 4], bias [D]."""
    torch.manual_seed(0)
    x = torch.randn(2, seqlen, channels).to(dtype).transpose(1, 2)
    return x, torch.randn(channels, 4).to(dtype), torch.randn(channels).to(dtype)


def test_fallback_serves_what_cake_cannot_with_a_warning():
    module = transformers_module("mamba2")
    x, weight, bias = hook_args()
    want = module.causal_conv1d_fn(x, weight, bias, activation="silu")
    with cake.integrations.use_in_transformers():
        # A device that cannot run the kernels.
        meta = [t.to("meta") for t in (x, weight, bias)]
        with pytest.warns(
            UserWarning, match="mamba2 runs this .* own implementation: cake: .*meta"
        ):
            got = module.causal_conv1d_fn(*meta, activation="silu")
        assert got.device.type == "meta" and got.shape == want.shape
        # A channel-first x (generation's cache prefill pads one) or fp32 ones too.
        for args in ((x.contiguous(), weight, bias), hook_args(dtype=torch.float32)):
            with pytest.warns(UserWarning, match="own implementation: cake: x must"):
                module.causal_conv1d_fn(*args, activation="silu")


def test_strict_raises_the_drop_ins_errors():
    module = transformers_module("qwen3_next")
    x, weight, _ = hook_args()
    with cake.integrations.use_in_transformers(strict=True), warnings.catch_warnings():
        warnings.simplefilter("error")  # strict never falls back
        with pytest.raises(ValueError, match="cake: x must be channel-last"):
            module.causal_conv1d_fn(x.contiguous(), weight, None, activation="silu")
        with pytest.raises(ValueError, match="cake: activation must be"):
            module.causal_conv1d_fn(x, weight, None, activation=None)


def test_hook_passes_seq_idx_and_drops_the_model_kwargs(monkeypatch, reference_kernels):
    seen = []

    def spy(x, weight, bias=None, seq_idx=None, activation=None):
        seen.append((x, weight, bias, seq_idx, activation))
        return x

    monkeypatch.setattr(cake.dropins, "causal_conv1d_fn", spy)
    module = transformers_module("mamba2")
    x, weight, bias = hook_args()
    seq_idx = torch.zeros(2, 7, dtype=torch.int32)
    with cake.integrations.use_in_transformers(strict=True):
        module.causal_conv1d_fn(
            x,
            weight=weight,
            bias=bias,
            activation="silu",
            seq_idx=seq_idx,
            cu_seq_lens_q=torch.tensor([0, 7]),
            position_ids=torch.arange(7),
        )
        module.causal_conv1d_fn(x, weight, None, activation="swish")
    assert [s[1:] for s in seen[:1]] == [(weight, bias, seq_idx, "silu")]
    assert seen[1][2:] == (None, None, "swish")


@pytest.mark.parametrize("family", FAMILIES)
def test_training_matches_the_model_on_the_reference(family, monkeypatch, reference_kernels):
    # The CPU twin of test_gpu_dropins.py's training test: the same models, steps,
    # counts and tolerances, on the float64 reference.
    assert_cake_trains_like_the_model(family, "cpu", monkeypatch)

"""Every preset and every ablation-group option composes through Hydra and builds a model."""

from __future__ import annotations

import itertools

import pytest
import torch
from hydra.errors import ConfigCompositionException

from gptlab.compose import CONF_DIR, compose_config
from gptlab.config import TrainConfig
from gptlab.model import GPT, GPTConfig

PRESETS = sorted(p.stem for p in CONF_DIR.glob("model/*.yaml"))


def _compose(*overrides: str) -> TrainConfig:
    return compose_config(overrides)


def test_the_issue_presets_exist() -> None:
    wanted = {
        "pre_rmsnorm_swiglu",
        "pre_layernorm_gelu",
        "post_layernorm_gelu",
        "post_rmsnorm_swiglu",
        "sandwich_rmsnorm_swiglu",
        "deepnorm_layernorm_gelu",
        "gpt2",
        "llama_125m",
    }
    assert wanted <= set(PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_and_builds(preset: str) -> None:
    cfg = _compose(f"model={preset}")
    assert isinstance(cfg.model, GPTConfig)
    with torch.device("meta"):  # GPU-sized presets: count, don't allocate
        model = GPT(cfg.model)
    assert model.num_params() > 0
    assert (model.lm_head.weight is model.tok_emb.weight) == cfg.model.tie_embeddings


def test_default_is_pre_rmsnorm_swiglu_tied() -> None:
    m = _compose().model
    assert (m.norm_placement, m.norm, m.ffn, m.tie_embeddings) == ("pre", "rmsnorm", "swiglu", True)


def test_gpt2_preset_shape() -> None:
    m = _compose("model=gpt2").model
    assert (m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size) == (12, 12, 768, 1024, 50257)
    assert (m.pos_emb, m.norm, m.ffn, m.bias, m.tie_embeddings) == (
        "learned",
        "layernorm",
        "gelu_tanh",
        True,
        True,
    )
    with torch.device("meta"):
        n = GPT(m).num_params()
    assert 124e6 < n < 125e6  # GPT-2 small: 124M with tied embeddings


@pytest.mark.parametrize(
    "placement,ffn,tying",
    list(itertools.product(["pre", "post"], ["swiglu", "gelu"], ["tied", "untied"])),
)
def test_the_eight_group_combinations(placement: str, ffn: str, tying: str) -> None:
    m = _compose(f"model/placement={placement}", f"model/ffn={ffn}", f"model/tying={tying}").model
    assert (m.norm_placement, m.ffn, m.tie_embeddings) == (placement, ffn, tying == "tied")
    assert m.hidden_dim == (4 * m.n_embd if ffn == "gelu" else 384)  # 8/3·128 → multiple of 64


def test_group_switch_on_another_preset_keeps_its_other_choices() -> None:
    m = _compose("model=post_layernorm_gelu", "model/placement=deepnorm").model
    assert (m.norm_placement, m.norm, m.ffn, m.depth_scaled_init) == (
        "deepnorm",
        "layernorm",
        "gelu",
        "none",
    )


def test_direct_field_overrides() -> None:
    cfg = _compose("model.n_layer=24", "optim.warmup_steps=0")
    assert cfg.model.n_layer == 24 and cfg.optim.warmup_steps == 0


@pytest.mark.parametrize(
    "override",
    ["model.n_layr=3", "model.n_layer=abc", "trainer.devces=2", "model=nonexistent_preset"],
)
def test_unknown_key_wrong_type_or_preset_fail_at_compose(override: str) -> None:
    with pytest.raises(ConfigCompositionException):
        _compose(override)


def test_invalid_value_names_field_and_accepted_values() -> None:
    with pytest.raises(ValueError, match=r"model.norm_placement='middle'.*pre, post, sandwich, deepnorm"):
        _compose("model.norm_placement=middle")

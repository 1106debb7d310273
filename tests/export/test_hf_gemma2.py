"""Gemma 2 export (issue 46 item 5): transformers' Gemma2ForCausalLM reproduces a sandwich-norm GPT
with soft caps and local/global windows, an import round-trips, and what does not map is refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from gptlab.export import check_exportable, export_hf, gpt_from_hf, init_config, init_from_hf, load_hf_config
from gptlab.model import GPT, GPTConfig

from .test_hf import documented_line, export_cli

GEMMA: dict[str, Any] = dict(
    n_layer=2, n_embd=32, n_head=4, vocab_size=64, block_size=32, norm_placement="sandwich", ffn="geglu"
)
VARIANTS: dict[str, dict[str, Any]] = {
    # tied, GQA, layer 0 local (window 4 < T = 16), layer 1 global, caps small enough to bite
    "tied_windows_caps": {
        "ffn": "geglu_tanh",  # Gemma's own gelu_pytorch_tanh
        "n_kv_head": 2,
        "window": 4,
        "window_pattern": "SL",
        "attn_softcap": 2.0,
        "logit_softcap": 3.0,
    },
    # untied exact GeGLU, a head width other than d/h, every layer local, another θ and ε
    "untied_geglu_all_local": {
        "tie_embeddings": False,
        "attn_head_dim": 12,
        "window": 5,
        "rope_theta": 500.0,
        "norm_eps": 1e-6,
        "logit_softcap": 4.0,
    },
    "swiglu_mqa_global": {"ffn": "swiglu", "n_kv_head": 1},
}


def make_model(overrides: dict[str, Any]) -> GPT:
    """A small sandwich GPT, every parameter (norm gains too) moved off its init, in eval mode."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**GEMMA | overrides))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_transformers_gemma2_reproduces_exported_logits(name: str, tmp_path: Path) -> None:
    model = make_model(VARIANTS[name])
    assert check_exportable(model.cfg) == "gemma2"
    out = export_hf(model, tmp_path / name)
    # eager: transformers' SDPA path takes no soft cap
    hf, info = AutoModelForCausalLM.from_pretrained(
        out, attn_implementation="eager", dtype=torch.float32, output_loading_info=True
    )
    assert {k: v for k, v in info.items() if v} == {}, info
    assert type(hf).__name__ == "Gemma2ForCausalLM"
    idx = torch.randint(0, GEMMA["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = model(idx), hf.eval()(idx).logits
    assert ours.abs().max() > 1.0
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)
    config = json.loads((Path(out) / "config.json").read_text())
    assert config["query_pre_attn_scalar"] == model.cfg.head_dim
    back = gpt_from_hf(out)
    assert back.cfg == model.cfg  # the config read back is the one exported
    with torch.no_grad():
        torch.testing.assert_close(back(idx), ours, rtol=0, atol=1e-5)
        if model.cfg.window is not None:  # the window bites: all-global weights give other logits
            wide = GPT(replace(back.cfg, window=None, window_pattern=None))
            wide.load_state_dict(back.state_dict())
            assert (wide.eval()(idx) - ours).abs().max() > 1e-3


def test_layer_types_follow_the_window_pattern(tmp_path: Path) -> None:
    """gptlab's layer i is local when pattern[i % len] is S; Gemma 2's own default alternates from 0."""
    model = make_model({"n_layer": 4, "window": 4, "window_pattern": "LSS"})
    config = json.loads((Path(export_hf(model, tmp_path / "m")) / "config.json").read_text())
    local, full = "sliding_attention", "full_attention"
    assert config["layer_types"] == [full, local, local, full] and config["sliding_window"] == 4
    back = load_hf_config(tmp_path / "m")
    assert (back.window, back.window_pattern) == (4, "LSS")


REFUSED = [
    (
        {"ffn": "gelu"},
        "model.ffn='gelu' cannot be expressed by Gemma2ForCausalLM (its MLP is gated: "
        "act(gate_proj(x))·up_proj(x)); accepted: 'geglu_tanh' or 'geglu' or 'swiglu' or 'reglu'",
    ),
    (
        {"norm": "layernorm"},
        "model.norm='layernorm' cannot be expressed by Gemma2ForCausalLM (it normalises with RMSNorm); "
        "accepted: 'rmsnorm'",
    ),
    (
        {"attn_gate": "headwise"},
        "model.attn_gate='headwise' cannot be expressed by Gemma2ForCausalLM (no gate on the attention "
        "output); accepted: 'none'",
    ),
    (
        {"qk_norm": True},
        "model.qk_norm=True cannot be expressed by Gemma2ForCausalLM (it does not normalise queries and "
        "keys); accepted: False",
    ),
    (
        {"rope_fraction": 0.5},
        "model.rope_fraction=0.5 cannot be expressed by Gemma2ForCausalLM (its RoPE rotates every head "
        "dimension); accepted: 1.0",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), REFUSED)
def test_what_gemma2_lacks_is_refused_in_one_line(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(**GEMMA | overrides))
    assert str(err.value) == message


def test_pre_norm_caps_point_at_gemma2() -> None:
    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(**GEMMA | {"norm_placement": "pre", "attn_softcap": 50.0}))
    assert str(err.value) == (
        "model.attn_softcap=50.0 cannot be expressed by LlamaForCausalLM or GPT2LMHeadModel (no cap on "
        "the attention logits; Gemma2ForCausalLM has it, with model.norm_placement='sandwich'); "
        "accepted: None"
    )


def test_cli_refuses_an_unmappable_sandwich_model_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    model = make_model({"ffn": "relu"})
    torch.save({"model_config": model.cfg.to_dict(), "state_dict": model.state_dict()}, tmp_path / "m.ckpt")
    monkeypatch.chdir(tmp_path)
    assert export_cli().main(["ckpt_path=m.ckpt", "out_dir=hf"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [documented_line("model.norm_placement=sandwich model.ffn=relu")]
    assert not (tmp_path / "hf").exists()
    model = make_model({})  # the same run with GeGLU: written, as Gemma 2
    torch.save({"model_config": model.cfg.to_dict(), "state_dict": model.state_dict()}, tmp_path / "m.ckpt")
    assert export_cli().main(["ckpt_path=m.ckpt", "out_dir=hf"]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["Gemma2ForCausalLM"] and config["hidden_activation"] == "gelu"


def test_a_gemma2_config_gptlab_cannot_run_is_refused(tmp_path: Path) -> None:
    """Gemma 2's own default query_pre_attn_scalar (256) is not this head width: refused by name."""
    model = make_model({})
    out = Path(export_hf(model, tmp_path / "m"))
    config = json.loads((out / "config.json").read_text())
    del config["query_pre_attn_scalar"]  # transformers' default applies
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as err:
        load_hf_config(out)
    line = documented_line("test_a_gemma2_config_gptlab_cannot_run_is_refused").removeprefix("error: ")
    assert str(err.value) == line.replace("<dir>", str(out))
    config["query_pre_attn_scalar"], config["hidden_activation"] = 8, "gelu_new"
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"hidden_activation='gelu_new' is no gated FFN"):
        load_hf_config(out)


def test_init_from_a_gemma2_dir_keeps_its_caps_and_windows(tmp_path: Path) -> None:
    model = make_model(VARIANTS["tied_windows_caps"] | {"n_layer": 4})
    out = export_hf(model, tmp_path / "m")
    cfg = init_config(out, GPTConfig(**GEMMA | {"block_size": 16}))
    assert (cfg.attn_softcap, cfg.logit_softcap, cfg.window, cfg.window_pattern) == (2.0, 3.0, 4, "SL")
    fresh = GPT(cfg)
    init_from_hf(fresh, out)
    idx = torch.randint(0, GEMMA["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(fresh.eval()(idx), model(idx), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"model.attn_softcap=None \(checkpoint: 2.0\).*windows"):
        init_from_hf(GPT(GPTConfig(**GEMMA | {"n_layer": 4, "n_kv_head": 2})), out)

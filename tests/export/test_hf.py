"""Hugging Face interop: transformers reproduces gptlab's logits, and imports round-trip."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models
from torch.utils.data import DataLoader, TensorDataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

from gptlab.checkpoints import load_gpt
from gptlab.export import (
    check_exportable,
    export_hf,
    gpt_from_hf,
    init_config,
    init_from_hf,
    load_hf,
    load_hf_config,
)
from gptlab.model import GPT, GPTConfig

REPO = Path(__file__).resolve().parents[2]
SMALL: dict[str, Any] = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=256, block_size=64)
GPT2_SHAPE: dict[str, Any] = dict(norm="layernorm", ffn="gelu_tanh", pos_emb="learned", bias=True)
# name -> (GPTConfig overrides, expected target)
VARIANTS: dict[str, tuple[dict[str, Any], str]] = {
    "llama_tied": ({}, "llama"),
    "llama_untied": ({"tie_embeddings": False}, "llama"),
    "llama_gqa": ({"n_kv_head": 2, "tie_embeddings": False}, "llama"),  # num_key_value_heads=2
    "llama_mqa": ({"n_kv_head": 1}, "llama"),
    "llama_bias_wide": (
        {"bias": True, "ffn_hidden": 96, "rope_theta": 500.0, "norm_eps": 1e-6, "dropout": 0.1},
        "llama",
    ),
    "gpt2": (GPT2_SHAPE, "gpt2"),
    "gpt2_n_inner": (GPT2_SHAPE | {"ffn_hidden": 96, "dropout": 0.1}, "gpt2"),
}
ATOL_HF = 1e-4  # a different implementation (Conv1D, gelu_new, rotary matmul) of the same maths
ATOL_ROUND_TRIP = 1e-6


def perturb(module: torch.nn.Module, scale: float = 0.1) -> None:
    """Move every parameter (norm gains and biases too) off its init, so a mis-mapped one shows."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn_like(p))


def make_model(overrides: dict[str, Any], seed: int = 0) -> GPT:
    """A small GPT with every parameter randomly perturbed, in eval mode."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**SMALL | overrides))
    perturb(model)
    return model.eval()


def tokens(length: int = 64, seed: int = 1) -> torch.Tensor:
    """Random token ids over the whole vocabulary."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, SMALL["vocab_size"], (3, length), generator=g)


def load_transformers(path: Path) -> torch.nn.Module:
    """transformers' own loader in float32 eval mode, failing on any unused or missing tensor."""
    model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
    assert {k: v for k, v in info.items() if v} == {}, info
    return model.float().eval()


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> tuple[str, GPT, str]:
    """(name, perturbed model, expected target) for each exportable shape."""
    overrides, target = VARIANTS[request.param]
    return request.param, make_model(overrides), target


# --------------------------------------------------------------------------------- export


def test_transformers_reproduces_exported_logits(variant, tmp_path: Path) -> None:
    name, model, target = variant
    assert check_exportable(model.cfg) == target
    out = export_hf(model, tmp_path / name)
    hf = load_transformers(Path(out))
    assert type(hf).__name__ == {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel"}[target]
    idx = tokens()
    with torch.no_grad():
        ours, theirs = model(idx), hf(idx).logits
    assert ours.abs().max() > 1.0  # the comparison is not between two near-zero tensors
    torch.testing.assert_close(theirs, ours, rtol=0, atol=ATOL_HF)
    head, emb = hf.get_output_embeddings().weight, hf.get_input_embeddings().weight
    assert (head.data_ptr() == emb.data_ptr()) == model.cfg.tie_embeddings


def test_exported_files_follow_hf_layout(tmp_path: Path) -> None:
    tied, untied = make_model({}), make_model({"tie_embeddings": False})
    gpt2 = make_model(GPT2_SHAPE)
    t = load_file(Path(export_hf(tied, tmp_path / "tied")) / "model.safetensors")
    u = load_file(Path(export_hf(untied, tmp_path / "untied")) / "model.safetensors")
    g = load_file(Path(export_hf(gpt2, tmp_path / "gpt2")) / "model.safetensors")
    assert "lm_head.weight" not in t and "model.embed_tokens.weight" in t  # stored once, as HF does
    torch.testing.assert_close(u["lm_head.weight"], untied.lm_head.weight, rtol=0, atol=0)
    assert "lm_head.weight" not in g
    assert g["transformer.h.0.attn.c_attn.weight"].shape == (64, 192)  # Conv1D: (in, out), q|k|v
    torch.testing.assert_close(
        g["transformer.h.1.mlp.c_fc.weight"], gpt2.blocks[1].ffn.up_proj.weight.t(), rtol=0, atol=0
    )
    config = json.loads((tmp_path / "gpt2" / "config.json").read_text())
    assert config["activation_function"] == "gelu_new" and config["n_inner"] is None
    assert config["architectures"] == ["GPT2LMHeadModel"] and config["tie_word_embeddings"]
    config = json.loads((tmp_path / "untied" / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is False
    assert config["intermediate_size"] == untied.cfg.hidden_dim and config["head_dim"] == 16


REFUSED = [
    ({"norm_placement": "post"}, "norm_placement='post'", "'pre'"),
    # sandwich with any of these is Gemma 2's, refused by its own rules (test_hf_gemma2.py)
    (
        {"norm_placement": "sandwich", "ffn": "gelu"},
        "ffn='gelu'",
        "'geglu_tanh' or 'geglu' or 'swiglu' or 'reglu'",
    ),
    (
        {"norm_placement": "deepnorm", "depth_scaled_init": "none"},
        "norm_placement='deepnorm'",
        "'pre'",
    ),
    ({"ffn": "relu"}, "ffn='relu'", "'swiglu'"),
    ({"ffn": "reglu"}, "ffn='reglu'", "'swiglu'"),
    ({"ffn": "geglu"}, "ffn='geglu'", "'swiglu'"),
    ({"norm": "layernorm"}, "norm='layernorm'", "'rmsnorm'"),
    ({"pos_emb": "learned"}, "pos_emb='learned'", "'rope'"),
    (GPT2_SHAPE | {"ffn": "gelu"}, "ffn='gelu'", "'gelu_tanh'"),
    (GPT2_SHAPE | {"ffn": "relu"}, "ffn='relu'", "'gelu_tanh'"),
    (GPT2_SHAPE | {"norm": "rmsnorm"}, "norm='rmsnorm'", "'layernorm'"),
    (GPT2_SHAPE | {"bias": False}, "bias=False", "True"),
    (GPT2_SHAPE | {"tie_embeddings": False}, "tie_embeddings=False", "True"),
    (GPT2_SHAPE | {"pos_emb": "rope"}, "pos_emb='rope'", "'learned'"),
    (GPT2_SHAPE | {"n_kv_head": 2}, "n_kv_head=2", "None"),
    # issue 46: neither target has these (transformers 5.25's Llama rotates every head dimension)
    ({"pos_emb": "none"}, "pos_emb='none'", "'rope'"),
    ({"rope_fraction": 0.5}, "rope_fraction=0.5", "1.0"),
    ({"nope_every": 4}, "nope_every=4", "None"),
    ({"attn_gate": "headwise"}, "attn_gate='headwise'", "'none'"),
    ({"attn_softcap": 50.0}, "attn_softcap=50.0", "None"),
    ({"logit_softcap": 30.0}, "logit_softcap=30.0", "None"),
    ({"window": 32}, "window=32", "None"),  # Gemma 2 has windows, with sandwich norms
]


@pytest.mark.parametrize(("overrides", "named", "accepted"), REFUSED)
def test_refused_variants_name_the_field(
    overrides: dict[str, Any], named: str, accepted: str, tmp_path: Path
) -> None:
    cfg = GPTConfig(**SMALL | overrides)
    with pytest.raises(ValueError, match="cannot be expressed") as err:
        check_exportable(cfg)
    message = str(err.value)
    assert f"model.{named}" in message and f"accepted: {accepted}" in message
    with pytest.raises(ValueError, match=named.split("=")[0]):
        export_hf(GPT(cfg), tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_dropout_and_sizes_do_not_block_export() -> None:
    assert check_exportable(GPTConfig(**SMALL | {"dropout": 0.2, "ffn_hidden": 100})) == "llama"
    cfg = GPTConfig(**SMALL | GPT2_SHAPE | {"dropout": 0.2, "ffn_hidden": 100})
    assert check_exportable(cfg) == "gpt2"


def test_export_works_without_transformers(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "from gptlab.model import GPT, GPTConfig\n"
        "from gptlab.export import export_hf, gpt_from_hf\n"
        f"cfg = GPTConfig(n_layer=1, n_embd=32, n_head=2, vocab_size=64, block_size=16)\n"
        f"gpt_from_hf(export_hf(GPT(cfg), {str(tmp_path / 'out')!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_tokenizer_json_is_shipped(tmp_path: Path) -> None:
    vocab = {f"t{i}": i for i in range(255)} | {"<|endoftext|>": 255}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.add_special_tokens(["<|endoftext|>"])
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    out = Path(export_hf(make_model(GPT2_SHAPE), tmp_path / "out", tmp_path / "tok"))
    shipped = (out / "tokenizer.json").read_bytes()
    assert shipped == (tmp_path / "tok" / "tokenizer.json").read_bytes()
    config = json.loads((out / "config.json").read_text())
    assert config["eos_token_id"] == config["bos_token_id"] == 255
    hf_tok = AutoTokenizer.from_pretrained(out)
    assert hf_tok.eos_token == "<|endoftext|>"
    assert hf_tok("t7")["input_ids"] == [7]


def test_missing_tokenizer_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="tokenizer_dir="):
        export_hf(make_model({}), tmp_path / "out", tmp_path / "nowhere")


# --------------------------------------------------------------------------------- import


def test_import_of_export_round_trips(variant, tmp_path: Path) -> None:
    name, model, _ = variant
    out = export_hf(model, tmp_path / name)
    cfg, state = load_hf(out)
    assert cfg == model.cfg
    assert set(state) == set(model.state_dict())
    back = gpt_from_hf(out)
    assert (back.lm_head.weight is back.tok_emb.weight) == model.cfg.tie_embeddings
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(back(idx), model(idx), rtol=0, atol=ATOL_ROUND_TRIP)


def test_load_hf_config_reads_no_weights(tmp_path: Path) -> None:
    model = make_model(GPT2_SHAPE | {"ffn_hidden": 96})
    out = Path(export_hf(model, tmp_path / "out"))
    (out / "model.safetensors").unlink()
    assert load_hf_config(out) == model.cfg


def test_init_from_hf_fills_an_existing_model(tmp_path: Path) -> None:
    source = make_model({})
    out = export_hf(source, tmp_path / "out")
    target = make_model({}, seed=7)
    init_from_hf(target, out)
    assert target.lm_head.weight is target.tok_emb.weight  # tying survives the load
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(target(idx), source(idx), rtol=0, atol=ATOL_ROUND_TRIP)


def test_init_from_a_grouped_query_llama_dir_round_trips(tmp_path: Path) -> None:
    """transformers' own GQA Llama (8 query heads, 2 key/value heads) -> model.init_from's config
    and weights -> export -> transformers again: the same logits at every hop."""
    torch.manual_seed(5)
    llama = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    hf = LlamaForCausalLM(llama)
    perturb(hf)
    hf.eval().save_pretrained(tmp_path / "hf")
    cfg = init_config(tmp_path / "hf", GPTConfig(**SMALL))  # the base's n_head / n_kv_head do not matter
    assert (cfg.n_head, cfg.n_kv_head) == (8, 2)
    model = GPT(cfg).eval()
    assert model.blocks[0].attn.k_proj.weight.shape == (16, 64)
    init_from_hf(model, tmp_path / "hf")
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf(idx).logits, rtol=0, atol=ATOL_HF)
    out = Path(export_hf(model, tmp_path / "back"))
    assert json.loads((out / "config.json").read_text())["num_key_value_heads"] == 2
    again = load_transformers(out)
    with torch.no_grad():
        torch.testing.assert_close(again(idx).logits, hf(idx).logits, rtol=0, atol=ATOL_HF)
    with pytest.raises(ValueError, match=r"model\.n_kv_head=None gives 8 key/value heads \(checkpoint: 2\)"):
        init_from_hf(GPT(replace(cfg, n_kv_head=None)), tmp_path / "hf")


def test_init_from_hf_allows_a_shorter_learned_context(tmp_path: Path) -> None:
    source = make_model(GPT2_SHAPE)
    out = export_hf(source, tmp_path / "out")
    target = GPT(GPTConfig(**SMALL | GPT2_SHAPE | {"block_size": 32})).eval()
    init_from_hf(target, out)
    idx = tokens(32)
    with torch.no_grad():
        torch.testing.assert_close(target(idx), source(idx), rtol=0, atol=ATOL_ROUND_TRIP)


def test_init_from_hf_names_each_mismatch(tmp_path: Path) -> None:
    out = export_hf(make_model({}), tmp_path / "out")
    target = GPT(GPTConfig(**SMALL | {"n_layer": 3, "ffn_hidden": 128, "tie_embeddings": False}))
    with pytest.raises(ValueError) as err:
        init_from_hf(target, out)
    message = str(err.value)
    for named in ("model.n_layer=3", "model.ffn_hidden=128", "model.tie_embeddings=False"):
        assert named in message
    assert "n_head" not in message


@pytest.mark.parametrize("arch", ["llama_tied", "llama_untied", "llama_gqa", "gpt2"])
def test_import_of_transformers_own_checkpoint(arch: str, tmp_path: Path) -> None:
    torch.manual_seed(3)
    if arch == "gpt2":
        hf = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=64))
    else:
        llama = LlamaConfig(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=160,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2 if arch == "llama_gqa" else 4,
            max_position_embeddings=64,
            tie_word_embeddings=arch == "llama_tied",
        )
        hf = LlamaForCausalLM(llama)
    perturb(hf)
    hf.eval()
    hf.save_pretrained(tmp_path, max_shard_size="100KB")  # sharded: exercises the index file
    assert (tmp_path / "model.safetensors.index.json").is_file()
    model = gpt_from_hf(tmp_path)
    assert model.cfg.kv_heads == (2 if arch == "llama_gqa" else 4)
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf(idx).logits, rtol=0, atol=ATOL_HF)


def test_import_of_original_gpt2_layout(tmp_path: Path) -> None:
    """The hub's 'gpt2': a pytorch_model.bin from the bare model, with causal-mask buffers."""
    source = make_model(GPT2_SHAPE)
    out = Path(export_hf(source, tmp_path / "out"))
    tensors = load_file(out / "model.safetensors")
    legacy = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    for i in range(source.cfg.n_layer):
        legacy[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 64, 64))
        legacy[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    (out / "model.safetensors").unlink()
    torch.save(legacy, out / "pytorch_model.bin")
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(gpt_from_hf(out)(idx), source(idx), rtol=0, atol=0)


def test_load_hf_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.*not a directory"):
        load_hf(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_hf(tmp_path / "empty")
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="model_type='bert' is not supported; accepted: llama, gpt2"):
        load_hf(tmp_path / "bert")
    out = Path(export_hf(make_model({}), tmp_path / "out"))
    (out / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_hf(out)


def edited_checkpoint(tmp_path: Path, edit) -> Path:
    """An exported Llama directory whose tensors went through `edit` (a dict -> None function)."""
    out = Path(export_hf(make_model({}), tmp_path / "out"))
    tensors = load_file(out / "model.safetensors")
    edit(tensors)
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    return out


def test_load_hf_names_missing_wrong_and_extra_tensors(tmp_path: Path) -> None:
    gone = "model.layers.1.mlp.up_proj.weight"
    out = edited_checkpoint(tmp_path / "a", lambda t: t.pop(gone))
    with pytest.raises(ValueError, match=f"missing tensors: {gone}"):
        load_hf(out)
    bad = "model.layers.0.self_attn.k_proj.weight"
    out = edited_checkpoint(tmp_path / "b", lambda t: t.update({bad: torch.zeros(64, 32)}))
    with pytest.raises(ValueError, match=rf"{bad} has shape \(64, 32\), expected \(64, 64\)"):
        load_hf(out)
    out = edited_checkpoint(tmp_path / "c", lambda t: t.update({"model.extra": torch.zeros(1)}))
    with pytest.raises(ValueError, match="unexpected tensors: model.extra"):
        load_hf(out)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"num_key_value_heads": 3}, "num_key_value_heads=3 does not divide num_attention_heads=4"),
        ({"num_key_value_heads": -2}, "num_key_value_heads=-2"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "rope_type='linear'"),
        ({"attention_bias": True}, "mlp_bias=False"),
        ({"hidden_size": None}, "'hidden_size' is missing"),
    ],
)
def test_load_hf_refuses_what_gptlab_cannot_run(changes: dict[str, Any], named: str, tmp_path: Path) -> None:
    out = Path(export_hf(make_model({}), tmp_path / "out"))
    config = json.loads((out / "config.json").read_text()) | changes
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="accepted|missing") as err:
        load_hf(out)
    assert named in str(err.value)


# --------------------------------------------------------------------------------- Lightning


class _TinyModule(L.LightningModule):
    """The shape of the project's training module: GPT under `model`, config as a plain dict."""

    def __init__(self, model: dict[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = GPT(GPTConfig(**model))

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        (x,) = batch
        logits = self.model(x[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def lightning_checkpoint(tmp_path: Path, overrides: dict[str, Any]) -> tuple[Path, GPT]:
    """A real Trainer checkpoint after one optimiser step, and the model it holds."""
    module = _TinyModule(model=GPTConfig(**SMALL | overrides).to_dict())
    trainer = L.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    data = DataLoader(TensorDataset(tokens(17)), batch_size=3)
    trainer.fit(module, data)
    path = tmp_path / "last.ckpt"
    trainer.save_checkpoint(path)
    return path, module.model.eval()


def test_lightning_checkpoint_loads_and_exports(tmp_path: Path) -> None:
    path, trained = lightning_checkpoint(tmp_path, {"tie_embeddings": False})
    model = load_gpt(path)
    assert model.cfg == trained.cfg and not model.training
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(idx), trained(idx), rtol=0, atol=0)
    assert export_cli().main([f"ckpt_path={path}", f"out_dir={tmp_path / 'hf'}"]) == 0
    hf = load_transformers(tmp_path / "hf")
    with torch.no_grad():
        torch.testing.assert_close(hf(idx).logits, trained(idx), rtol=0, atol=ATOL_HF)


def test_consolidated_checkpoint_loads(tmp_path: Path) -> None:
    """The single file an FSDP run is consolidated into: bare state_dict plus 'model_config'."""
    model = make_model({})
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.save({"model_config": model.cfg.to_dict(), "state_dict": state}, tmp_path / "c.pt")
    loaded = load_gpt(tmp_path / "c.pt")
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx), model(idx), rtol=0, atol=0)


def test_lightning_checkpoint_with_non_plain_config_is_explained(tmp_path: Path) -> None:
    cfg = GPTConfig(**SMALL)
    state = {f"model.{k}": v for k, v in GPT(cfg).state_dict().items()}
    torch.save({"state_dict": state, "hyper_parameters": {"model": cfg}}, tmp_path / "x.ckpt")
    # refused by torch.load(weights_only=True) itself: the message names the file (and the class)
    with pytest.raises(ValueError, match=r"x\.ckpt.*(GPTConfig|not a readable checkpoint)"):
        load_gpt(tmp_path / "x.ckpt")
    torch.save({"state_dict": state, "hyper_parameters": {"model": [1, 2]}}, tmp_path / "w.ckpt")
    with pytest.raises(ValueError, match="plain dict"):
        load_gpt(tmp_path / "w.ckpt")
    torch.save({"state_dict": state, "hyper_parameters": {}}, tmp_path / "y.ckpt")
    with pytest.raises(ValueError, match=r"hyper_parameters\['model'\]"):
        load_gpt(tmp_path / "y.ckpt")
    del state["model.blocks.0.attn.q_proj.weight"]
    torch.save({"state_dict": state, "hyper_parameters": {"model": cfg.to_dict()}}, tmp_path / "z")
    with pytest.raises(ValueError, match=r"missing: blocks\.0\.attn\.q_proj\.weight"):
        load_gpt(tmp_path / "z")


def export_cli() -> Any:
    """scripts/export.py imported as a module, to call its main() without starting a process."""
    spec = importlib.util.spec_from_file_location("gptlab_export_cli", REPO / "scripts" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["out_dir=x"], "missing required argument(s) ckpt_path"),
        (["ckpt_path=nowhere.ckpt", "out_dir=x"], "ckpt_path='nowhere.ckpt' does not exist"),
        (["ckpt_path=a", "out_dir=x", "colour=red"], "unknown argument 'colour'"),
        (["ckpt_path"], "is not key=value"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert export_cli().main(args) == 2  # in-process: the script's own run is tested below
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
    assert not (tmp_path / "x").exists()


def test_cli_reports_an_unreadable_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "export.py"), "ckpt_path=junk.ckpt", "out_dir=x"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and not (tmp_path / "x").exists()
    assert result.stderr.count("\n") == 1 and "junk.ckpt" in result.stderr and "checkpoint" in result.stderr


@pytest.mark.parametrize("kv_heads", [0, -1, 3, True, "2"])
def test_a_bad_num_key_value_heads_is_refused_by_name_not_read_as_multi_head(
    kv_heads: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """num_key_value_heads 0 (falsy), negative, not dividing the 4 heads, a bool or a string: one line
    naming the field and what is accepted, from model.init_from and from the export reader (exit 2);
    never read as multi-head, which fails later on k_proj/v_proj's shapes instead."""
    from gptlab.config import TrainConfig
    from gptlab.data.tokenizers import ByteTokenizer
    from gptlab.errors import USER_ERRORS
    from gptlab.training.app import model_config

    out = Path(export_hf(make_model({"n_kv_head": 2}), tmp_path / "hf"))
    config = json.loads((out / "config.json").read_text()) | {"num_key_value_heads": kv_heads}
    (out / "config.json").write_text(json.dumps(config))
    named = f"num_key_value_heads={kv_heads!r}"
    accepted = "accepted: a divisor of 4 (grouped-query; 1: multi-query; 4 or null: multi-head)"
    with pytest.raises(USER_ERRORS) as err:
        model_config(TrainConfig(model=GPTConfig(init_from=str(out))), 256, ByteTokenizer())
    assert named in str(err.value) and str(err.value).endswith(accepted) and "\n" not in str(err.value)
    monkeypatch.chdir(tmp_path)
    assert export_cli().main([f"ckpt_path={out}", "out_dir=x"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and lines[0].endswith(accepted), lines


def documented_line(tried: str) -> str:
    """The exact stderr line of docs/bad-inputs.md's row whose `tried` cell names `tried`."""
    rows = (REPO / "docs" / "bad-inputs.md").read_text().splitlines()
    (row,) = [r for r in rows if r.startswith("| ") and tried in r.split(" | ")[1]]
    return row.split(" | ")[2].strip().strip("`")


@pytest.mark.parametrize("form", ["lightning", "consolidated"])
def test_a_document_masked_checkpoint_is_refused_by_the_export(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """No HF config stops attention at an end-of-text id: exporting would silently change the model."""
    model = make_model({})
    documents = {"eot": 255, "positions": "restart"}
    if form == "lightning":
        state = {f"model.{k}": v for k, v in model.state_dict().items()}
        ckpt = {
            "state_dict": state,
            "hyper_parameters": {"model": model.cfg.to_dict(), "documents": documents},
        }
    else:
        ckpt = {"model_config": model.cfg.to_dict(), "state_dict": model.state_dict(), "documents": documents}
    torch.save(ckpt, tmp_path / "last.ckpt")
    monkeypatch.chdir(tmp_path)
    assert export_cli().main(["ckpt_path=last.ckpt", "out_dir=hf"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [documented_line("a `data.document_mask=true` run")]
    assert not (tmp_path / "hf").exists()

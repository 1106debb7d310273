"""Hugging Face interop: write a pre-norm GPT as a Llama or GPT-2 directory, and read one back.

Only LlamaForCausalLM and GPT2LMHeadModel are targets because only they reproduce gptlab's blocks
exactly. transformers is never imported here: config.json is written as a plain dict and weights go
through safetensors, so export and import also work where transformers is not installed.
"""

from __future__ import annotations

import json
import logging
import math
import pickle
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

log = logging.getLogger(__name__)

LLAMA = "llama"
GPT2 = "gpt2"
MODEL_TYPES = (LLAMA, GPT2)
ARCHITECTURES = {LLAMA: "LlamaForCausalLM", GPT2: "GPT2LMHeadModel"}

# What each target fixes: field -> (the only accepted value, why the target needs it).
# Fields not listed (sizes, ffn_hidden, eps, rope_theta, dropout, init) map onto config keys freely.
_SHAPES: dict[str, dict[str, tuple[Any, str]]] = {
    LLAMA: {
        "norm": ("rmsnorm", "it normalises with RMSNorm"),
        "ffn": ("swiglu", "its MLP is the SiLU-gated one"),
        "pos_emb": ("rope", "it encodes positions with rotary embeddings"),
    },
    GPT2: {
        "norm": ("layernorm", "it normalises with LayerNorm"),
        "ffn": ("gelu_tanh", "its MLP is ungated with the tanh GELU, 'gelu_new'"),
        "pos_emb": ("learned", "it adds learned position embeddings"),
        "bias": (True, "every Conv1D and LayerNorm carries a bias"),
        "tie_embeddings": (True, "its lm_head is tied to wte"),
    },
}

# Weight files in the order transformers prefers them.
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
# Buffers some checkpoints carry that gptlab recomputes (RoPE tables, GPT-2's causal mask).
_IGNORED = {
    LLAMA: re.compile(r"rotary_emb\.inv_freq$"),
    GPT2: re.compile(r"\.attn\.(bias|masked_bias)$"),
}
_BASE_PREFIX = {LLAMA: "model.", GPT2: "transformer."}
_EOS_TOKENS = ("<|endoftext|>", "</s>", "<eos>", "<|eos|>", "<|end_of_text|>")
_BOS_TOKENS = ("<s>", "<bos>", "<|bos|>", "<|begin_of_text|>")
_LLAMA_LINEARS = (
    ("attn.q_proj", "self_attn.q_proj"),
    ("attn.k_proj", "self_attn.k_proj"),
    ("attn.v_proj", "self_attn.v_proj"),
    ("attn.out_proj", "self_attn.o_proj"),
    ("ffn.gate_proj", "mlp.gate_proj"),
    ("ffn.up_proj", "mlp.up_proj"),
    ("ffn.down_proj", "mlp.down_proj"),
)
# Fields that must agree between a model and a checkpoint it is initialised from.
_ARCH_FIELDS = (
    "vocab_size",
    "n_layer",
    "n_head",
    "n_embd",
    "norm",
    "norm_placement",
    "ffn",
    "tie_embeddings",
    "pos_emb",
    "bias",
)


# ---------------------------------------------------------------------------------------------
# Which target


def check_exportable(cfg: GPTConfig) -> str:
    """The HF architecture that reproduces `cfg` exactly ('llama' or 'gpt2'), else why none does."""
    if cfg.qk_norm:
        raise ValueError(
            "model.qk_norm=True cannot be expressed by LlamaForCausalLM or GPT2LMHeadModel "
            "(neither normalises queries and keys); accepted: false"
        )
    if cfg.norm_placement != "pre":
        raise ValueError(
            f"model.norm_placement={cfg.norm_placement!r} cannot be expressed by "
            "LlamaForCausalLM or GPT2LMHeadModel (both are pre-norm); accepted: 'pre'"
        )
    misses = {
        kind: [
            (name, getattr(cfg, name), want, why)
            for name, (want, why) in shape.items()
            if getattr(cfg, name) != want
        ]
        for kind, shape in _SHAPES.items()
    }
    for kind in MODEL_TYPES:
        if not misses[kind]:
            return kind
    # Blame the nearer target; on a tie, the one whose position encoding already matches.
    near = min(
        MODEL_TYPES,
        key=lambda k: (len(misses[k]), cfg.pos_emb != _SHAPES[k]["pos_emb"][0]),
    )
    other = GPT2 if near == LLAMA else LLAMA
    reasons = "; ".join(
        f"model.{name}={value!r} cannot be expressed by {ARCHITECTURES[near]} ({why}); accepted: {want!r}"
        for name, value, want, why in misses[near]
    )
    needs = ", ".join(f"{name}={want!r}" for name, _, want, _ in misses[other])
    raise ValueError(f"{reasons} (the other target, {ARCHITECTURES[other]}, would need {needs})")


# ---------------------------------------------------------------------------------------------
# The name map, shared by both directions


@dataclass(frozen=True)
class _Rule:
    """One HF tensor and the gptlab tensors it is made of, so export and import share one table."""

    hf: str
    ours: tuple[str, ...]
    op: str = "copy"  # copy | t (GPT-2 Conv1D stores W transposed) | qkv_w, qkv_b (fused c_attn)


def _rules(cfg: GPTConfig, kind: str) -> list[_Rule]:
    """The tensor map of `cfg` for `kind`; a tied lm_head is left out, as HF stores it once."""
    return _llama_rules(cfg) if kind == LLAMA else _gpt2_rules(cfg)


def _llama_rules(cfg: GPTConfig) -> list[_Rule]:
    """LlamaForCausalLM names: a pure rename, since both sides use nn.Linear's (out, in) layout."""
    params = ("weight", "bias") if cfg.bias else ("weight",)
    rules = [_Rule("model.embed_tokens.weight", ("tok_emb.weight",))]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"model.layers.{i}."
        rules.append(_Rule(hf + "input_layernorm.weight", (ours + "attn_norm.weight",)))
        rules.append(_Rule(hf + "post_attention_layernorm.weight", (ours + "ffn_norm.weight",)))
        for our_name, hf_name in _LLAMA_LINEARS:
            for p in params:
                rules.append(_Rule(f"{hf}{hf_name}.{p}", (f"{ours}{our_name}.{p}",)))
    rules.append(_Rule("model.norm.weight", ("final_norm.weight",)))
    if not cfg.tie_embeddings:
        rules.append(_Rule("lm_head.weight", ("lm_head.weight",)))
    return rules


def _gpt2_rules(cfg: GPTConfig) -> list[_Rule]:
    """GPT2LMHeadModel names: Conv1D weights are (in, out) and q, k, v live fused in c_attn."""
    rules = [
        _Rule("transformer.wte.weight", ("tok_emb.weight",)),
        _Rule("transformer.wpe.weight", ("pos_emb.weight",)),
    ]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"transformer.h.{i}."
        qkv = tuple(f"{ours}attn.{n}_proj" for n in "qkv")
        rules += [
            _Rule(hf + "ln_1.weight", (ours + "attn_norm.weight",)),
            _Rule(hf + "ln_1.bias", (ours + "attn_norm.bias",)),
            _Rule(hf + "attn.c_attn.weight", tuple(n + ".weight" for n in qkv), "qkv_w"),
            _Rule(hf + "attn.c_attn.bias", tuple(n + ".bias" for n in qkv), "qkv_b"),
            _Rule(hf + "attn.c_proj.weight", (ours + "attn.out_proj.weight",), "t"),
            _Rule(hf + "attn.c_proj.bias", (ours + "attn.out_proj.bias",)),
            _Rule(hf + "ln_2.weight", (ours + "ffn_norm.weight",)),
            _Rule(hf + "ln_2.bias", (ours + "ffn_norm.bias",)),
            _Rule(hf + "mlp.c_fc.weight", (ours + "ffn.up_proj.weight",), "t"),
            _Rule(hf + "mlp.c_fc.bias", (ours + "ffn.up_proj.bias",)),
            _Rule(hf + "mlp.c_proj.weight", (ours + "ffn.down_proj.weight",), "t"),
            _Rule(hf + "mlp.c_proj.bias", (ours + "ffn.down_proj.bias",)),
        ]
    rules += [
        _Rule("transformer.ln_f.weight", ("final_norm.weight",)),
        _Rule("transformer.ln_f.bias", ("final_norm.bias",)),
    ]
    return rules


def _to_hf(op: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    """Build one HF tensor from its gptlab parts."""
    if op == "copy":
        return tensors[0]
    if op == "t":
        return tensors[0].t()
    if op == "qkv_w":
        return torch.cat(tensors, dim=0).t()  # (3d, d) Linear layout -> (d, 3d) Conv1D layout
    return torch.cat(tensors, dim=0)


def _from_hf(op: str, tensor: torch.Tensor) -> list[torch.Tensor]:
    """Split one HF tensor back into its gptlab parts (the inverse of `_to_hf`)."""
    if op == "copy":
        return [tensor]
    if op == "t":
        return [tensor.t()]
    if op == "qkv_w":
        return list(tensor.t().chunk(3, dim=0))
    return list(tensor.chunk(3, dim=0))


def _hf_shape(op: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape HF must store for a rule, given the gptlab shapes it is made of."""
    if op == "copy":
        return shapes[0]
    if op == "t":
        return tuple(reversed(shapes[0]))
    if op == "qkv_w":
        return (shapes[0][1], sum(s[0] for s in shapes))
    return (sum(s[0] for s in shapes),)


def _gptlab_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every state_dict name and shape of GPT(cfg), built on the meta device to allocate nothing."""
    with torch.device("meta"):
        model = GPT(cfg)
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def _short(names: list[str], limit: int = 8) -> str:
    """A readable list of tensor names that stays one line for a whole missing model."""
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


# ---------------------------------------------------------------------------------------------
# Export


def _dtype_name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32: the spelling config.json uses."""
    return str(dtype).removeprefix("torch.")


def _find_tokenizer_json(tokenizer_dir: str | Path | None) -> Path | None:
    """The tokenizer.json to ship, from a directory holding one or the file itself."""
    if tokenizer_dir is None:
        return None
    path = Path(tokenizer_dir)
    if not path.exists():
        raise FileNotFoundError(
            f"tokenizer_dir={str(path)!r} does not exist; give a directory holding tokenizer.json, "
            "the tokenizer.json file itself, or leave it unset"
        )
    if path.is_file():
        return path
    candidate = path / "tokenizer.json"
    if candidate.is_file():
        return candidate
    log.warning("tokenizer_dir %s holds no tokenizer.json; exporting the model only", path)
    return None


def _special_tokens(tokenizer_json: Path | None) -> dict[str, tuple[str, int]]:
    """'bos'/'eos' -> (token, id) from the tokenizer's special tokens, so HF generation stops."""
    if tokenizer_json is None:
        return {}
    try:
        added = json.loads(tokenizer_json.read_text()).get("added_tokens") or []
    except (OSError, ValueError, AttributeError):
        log.warning("could not read special tokens from %s; bos/eos left unset", tokenizer_json)
        return {}
    ids = {t.get("content"): t.get("id") for t in added if isinstance(t, dict) and t.get("special")}
    found: dict[str, tuple[str, int]] = {}
    for role, candidates in (("bos", _BOS_TOKENS), ("eos", _EOS_TOKENS)):
        token = next((t for t in candidates if isinstance(ids.get(t), int)), None)
        if token is not None:
            found[role] = (token, ids[token])
    return found


def _gptlab_tokenizer_name(tokenizer_json: Path) -> str | None:
    """The gptlab tokenizer name in the tokenizer_config.json beside a tokenizer.json, if any."""
    config = tokenizer_json.parent / "tokenizer_config.json"
    try:
        name = json.loads(config.read_text()).get("gptlab_name") if config.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def _hf_config(
    cfg: GPTConfig, kind: str, dtype: torch.dtype, bos: int | None, eos: int | None
) -> dict[str, Any]:
    """config.json for `kind`, with every key HF would otherwise default to something wrong."""
    common: dict[str, Any] = {
        "architectures": [ARCHITECTURES[kind]],
        "model_type": kind,
        "vocab_size": cfg.vocab_size,
        "initializer_range": min(cfg.std, 1.0),  # transformers 5 rejects values outside [0, 1]
        "tie_word_embeddings": cfg.tie_embeddings,
        "use_cache": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": None,
        "torch_dtype": _dtype_name(dtype),  # transformers < 4.56 reads this key
        "dtype": _dtype_name(dtype),  # transformers >= 4.56 reads this one
    }
    if kind == LLAMA:
        return common | {
            "hidden_size": cfg.n_embd,
            "intermediate_size": cfg.hidden_dim,
            "num_hidden_layers": cfg.n_layer,
            "num_attention_heads": cfg.n_head,
            "num_key_value_heads": cfg.n_head,
            "head_dim": cfg.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": cfg.block_size,
            "rms_norm_eps": cfg.norm_eps,
            # transformers 4 reads rope_theta, transformers 5 rope_parameters; both say the same
            "rope_theta": cfg.rope_theta,
            "rope_scaling": None,
            "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
            "attention_bias": cfg.bias,
            "mlp_bias": cfg.bias,
            # Llama has no residual or embedding dropout; eval-mode outputs are unaffected
            "attention_dropout": cfg.dropout,
            "pretraining_tp": 1,
        }
    return common | {
        "n_embd": cfg.n_embd,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_positions": cfg.block_size,
        "n_ctx": cfg.block_size,
        "n_inner": None if cfg.hidden_dim == 4 * cfg.n_embd else cfg.hidden_dim,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": cfg.norm_eps,
        "resid_pdrop": cfg.dropout,
        "embd_pdrop": cfg.dropout,
        "attn_pdrop": cfg.dropout,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "add_cross_attention": False,
    }


def export_hf(model: GPT, out_dir: str | Path, tokenizer_dir: str | Path | None = None) -> str:
    """Write `model` as a transformers directory: config.json, model.safetensors, tokenizer."""
    cfg = model.cfg
    kind = check_exportable(cfg)
    tokenizer_json = _find_tokenizer_json(tokenizer_dir)
    ours = model.state_dict()
    rules = _rules(cfg, kind)
    used = {name for rule in rules for name in rule.ours}
    missing = sorted(used - set(ours))
    if missing:
        raise ValueError(
            f"model lacks tensors its config implies for {ARCHITECTURES[kind]}: {_short(missing)}; "
            "was model.cfg changed after construction?"
        )
    spare = sorted(set(ours) - used - ({"lm_head.weight"} if cfg.tie_embeddings else set()))
    if spare:
        raise ValueError(
            f"model tensors {_short(spare)} have no place in {ARCHITECTURES[kind]}; "
            "was model.cfg changed after construction?"
        )
    tensors = {
        rule.hf: _to_hf(rule.op, [ours[n].detach() for n in rule.ours]).to("cpu").contiguous()
        for rule in rules
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stale = [name for name in _WEIGHT_FILES[1:] if (out / name).exists()]
    if stale:
        log.warning("%s already holds %s from an earlier save; delete them", out, stale)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    special = _special_tokens(tokenizer_json)
    if kind == GPT2 and "bos" not in special and "eos" in special:
        special["bos"] = special["eos"]  # GPT-2's convention: <|endoftext|> opens documents too
    bos, eos = (special[r][1] if r in special else None for r in ("bos", "eos"))
    hf_cfg = _hf_config(cfg, kind, ours["tok_emb.weight"].dtype, bos, eos)
    (out / "config.json").write_text(json.dumps(hf_cfg, indent=2, sort_keys=True) + "\n")
    if tokenizer_json is not None:
        if tokenizer_json.resolve() != (out / "tokenizer.json").resolve():
            shutil.copyfile(tokenizer_json, out / "tokenizer.json")
        # Without it AutoTokenizer would pick the model's own tokenizer class and its habits
        # (e.g. Llama's added BOS); the generic class reproduces gptlab's tokenizer as trained.
        tok_cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": cfg.block_size,
        } | {f"{role}_token": token for role, (token, _) in special.items()}
        name = _gptlab_tokenizer_name(tokenizer_json)
        if name is not None:  # lets gptlab reload a byte tokenizer as bytes, a BPE by its name
            tok_cfg["gptlab_name"] = name
        (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2) + "\n")
    log.info("exported %s as %s to %s", type(model).__name__, ARCHITECTURES[kind], out)
    return str(out)


# ---------------------------------------------------------------------------------------------
# Import


def _load_error(e: Exception) -> str:
    """The informative part of a torch.load failure (its first line is a generic preamble)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error" in line:
            detail = line.partition("WeightsUnpickler error")[2].lstrip(": ")
            if not detail and i + 1 < len(lines):
                detail = lines[i + 1]
            return detail.partition(" Please use")[0]  # drop the allow-listing advice
    return lines[0] if lines else type(e).__name__


def _get(hf: Mapping[str, Any], key: str, where: Path) -> Any:
    """A config.json key transformers has no sensible default for."""
    if hf.get(key) is None:
        raise ValueError(f"{where}: {key!r} is missing, and a {hf['model_type']} config needs it")
    return hf[key]


def _refuse(where: Path, key: str, value: Any, why: str, accepted: str) -> ValueError:
    """The error for a checkpoint feature gptlab's GPT cannot reproduce."""
    return ValueError(f"{where}: {key}={value!r} {why}; accepted: {accepted}")


def _ffn_hidden(hidden: int, n_embd: int, gated: bool) -> int | None:
    """None when `hidden` is what GPTConfig's default rule gives anyway, so configs round-trip."""
    default = 64 * math.ceil(8 * n_embd / 3 / 64) if gated else 4 * n_embd
    return None if hidden == default else hidden


def _config_from_llama(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a LlamaForCausalLM config.json (transformers 4 or 5 spelling)."""
    n_embd, n_head = _get(hf, "hidden_size", where), _get(hf, "num_attention_heads", where)
    kv_heads = hf.get("num_key_value_heads") or n_head
    if kv_heads != n_head:
        raise _refuse(
            where,
            "num_key_value_heads",
            kv_heads,
            "is grouped-query attention, which gptlab's attention does not have",
            f"equal to num_attention_heads={n_head}",
        )
    head_dim = hf.get("head_dim")
    if head_dim is not None and isinstance(n_head, int) and head_dim * n_head != n_embd:
        raise _refuse(
            where,
            "head_dim",
            head_dim,
            "differs from hidden_size/num_attention_heads, which gptlab always uses",
            f"{n_embd}/{n_head}",
        )
    act = hf.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise _refuse(where, "hidden_act", act, "is not SwiGLU's SiLU", "'silu'")
    rope_key = "rope_parameters" if hf.get("rope_parameters") else "rope_scaling"
    rope = hf.get(rope_key) or {}
    if not isinstance(rope, Mapping):
        raise _refuse(where, rope_key, rope, "is not an object", "null or a JSON object")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise _refuse(where, f"{rope_key}.rope_type", rope_type, "scales RoPE", "'default'")
    partial = rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0))
    if partial not in (None, 1, 1.0):
        raise _refuse(where, "partial_rotary_factor", partial, "rotates part of a head", "1.0")
    attention_bias = bool(hf.get("attention_bias", False))
    mlp_bias = bool(hf.get("mlp_bias", False))
    if attention_bias != mlp_bias:
        raise _refuse(
            where,
            "mlp_bias",
            mlp_bias,
            f"differs from attention_bias={attention_bias}; gptlab's one bias flag covers both",
            f"{attention_bias} (equal to attention_bias)",
        )
    return {
        "vocab_size": _get(hf, "vocab_size", where),
        "block_size": hf.get("max_position_embeddings", 2048),
        "n_layer": _get(hf, "num_hidden_layers", where),
        "n_head": n_head,
        "n_embd": n_embd,
        "norm": "rmsnorm",
        "norm_eps": hf.get("rms_norm_eps", 1e-6),
        "ffn": "swiglu",
        "ffn_hidden": _ffn_hidden(_get(hf, "intermediate_size", where), n_embd, gated=True),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        "pos_emb": "rope",
        "rope_theta": rope.get("rope_theta", hf.get("rope_theta", 10000.0)),
        "bias": attention_bias,
        "dropout": hf.get("attention_dropout", 0.0),
        "init_std": hf.get("initializer_range", 0.02),
    }


def _config_from_gpt2(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a GPT2LMHeadModel config.json."""
    act = hf.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise _refuse(
            where,
            "activation_function",
            act,
            "is not the tanh GELU",
            "'gelu_new', 'gelu_pytorch_tanh'",
        )
    if not hf.get("tie_word_embeddings", True):
        raise _refuse(where, "tie_word_embeddings", False, "unties GPT-2's head", "True")
    if not hf.get("scale_attn_weights", True):
        raise _refuse(where, "scale_attn_weights", False, "drops the 1/sqrt(d_head) scale", "True")
    if hf.get("scale_attn_by_inverse_layer_idx", False):
        raise _refuse(where, "scale_attn_by_inverse_layer_idx", True, "rescales by depth", "False")
    if hf.get("add_cross_attention", False):
        raise _refuse(where, "add_cross_attention", True, "adds an encoder path", "False")
    n_embd = _get(hf, "n_embd", where)
    return {
        "vocab_size": _get(hf, "vocab_size", where),
        "block_size": hf.get("n_positions") or hf.get("n_ctx") or 1024,
        "n_layer": _get(hf, "n_layer", where),
        "n_head": _get(hf, "n_head", where),
        "n_embd": n_embd,
        "norm": "layernorm",
        "norm_eps": hf.get("layer_norm_epsilon", 1e-5),
        "ffn": "gelu_tanh",
        "ffn_hidden": _ffn_hidden(hf.get("n_inner") or 4 * n_embd, n_embd, gated=False),
        "tie_embeddings": True,
        "pos_emb": "learned",
        "bias": True,
        "dropout": hf.get("resid_pdrop", 0.1),
        "init_std": hf.get("initializer_range", 0.02),
    }


def _read_weights(root: Path) -> dict[str, torch.Tensor]:
    """All tensors of a local HF directory: safetensors or torch .bin, single file or sharded."""
    name = next((n for n in _WEIGHT_FILES if (root / n).is_file()), None)
    if name is None:
        raise FileNotFoundError(f"{root} holds no weights; expected one of {', '.join(_WEIGHT_FILES)}")
    if name.endswith(".index.json"):
        weight_map = json.loads((root / name).read_text()).get("weight_map") or {}
        if not weight_map:
            raise ValueError(f"{root / name} has an empty or missing 'weight_map'")
        shards = sorted(set(weight_map.values()))
    else:
        shards = [name]
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        path = root / shard
        if not path.is_file():
            raise FileNotFoundError(f"{root / name} names shard {shard!r}, which is not in {root}")
        if shard.endswith(".safetensors"):
            try:
                tensors.update(load_file(str(path), device="cpu"))
            except SafetensorError as e:
                raise ValueError(f"{path} is not a readable safetensors file: {e}") from e
            continue
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError) as e:
            raise ValueError(
                f"{path} could not be loaded with torch.load(weights_only=True): {_load_error(e)}"
            ) from e
        if not isinstance(loaded, Mapping):
            raise ValueError(f"{path} holds a {type(loaded).__name__}, expected a state_dict")
        tensors.update(loaded)
    return tensors


def _state_dict_from_hf(
    hf_tensors: Mapping[str, torch.Tensor], cfg: GPTConfig, kind: str, where: Path
) -> dict[str, torch.Tensor]:
    """Map HF tensors to gptlab names, checking every shape and naming anything missing or extra."""
    base = _BASE_PREFIX[kind]
    # Checkpoints saved from the bare model (e.g. the original 'gpt2') lack the base prefix.
    hf = {
        (k if k.startswith(base) or k.startswith("lm_head.") else base + k): v for k, v in hf_tensors.items()
    }
    expected = _gptlab_shapes(cfg)
    out: dict[str, torch.Tensor] = {}
    missing: list[str] = []
    wrong: list[str] = []
    rules = _rules(cfg, kind)
    for rule in rules:
        if rule.hf not in hf:
            missing.append(rule.hf)
            continue
        want = _hf_shape(rule.op, [expected[n] for n in rule.ours])
        got = tuple(hf[rule.hf].shape)
        if got != want:
            wrong.append(f"{rule.hf} has shape {got}, expected {want}")
            continue
        for name, tensor in zip(rule.ours, _from_hf(rule.op, hf[rule.hf]), strict=True):
            out[name] = tensor.contiguous()
    consumed = {rule.hf for rule in rules}
    if cfg.tie_embeddings:
        consumed.add("lm_head.weight")  # some tied checkpoints store the head too; HF ignores it
    extra = sorted(k for k in hf if k not in consumed and not _IGNORED[kind].search(k))
    problems = []
    if missing:
        problems.append(f"missing tensors: {_short(missing)}")
    if wrong:
        problems.append(f"wrong shapes: {_short(wrong, 4)}")
    if extra:
        problems.append(f"unexpected tensors: {_short(extra)}")
    if problems:
        raise ValueError(
            f"{where}: the weights do not match config.json ({ARCHITECTURES[kind]}); " + "; ".join(problems)
        )
    if cfg.tie_embeddings:
        out["lm_head.weight"] = out["tok_emb.weight"]
    if set(out) != set(expected):  # the map and the model disagree: a bug here, not in the input
        raise ValueError(f"internal: {kind} map misses {sorted(set(expected) ^ set(out))}")
    return out


def _read_hf_config(path: str | Path) -> tuple[GPTConfig, str, Path]:
    """(GPTConfig, model_type, directory) from a local HF directory's config.json."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(
            f"{str(root)!r} is not a directory; expected a local Hugging Face model directory "
            "holding config.json and model.safetensors (or pytorch_model.bin)"
        )
    cfg_file = root / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{root} has no config.json; is it a Hugging Face model directory?")
    try:
        hf = json.loads(cfg_file.read_text())
    except ValueError as e:
        raise ValueError(f"{cfg_file} is not valid JSON: {e}") from e
    if not isinstance(hf, dict):
        raise ValueError(f"{cfg_file} holds a {type(hf).__name__}, expected a JSON object")
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise ValueError(
            f"{cfg_file}: model_type={kind!r} is not supported; accepted: {', '.join(MODEL_TYPES)}"
        )
    fields = _config_from_llama(hf, cfg_file) if kind == LLAMA else _config_from_gpt2(hf, cfg_file)
    try:
        cfg = GPTConfig(**fields)
    except ValueError as e:
        raise ValueError(f"{cfg_file}: {e}") from e
    return cfg, kind, root


def load_hf_config(path: str | Path) -> GPTConfig:
    """The GPTConfig of a local Llama or GPT-2 directory, without reading its weights."""
    return _read_hf_config(path)[0]


def load_hf(path: str | Path) -> tuple[GPTConfig, dict[str, torch.Tensor]]:
    """Read a local Llama or GPT-2 directory as a GPTConfig and a state_dict in gptlab's names."""
    cfg, kind, root = _read_hf_config(path)
    return cfg, _state_dict_from_hf(_read_weights(root), cfg, kind, root)


def init_config(path: str | Path, base: GPTConfig, vocab_size: int | None = None) -> GPTConfig:
    """The config to train from a HF checkpoint: its architecture, `base`'s context and dropout.

    The checkpoint's embeddings are never resized, so its vocabulary must already hold every id of
    the tokenizer (`vocab_size`); a larger one is fine (the extra rows are never indexed).
    """
    hf_cfg = load_hf_config(path)
    if vocab_size is not None and hf_cfg.vocab_size < vocab_size:
        raise ValueError(
            f"model.init_from={str(path)!r} has vocab_size={hf_cfg.vocab_size}, fewer than the "
            f"{vocab_size} ids of the data's tokenizer; a checkpoint's embeddings are never "
            "resized: train with the tokenizer it was trained with (data.tokenizer=pretrained "
            f"data.tokenizer_path=<its tokenizer.json>) or one of at most {hf_cfg.vocab_size} ids"
        )
    if hf_cfg.pos_emb == "learned" and base.block_size > hf_cfg.block_size:
        raise ValueError(
            f"model.block_size={base.block_size} exceeds the {hf_cfg.block_size} learned "
            f"positions of model.init_from={str(path)!r}; accepted: 1..{hf_cfg.block_size}"
        )
    return replace(hf_cfg, block_size=base.block_size, dropout=base.dropout, init_from=str(path))


def init_from_hf(model: GPT, path: str | Path) -> None:
    """Copy a HF checkpoint's weights into `model` after checking their architectures agree."""
    ckpt_cfg = load_hf_config(path)  # check before reading possibly large weights
    cfg = model.cfg
    wrong = [
        f"model.{f}={getattr(cfg, f)!r} (checkpoint: {getattr(ckpt_cfg, f)!r})"
        for f in _ARCH_FIELDS
        if getattr(cfg, f) != getattr(ckpt_cfg, f)
    ]
    if cfg.hidden_dim != ckpt_cfg.hidden_dim:
        wrong.append(
            f"model.ffn_hidden={cfg.ffn_hidden!r} gives width {cfg.hidden_dim} "
            f"(checkpoint: {ckpt_cfg.hidden_dim})"
        )
    if not math.isclose(cfg.norm_eps, ckpt_cfg.norm_eps, rel_tol=1e-6):
        wrong.append(f"model.norm_eps={cfg.norm_eps!r} (checkpoint: {ckpt_cfg.norm_eps!r})")
    if cfg.pos_emb == ckpt_cfg.pos_emb == "rope" and not math.isclose(
        cfg.rope_theta, ckpt_cfg.rope_theta, rel_tol=1e-6
    ):
        wrong.append(f"model.rope_theta={cfg.rope_theta!r} (checkpoint: {ckpt_cfg.rope_theta!r})")
    if cfg.pos_emb == ckpt_cfg.pos_emb == "learned" and cfg.block_size > ckpt_cfg.block_size:
        wrong.append(
            f"model.block_size={cfg.block_size} exceeds the checkpoint's {ckpt_cfg.block_size} "
            "learned positions"
        )
    if wrong:
        raise ValueError(
            f"cannot initialise from {path}: {'; '.join(wrong)}; "
            "set these model fields to the checkpoint's values"
        )
    _, state = load_hf(path)
    if cfg.pos_emb == "learned":
        state["pos_emb.weight"] = state["pos_emb.weight"][: cfg.block_size]  # a shorter context
    with torch.no_grad():
        model.load_state_dict(state, strict=True)


def gpt_from_hf(path: str | Path) -> GPT:
    """A GPT built from a local HF directory, in eval mode like transformers' from_pretrained."""
    cfg, state = load_hf(path)
    model = GPT(cfg)
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    return model.eval()


# ---------------------------------------------------------------------------------------------
# Lightning checkpoints


def load_gpt_from_lightning_ckpt(path: str | Path) -> GPT:
    """The GPT in a gptlab checkpoint file, in eval mode (delegates to gptlab.checkpoints)."""
    from gptlab.checkpoints import load_gpt  # lazy: it imports Lightning, export must not need it

    return load_gpt(path)

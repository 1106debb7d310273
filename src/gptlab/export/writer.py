"""Write a GPT as a transformers directory: config.json, model.safetensors, tokenizer.

transformers is never imported: config.json is written as a plain dict and the weights through
safetensors, so export also works where transformers is not installed.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from safetensors.torch import save_file

from gptlab.data.tokenizer_files import (
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    gptlab_name,
    special_tokens,
)
from gptlab.export.hf_config import common_keys
from gptlab.export.moe_rules import zero_bias
from gptlab.export.rules import short, to_hf
from gptlab.export.targets import ARCHS, check_exportable, target_names
from gptlab.export.weights import WEIGHT_FILES
from gptlab.model.gpt import GPT

log = logging.getLogger(__name__)


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
    candidate = path / TOKENIZER_FILE
    if candidate.is_file():
        return candidate
    log.warning("tokenizer_dir %s holds no tokenizer.json; exporting the model only", path)
    return None


def export_hf(model: GPT, out_dir: str | Path, tokenizer_dir: str | Path | None = None) -> str:
    """Write `model` as a transformers directory: config.json, model.safetensors, tokenizer."""
    cfg = model.cfg
    kind = check_exportable(cfg)
    targets = target_names(cfg)
    if model.documents is not None:  # a property of the run's data, kept on the model, not in cfg
        raise ValueError(
            f"data.document_mask=true (attention stops at each end-of-text id {model.documents.eot}) "
            f"cannot be expressed by {targets} (no config field stops "
            "attention at a document boundary: they see every earlier token); accepted: a checkpoint "
            "trained with data.document_mask=false"
        )
    arch = ARCHS[kind]
    tokenizer_json = _find_tokenizer_json(tokenizer_dir)
    ours = model.state_dict()
    rules = arch.rules(cfg)
    used = {name for rule in rules for name in rule.ours}
    missing = sorted(used - set(ours))
    if missing:
        raise ValueError(
            f"model lacks tensors its config implies for {arch.ARCHITECTURE}: {short(missing, 8)}; "
            "was model.cfg changed after construction?"
        )
    spare = sorted(set(ours) - used - ({"lm_head.weight"} if cfg.tie_embeddings else set()) - zero_bias(ours))
    if spare:
        raise ValueError(
            f"model tensors {short(spare, 8)} have no place in {arch.ARCHITECTURE}; "
            "was model.cfg changed after construction?"
        )
    tensors = {
        rule.hf: to_hf(rule.op, [ours[n].detach() for n in rule.ours], rule.index).to("cpu").contiguous()
        for rule in rules
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stale = [name for name in WEIGHT_FILES[1:] if (out / name).exists()]
    if stale:
        log.warning("%s already holds %s from an earlier save; delete them", out, stale)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    special = special_tokens(tokenizer_json)
    if arch.EOS_OPENS_DOCUMENTS and "bos" not in special and "eos" in special:
        special["bos"] = special["eos"]
    bos, eos = (special[r][1] if r in special else None for r in ("bos", "eos"))
    dtype = ours["tok_emb.weight"].dtype
    hf_cfg = common_keys(cfg, kind, arch.ARCHITECTURE, dtype, bos, eos) | arch.config_keys(cfg)
    (out / "config.json").write_text(json.dumps(hf_cfg, indent=2, sort_keys=True) + "\n")
    if tokenizer_json is not None:
        if tokenizer_json.resolve() != (out / TOKENIZER_FILE).resolve():
            shutil.copyfile(tokenizer_json, out / TOKENIZER_FILE)
        # Without it AutoTokenizer would pick the model's own tokenizer class and its habits
        # (e.g. Llama's added BOS); the generic class reproduces gptlab's tokenizer as trained.
        # split_special_tokens: a special token's text written in a document ("<|endoftext|>") is
        # read as its characters, as gptlab's tokenizers read it (tiktoken_bpe.ordinary), not as the
        # token's id; transformers would otherwise read it as the control token.
        tok_cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": cfg.block_size,
            "split_special_tokens": True,
        } | {f"{role}_token": token for role, (token, _) in special.items()}
        name = gptlab_name(tokenizer_json.parent)
        if name is not None:  # lets gptlab reload a byte tokenizer as bytes, a BPE by its name
            tok_cfg["gptlab_name"] = name
        (out / TOKENIZER_CONFIG_FILE).write_text(json.dumps(tok_cfg, indent=2) + "\n")
    log.info("exported %s as %s to %s", type(model).__name__, arch.ARCHITECTURE, out)
    return str(out)

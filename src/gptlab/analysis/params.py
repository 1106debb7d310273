"""Parameter budget of a GPTConfig, per component, tied and untied, without allocating the weights.

python -m gptlab.analysis.params model=llama_125m model.n_layer=24
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.model import GPT, GPTConfig, moe

log = logging.getLogger(__name__)

# The rows of the report, in data-flow order; each parameter name falls into exactly one.
COMPONENTS = ("tok_emb", "pos_emb", "attention", "ffn", "norms", "lm_head")


@dataclass(frozen=True)
class ParamReport:
    """Parameter counts of one config. `counts` is per component for the model as configured
    (lm_head is 0 when tied: its matrix is tok_emb's); totals are given both tied and untied."""

    cfg: GPTConfig
    counts: dict[str, int]
    total: int  # unique parameters of the model as configured
    total_tied: int
    total_untied: int
    tying_saves: int  # vocab_size · n_embd
    tying_saves_fraction: float  # tying_saves / total_untied
    non_embedding: int  # the N of the 6·N FLOP rule (GPT.num_params(exclude_embedding=True))
    active: int = 0  # ffn=moe: what one token passes through (total − the n_experts − top_k unchosen experts)


def component(name: str) -> str:
    """Which report row a parameter name belongs to (the names are fixed by docs/architecture.md;
    a block's QK-norm gains, attn.q_norm / attn.k_norm, count as attention)."""
    head = name.split(".")[0]
    if head in ("tok_emb", "pos_emb", "lm_head"):
        return head
    if head == "final_norm":
        return "norms"
    if head == "blocks":
        sub = name.split(".")[2]
        if "norm" in sub:
            return "norms"
        if sub == "attn":
            return "attention"
        if sub == "ffn":
            return "ffn"
    raise ValueError(f"parameter {name!r} fits none of the report's components {COMPONENTS}")


def by_component(numels: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Sum (parameter name, element count) pairs into the report's rows, every row present."""
    counts = dict.fromkeys(COMPONENTS, 0)
    for name, n in numels:
        counts[component(name)] += n
    return counts


def param_report(cfg: GPTConfig) -> ParamReport:
    """Count parameters per component by building the model on the meta device (no memory used)."""
    with torch.device("meta"):
        model = GPT(cfg)
    # named_parameters() yields a shared tensor once, under its first name (tok_emb.weight)
    counts = by_component((name, p.numel()) for name, p in model.named_parameters())
    total = sum(counts.values())
    saves = cfg.vocab_size * cfg.n_embd
    total_untied = total if not cfg.tie_embeddings else total + saves
    return ParamReport(
        cfg=cfg,
        counts=counts,
        total=total,
        total_tied=total_untied - saves,
        total_untied=total_untied,
        tying_saves=saves,
        tying_saves_fraction=saves / total_untied,
        non_embedding=model.num_params(exclude_embedding=True),
        active=total - moe.inactive_params(model),
    )


def format_report(report: ParamReport) -> str:
    """An aligned text table: one row per component, thousands separators, shares of the total."""
    cfg = report.cfg
    ffn_name = f"{cfg.ffn} (h={cfg.hidden_dim})"
    if cfg.ffn == "moe" and cfg.moe is not None:
        m = cfg.moe
        ffn_name = (
            f"moe ({m.n_experts}×{m.expert_ffn} h={cfg.expert_hidden}, top-{m.top_k}, shared {m.n_shared}, "
            f"first {m.first_dense_layers} dense)"
        )
    header = (
        f"n_layer={cfg.n_layer} n_head={cfg.n_head} n_kv_head={cfg.kv_heads} n_embd={cfg.n_embd} "
        f"vocab_size={cfg.vocab_size} block_size={cfg.block_size}\n"
        f"placement={cfg.norm_placement} norm={cfg.norm} ffn={ffn_name} pos_emb={cfg.pos_emb} "
        f"bias={cfg.bias} tie_embeddings={cfg.tie_embeddings} qk_norm={cfg.qk_norm}"
    )
    labels = {
        "tok_emb": "tok_emb",
        "pos_emb": "pos_emb",
        "attention": f"attention ({cfg.n_layer} blocks)",
        "ffn": f"ffn ({cfg.n_layer} blocks)",
        "norms": "norms",
        "lm_head": "lm_head",
    }
    # (label, count, share of the configured total or None, note)
    rows: list[tuple[str, int, float | None, str]] = []
    for key in COMPONENTS:
        n = report.counts[key]
        if key == "lm_head" and cfg.tie_embeddings:
            rows.append((labels[key], n, None, "shares tok_emb.weight"))
        else:
            rows.append((labels[key], n, n / report.total, ""))
    rows += [
        ("total", report.total, 1.0, ""),
        ("total if tied", report.total_tied, report.total_tied / report.total, ""),
        ("total if untied", report.total_untied, report.total_untied / report.total, ""),
        ("tying saves (V·d)", report.tying_saves, report.tying_saves_fraction, "of untied"),
        ("non-embedding (N)", report.non_embedding, report.non_embedding / report.total, ""),
    ]
    if cfg.ffn == "moe":  # top_k of the n_experts experts per token (the shared ones always)
        rows.append(("active", report.active, report.active / report.total, "per token"))
    w_label = max(len(r[0]) for r in rows)
    w_num = max(len(f"{r[1]:,}") for r in rows)
    w_share = 7
    lines = [header, "", f"{'component':<{w_label}}  {'parameters':>{w_num}}  {'share':>{w_share}}"]
    rule = "-" * (w_label + w_num + w_share + 4)
    lines.append(rule)
    for label, n, share, note in rows:
        if label == "total":
            lines.append(rule)
        pct = "-" if share is None else f"{100.0 * share:.1f}%"
        lines.append(f"{label:<{w_label}}  {n:>{w_num},}  {pct:>{w_share}}  {note}".rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# CLI


def _conf_dir() -> Path:
    """The repository's conf/, the one gptlab.compose reads."""
    from gptlab.compose import CONF_DIR

    return CONF_DIR


def _config_from_hydra(conf_dir: Path, overrides: list[str]) -> GPTConfig:
    """Compose conf/train.yaml with the overrides, as train.py does, and take its model node."""
    from omegaconf import OmegaConf

    from gptlab.compose import compose_raw

    cfg, _ = compose_raw(overrides, conf_dir=conf_dir)
    values: dict[str, Any] = OmegaConf.to_container(cfg.model, resolve=True)  # type: ignore[assignment]
    # Hydra-reserved keys (_target_, …) are not GPTConfig fields
    values = {k: v for k, v in values.items() if not str(k).startswith("_")}
    return GPTConfig.from_dict(values)


def _config_from_overrides(conf_dir: Path, overrides: list[str]) -> GPTConfig:
    """Fallback without conf/train.yaml: `model.<field>=<value>` applied to GPTConfig() defaults
    (and `model=<preset>` read from conf/model/<preset>.yaml when that file exists)."""
    import yaml

    values: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not of the form key=value")
        if key == "model":
            preset = conf_dir / "model" / f"{raw}.yaml"
            if not preset.is_file():
                raise FileNotFoundError(f"model={raw!r}: no preset file {preset}")
            loaded = yaml.safe_load(preset.read_text()) or {}
            loaded.pop("defaults", None)
            values.update(loaded)
        elif key.startswith("model."):
            values[key.removeprefix("model.")] = yaml.safe_load(raw)  # Hydra-like literals
        else:
            raise ValueError(
                f"override {item!r} is not accepted without conf/train.yaml; "
                "use model=<preset> or model.<field>=<value>"
            )
    return GPTConfig.from_dict(values)


def config_from_overrides(overrides: Sequence[str]) -> GPTConfig:
    """The GPTConfig that `train.py <overrides>` would build."""
    conf_dir = _conf_dir()
    if (conf_dir / "train.yaml").is_file():
        return _config_from_hydra(conf_dir, list(overrides))
    return _config_from_overrides(conf_dir, list(overrides))


def main(argv: Sequence[str] | None = None) -> int:
    """Print the parameter report of the model that the given Hydra overrides configure."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0
    try:
        cfg = config_from_overrides(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # Hydra's and OmegaConf's errors: one line, like the training CLI
        if type(err).__module__.split(".")[0] not in ("hydra", "omegaconf"):
            raise
        print(f"error: {type(err).__name__}: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    print(format_report(param_report(cfg)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The init report: the two pictures of `init.stats` as markdown tables and figures, written for one
preset (`scripts/init_report.py`; docs/ablations.md cites its output)."""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from gptlab.analysis.init.stats import (
    STREAM_PLACEMENTS,
    VarianceProfile,
    grad_profiles,
    real_tokens,
    residual_variance,
)
from gptlab.model import GPTConfig
from gptlab.model.config import PLACEMENTS

OPTIONS = ("out", "seeds", "batch")  # the script's own key=value arguments; the rest are overrides


def _variance_figure(profiles: dict[str, VarianceProfile], sigma_b2: float, path: Path) -> Path:
    from matplotlib.figure import Figure  # drawn by Agg at savefig, without pyplot's figure manager

    fig = Figure(figsize=(13, 4.8))
    ax, bx = fig.subplots(1, 2)
    for k, (scheme, p) in enumerate(profiles.items()):
        blocks = list(range(1, len(p.stream) + 1))
        ax.plot(
            blocks,
            [v / p.v0 for v in p.stream],
            "-o",
            color=f"C{k}",
            markersize=4,
            label=f"{scheme}: measured",
        )
        ax.plot(
            blocks,
            [v / p.v0 for v in p.predicted],
            "--",
            color=f"C{k}",
            label=f"{scheme}: v0 + σ_b²·Σc² (predicted)",
        )
        per = [b / (c * c) for b, c in zip(p.branch, p.scale, strict=True)]
        bx.plot(
            range(len(p.stream)), per[0::2], "-o", color=f"C{k}", markersize=4, label=f"{scheme}: attention"
        )
        bx.plot(range(len(p.stream)), per[1::2], ":s", color=f"C{k}", markersize=4, label=f"{scheme}: FFN")
    bx.axhline(sigma_b2, color="gray", lw=1, label="σ_b² (mean, none)")
    ax.set_yscale("log")
    ax.set_xlabel("after block l (2l residual additions)")
    ax.set_ylabel("stream E[x²] / v0")
    first = next(iter(profiles.values()))
    ax.set_title(
        f"residual stream at init, L={len(first.stream)} (v0={first.v0:.2e}, σ_b²={sigma_b2:.2e})",
        fontsize=10,
    )
    bx.set_yscale("log")
    bx.set_xlabel("block index")
    bx.set_ylabel("E[f²] / c²  (branch output, depth scale undone)")
    bx.set_title("what each branch adds", fontsize=10)
    for a in (ax, bx):
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _grad_figure(grads: dict[str, list[float]], path: Path, note: str) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.3))
    a1, a2 = fig.subplots(1, 2)
    for k, (placement, g) in enumerate(grads.items()):
        blocks = list(range(len(g)))
        a1.plot(blocks, g, "-o", color=f"C{k}", markersize=4, label=placement)
        a2.plot(blocks, [v / g[0] for v in g], "-o", color=f"C{k}", markersize=4, label=placement)
    a1.set_yscale("log")
    a1.set_ylabel("‖∇ block l‖ (L2)")
    a1.set_title("gradient norm per block at init")
    a2.set_yscale("log")
    a2.set_ylabel("relative to block 0")
    a2.set_title("shape: normalized to the first block")
    for ax in (a1, a2):
        ax.set_xlabel("block index (input → output)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(note, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def init_report(
    cfg: GPTConfig,
    tokens: torch.Tensor,
    out_dir: str | Path,
    seeds: Sequence[int] = (0, 1, 2),
    title: str = "",
    placements: Sequence[str] = PLACEMENTS,
) -> Path:
    """Write report.md, variance.png and grad_profile.png for `cfg` on `tokens` into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    var_cfg = cfg
    note = ""
    if cfg.norm_placement not in STREAM_PLACEMENTS:
        var_cfg = dataclasses.replace(cfg, norm_placement="pre")
        note = (
            f" The preset's placement is `{cfg.norm_placement}`, whose stream is re-normalized after "
            "every addition, so (a) uses the same model with placement `pre`."
        )
    profiles, sigma_b2 = residual_variance(var_cfg, tokens, seeds)
    grads = grad_profiles(cfg, tokens, placements, seeds)
    B, T = tokens.shape[0], tokens.shape[1] - 1
    L = cfg.n_layer
    lines = [
        f"# Init report{': ' + title if title else ''}",
        "",
        f"Model: L={L}, d={cfg.n_embd}, heads={cfg.n_head}, norm={cfg.norm}, ffn={cfg.ffn}, "
        f"init_std={cfg.init_std}, vocab={cfg.vocab_size}. Tokens: {B}×{T} real tokens from the "
        f"configured data. Every number is a mean over {len(seeds)} init seeds {list(seeds)}.",
        "",
        "## (a) Residual-stream second moment after each block",
        "",
        f"Placement `{var_cfg.norm_placement}`.{note} v0 = E[x0²] = {profiles['none'].v0:.4g} "
        f"(the embedding output). σ_b² = {sigma_b2:.4g}: the mean over the {2 * L} residual branches of "
        "the unscaled model (none) of E[f²], f being what the branch adds to the stream. Predicted "
        "v after block l = v0 + σ_b²·Σ_{j≤2l} c_j² with c_j the scheme's multiplier on W_O/W_down "
        "(seeds: v_2L = v0 + 2L·σ_b² for none). 'no cross' = v0 + Σ E[f_j²] of the scheme's own "
        "branches, i.e. what the stream would be if every branch were uncorrelated with it.",
        "",
    ]
    head = ["block"]
    for s in profiles:
        head += [f"{s} measured", f"{s} predicted", f"{s} no cross"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    v0_cells = " | ".join(f"{p.v0:.4g} | {p.v0:.4g} | {p.v0:.4g}" for p in profiles.values())
    lines.append(f"| input (v0) | {v0_cells} |")
    for i in range(L):
        cells = []
        for p in profiles.values():
            cells += [f"{p.stream[i]:.4g}", f"{p.predicted[i]:.4g}", f"{p.cumulative[i]:.4g}"]
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "What each branch adds, E[f_j²] / c_j² (the depth scale undone; the argument assumes one "
        "constant σ_b² for all j):",
        "",
    ]
    head = ["block"] + [f"{s} {part}" for s in profiles for part in ("attn", "ffn")]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    per = {s: [b / (c * c) for b, c in zip(p.branch, p.scale, strict=True)] for s, p in profiles.items()}
    for i in range(L):
        lines.append(
            f"| {i} | " + " | ".join(f"{v[2 * i]:.3g} | {v[2 * i + 1]:.3g}" for v in per.values()) + " |"
        )
    lines.append("")
    for s, v in per.items():
        attn, ffn = v[0::2], v[1::2]
        lines.append(
            f"- {s}: attention mean {sum(attn) / L:.4g} (min {min(attn):.3g}, max {max(attn):.3g}); "
            f"FFN mean {sum(ffn) / L:.4g} (min {min(ffn):.3g}, max {max(ffn):.3g})"
        )
    ratio = {s: p.stream[-1] / p.v0 for s, p in profiles.items()}
    lines += [
        "",
        "Growth of the stream over the whole stack, v_L / v0: "
        + ", ".join(f"{s} {r:.3g}" for s, r in ratio.items()),
        "",
    ]
    var_png = _variance_figure(profiles, sigma_b2, out / "variance.png")
    lines += [f"![residual variance]({var_png.name})", ""]
    dsi_note = (
        f"depth_scaled_init={cfg.depth_scaled_init} (deepnorm: none, its own β init); everything else equal"
    )
    lines += [
        "## (b) Gradient norm per block at init, by placement",
        "",
        f"‖∇_θ loss‖ over all parameters of block l, next-token loss on the same tokens; {dsi_note}. "
        "Xiong et al. 2020 (Fig. 3): post-norm gradients grow toward the output layers, "
        "pre-norm stays level.",
        "",
    ]
    head = ["block", *grads]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i in range(L):
        lines.append(f"| {i} | " + " | ".join(f"{g[i]:.4g}" for g in grads.values()) + " |")
    lines += [
        "",
        "Last block / first block: " + ", ".join(f"{p} {g[-1] / g[0]:.3g}" for p, g in grads.items()),
        "",
    ]
    grad_png = _grad_figure(grads, out / "grad_profile.png", f"L={L}, d={cfg.n_embd}; {dsi_note}")
    lines += [f"![gradient profile]({grad_png.name})", ""]
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report


def _positive_int(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{key}={value!r} must be a positive integer")
    return n


def main(argv: Sequence[str], usage: str = "") -> int:
    """scripts/init_report.py: compose the config as train.py would, load a few windows of its data
    (data.max_bytes=1000000 unless given), write the report; a bad argument exits 2 in one line."""
    from omegaconf import OmegaConf

    from gptlab.compose import compose_raw
    from gptlab.errors import USER_ERRORS, one_line

    args = list(argv)
    if any(a in ("-h", "--help") for a in args):
        print(usage.strip())
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    ours = {
        a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.split("=", 1)[0] in OPTIONS and "=" in a
    }
    overrides = [a for a in args if a.split("=", 1)[0] not in OPTIONS]
    if not any(o.startswith("data.max_bytes=") for o in overrides):
        overrides.append("data.max_bytes=1000000")
    try:
        seeds = _positive_int("seeds", ours.get("seeds", "3"))
        batch = _positive_int("batch", ours.get("batch", "8"))
        raw, choices = compose_raw(overrides, with_choices=True)
        preset = choices.get("model", "model")
        cfg = OmegaConf.to_object(raw)
        tokens, vocab = real_tokens(cfg, batch)
        model = cfg.model
        if model.vocab_size < vocab:
            model = dataclasses.replace(model, vocab_size=vocab)
        out = Path(ours.get("out", f"outputs/init_report/{preset}"))
        report = init_report(model, tokens, out, seeds=tuple(range(seeds)), title=" ".join(args) or preset)
    except USER_ERRORS as err:
        print(one_line(err), file=sys.stderr)
        return 2
    print(report)
    return 0

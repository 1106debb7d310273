"""Statistics of a model at initialization, on real tokens: the two pictures the seeds argue from.

(a) Residual-stream variance after each block for depth_scaled_init none / global / per_layer,
    beside the seeds' prediction v_k = v0 + k·σ_b² (k residual additions, 2 per block).
(b) Per-block gradient norms for pre-norm against post-norm (Xiong et al. 2020, Fig. 3).

The estimator of σ_b². "Variance" here is the second moment E[x²] over batch, positions and
channels (the stream and the branch outputs are near zero-mean at init, and the additive argument
E[(x+f)²] = E[x²] + E[f²] + 2E[x·f] holds for second moments exactly). For each residual branch j
we hook the tensor it adds to the stream (attn / ffn output; the out-norm's output for sandwich)
and take s_j = E[f_j²]. In the unscaled model (depth_scaled_init=none) every branch reads a
normalized input, so the seeds take s_j to be one number; σ_b² is their mean over the 2L branches
and over the init seeds (the report lists s_j per branch, attention and FFN apart, to show how far
that holds). Depth scaling multiplies W_O / W_down (hence f_j) by c_j, so the prediction
for every scheme comes from that one σ_b²: v_k = v0 + σ_b² · Σ_{j≤k} c_j². For none that is the
seeds' straight line v0 + k·σ_b²; for global (c² = 1/2L) it ends at v0 + σ_b² whatever L is.
The gap between the measured v_k and v0 + Σ_j s_j is the cross term 2·Σ E[x·f], i.e. how far the
independence assumption is off. Measured and predicted are both shown; nothing is fitted.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig
from gptlab.model.init import depth_scale

log = logging.getLogger(__name__)

SCHEMES = ("none", "global", "per_layer")
STREAM_PLACEMENTS = ("pre", "sandwich")  # placements whose stream is an un-normalized sum


def _build(cfg: GPTConfig, seed: int) -> GPT:
    torch.manual_seed(seed)
    model = GPT(cfg)
    model.eval()  # dropout off: the statistics are of the init, not of a random mask
    return model


@dataclass
class VarianceProfile:
    """One depth-scaling scheme: second moments of the stream after each block and of each branch."""

    scheme: str
    v0: float  # E[x0²] of the embedding output that enters block 0
    stream: list[float]  # E[x²] after block l, l = 0..L-1 (after its 2nd addition)
    branch: list[float]  # E[f_j²] of branch j = 0..2L-1 (attn of block l is 2l, ffn 2l+1)
    scale: list[float]  # c_j, the depth-scale multiplier of branch j's W_O / W_down
    predicted: list[float] = dataclasses.field(default_factory=list)  # v0 + σ_b² Σ c_j², per block

    @property
    def cumulative(self) -> list[float]:
        """v0 + Σ_{j≤k} E[f_j²] after each block: the measured stream if the cross terms were zero."""
        out, acc = [], self.v0
        for j, s in enumerate(self.branch):
            acc += s
            if j % 2 == 1:
                out.append(acc)
        return out


@torch.no_grad()
def _moments(cfg: GPTConfig, tokens: torch.Tensor, seed: int) -> tuple[float, list[float], list[float]]:
    """v0, the stream's E[x²] after each block and each branch's E[f²], for one init draw."""
    model = _build(cfg, seed)
    branch_out: dict[int, float] = {}
    stream: dict[int, float] = {}
    v0: list[float] = []
    hooks = []
    for i, block in enumerate(model.blocks):
        if cfg.norm_placement == "sandwich":
            writers = (block.attn_out_norm, block.ffn_out_norm)
        else:
            writers = (block.attn, block.ffn)
        for part, module in enumerate(writers):
            j = 2 * i + part

            def save_branch(mod: Any, args: Any, out: torch.Tensor, j: int = j) -> None:
                branch_out[j] = out.double().pow(2).mean().item()

            hooks.append(module.register_forward_hook(save_branch))

        def save_stream(mod: Any, args: Any, out: torch.Tensor, i: int = i) -> None:
            stream[i] = out.double().pow(2).mean().item()

        hooks.append(block.register_forward_hook(save_stream))
    hooks.append(
        model.blocks[0].register_forward_pre_hook(
            lambda mod, args: v0.append(args[0].double().pow(2).mean().item())
        )
    )
    try:
        model(tokens[:, :-1])  # windows hold block_size+1 tokens: inputs and shifted targets
    finally:
        for h in hooks:
            h.remove()
    L = cfg.n_layer
    return v0[0], [stream[i] for i in range(L)], [branch_out[j] for j in range(2 * L)]


def residual_variance(
    cfg: GPTConfig,
    tokens: torch.Tensor,
    seeds: Sequence[int] = (0, 1, 2),
    schemes: Sequence[str] = SCHEMES,
) -> tuple[dict[str, VarianceProfile], float]:
    """(a): one VarianceProfile per depth-scaling scheme, averaged over init seeds, with predictions
    from σ_b² measured in the unscaled model; returns (profiles, σ_b²)."""
    if cfg.norm_placement not in STREAM_PLACEMENTS:
        raise ValueError(
            f"model.norm_placement={cfg.norm_placement!r}: the stream-variance argument needs an "
            f"un-normalized residual stream; accepted: {', '.join(STREAM_PLACEMENTS)}"
        )
    profiles: dict[str, VarianceProfile] = {}
    for scheme in dict.fromkeys(("none", *schemes)):
        c = dataclasses.replace(cfg, depth_scaled_init=scheme)
        runs = [_moments(c, tokens, s) for s in seeds]
        n = len(runs)
        v0 = sum(r[0] for r in runs) / n
        stream = [sum(r[1][i] for r in runs) / n for i in range(cfg.n_layer)]
        branch = [sum(r[2][j] for r in runs) / n for j in range(2 * cfg.n_layer)]
        scale = [depth_scale(c, j // 2) for j in range(2 * cfg.n_layer)]
        profiles[scheme] = VarianceProfile(scheme, v0, stream, branch, scale)
    none = profiles["none"]
    sigma_b2 = sum(none.branch) / len(none.branch)
    for p in profiles.values():
        acc, pred = p.v0, []
        for j, c in enumerate(p.scale):
            acc += sigma_b2 * c * c
            if j % 2 == 1:
                pred.append(acc)
        p.predicted = pred
    return {s: profiles[s] for s in schemes}, sigma_b2


def _block_grad_norms(model: GPT) -> list[float]:
    """L2 norm of all of block l's parameter gradients (the telemetry's grad_norm/block_XX)."""
    out = []
    for block in model.blocks:
        sq = sum(float(p.grad.double().pow(2).sum()) for p in block.parameters() if p.grad is not None)
        out.append(math.sqrt(sq))
    return out


def grad_profiles(
    cfg: GPTConfig,
    tokens: torch.Tensor,
    placements: Sequence[str] = ("pre", "post"),
    seeds: Sequence[int] = (0, 1, 2),
) -> dict[str, list[float]]:
    """(b): per-block gradient norms at init of the next-token loss on `tokens`, for each placement
    with everything else equal (deepnorm forces depth_scaled_init=none), averaged over seeds."""
    x, y = tokens[:, :-1], tokens[:, 1:]
    out: dict[str, list[float]] = {}
    for placement in placements:
        dsi = "none" if placement == "deepnorm" else cfg.depth_scaled_init
        c = dataclasses.replace(cfg, norm_placement=placement, depth_scaled_init=dsi)
        acc = [0.0] * cfg.n_layer
        for s in seeds:
            model = _build(c, s)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            acc = [a + g for a, g in zip(acc, _block_grad_norms(model), strict=True)]
        out[placement] = [a / len(seeds) for a in acc]
    return out


# ---- the report --------------------------------------------------------------------------------


def _variance_figure(profiles: dict[str, VarianceProfile], sigma_b2: float, path: Path) -> Path:
    from gptlab.analysis.figures import plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8))
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
    plt.close(fig)
    return path


def _grad_figure(grads: dict[str, list[float]], path: Path, note: str) -> Path:
    from gptlab.analysis.figures import plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.3))
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
    plt.close(fig)
    return path


def init_report(
    cfg: GPTConfig,
    tokens: torch.Tensor,
    out_dir: str | Path,
    seeds: Sequence[int] = (0, 1, 2),
    title: str = "",
    placements: Sequence[str] = ("pre", "post", "sandwich", "deepnorm"),
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


def real_tokens(train_cfg: Any, batch: int) -> tuple[torch.Tensor, int]:
    """`batch` windows (block_size+1 tokens) of the configured data's val split, in order, and the
    tokenizer's vocabulary size, through the project's TokenDataModule."""
    from gptlab.data.datamodule import TokenDataModule, collate_windows

    dm = TokenDataModule(train_cfg.data, block_size=train_cfg.model.block_size, seed=train_cfg.seed)
    dm.prepare()
    val = dm.dataset("val")
    if len(val) < batch:
        raise ValueError(
            f"data: the val split has {len(val)} windows, fewer than batch={batch}; "
            "raise data.max_bytes or lower batch"
        )
    return collate_windows([val[k] for k in range(batch)]), int(dm.vocab_size or 0)

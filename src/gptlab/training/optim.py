"""AdamW with decay on matrices only, or Muon on the hidden matrices with AdamW on the rest
(optim.name=muon); the LR schedules' factors are gptlab.training.schedules' (lr_factor, re-exported)."""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
from torch import nn

from gptlab.config import OptimConfig, muon_refusals
from gptlab.model import mup
from gptlab.model.config import GPTConfig
from gptlab.training.muon import BatchedMuon
from gptlab.training.schedules import lr_factor as lr_factor  # re-exported: its callers import it here

PLAIN, GAINS = (True, 1.0, 1.0), (False, 1.0, 1.0)  # (decays, LR factor, ε factor) of groups 0 and 1


def param_groups(
    model: nn.Module, weight_decay: float, lr: float, eps: float, skip: Callable[[str], bool] | None = None
) -> list[dict]:
    """Matrices (linear weights, embeddings) decay; gains and biases do not. `skip(name)`: leave
    that parameter out (Muon's matrices, under optim.name=muon).

    Under μP (model.parametrization=mup) the hidden matrices move to groups of their own at
    lr × mup.lr_mult (1/fan-in multiplier) and weight decay ÷ the same multiplier, so AdamW's
    per-step decay lr·wd is the base width's at every width (what microsoft's `mup` MuAdamW does;
    Wang & Aitchison 2024 argue for a width-independent 1/(lr·wd)); group 0 keeps the configured
    LR (the one logged). Under CompleteP every parameter inside the blocks (matrices, gains, biases)
    has Adam ε × mup.adam_eps_mult (1/m_L), in groups of their own.
    """
    cfg = getattr(model, "cfg", None)
    ours = isinstance(cfg, GPTConfig)
    buckets: dict[tuple[bool, float, float], list[nn.Parameter]] = {PLAIN: [], GAINS: []}
    for name, p in model.named_parameters():
        if p.requires_grad and not (skip is not None and skip(name)):
            lr_m, eps_m = (mup.lr_mult(cfg, name), mup.adam_eps_mult(cfg, name)) if ours else (1.0, 1.0)
            buckets.setdefault((p.dim() >= 2, lr_m, eps_m), []).append(p)
    groups = [
        {"params": buckets.pop(PLAIN), "weight_decay": weight_decay},
        {"params": buckets.pop(GAINS), "weight_decay": 0.0},
    ]
    for (decays, m, e), params in sorted(buckets.items()):
        groups.append(
            {
                "params": params,
                "weight_decay": weight_decay / m if decays else 0.0,
                "lr": lr * m,
                "eps": eps * e,
            }
        )
    return groups


# where torch's fused AdamW runs: one kernel over all parameters instead of a Python loop of ~10
# ops per tensor (docs/performance.md, "Short runs"), and the non-finite guard's `found_inf`
# without a sync
FUSED_ADAMW_DEVICES = ("cuda", "cpu")


def build_adamw(model: nn.Module, cfg: OptimConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW, fused where torch has the kernel (FUSED_ADAMW_DEVICES). Torch's AdamW decays by lr·wd
    per step; param_groups keeps that product a μP hidden group's base value (as microsoft's
    MuAdamW does)."""
    return torch.optim.AdamW(
        param_groups(model, cfg.weight_decay, cfg.lr, cfg.eps),
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        fused=device_type in FUSED_ADAMW_DEVICES,
    )


def build_optimizer(model: nn.Module, cfg: OptimConfig, device_type: str) -> torch.optim.Optimizer:
    """optim.name's optimizer: AdamW, or MuonAdamW (one torch optimizer, so one LambdaLR, one
    state_dict and Lightning's automatic optimization cover both halves)."""
    return build_muon(model, cfg, device_type) if cfg.name == "muon" else build_adamw(model, cfg, device_type)


# a mixture-of-experts FFN's hidden matrices: the expert stacks (n_experts, in, out) and the shared
# experts' nn.Linear weights; its router (n_experts, d) stays on AdamW, as the head does (docs/moe.md)
MOE_HIDDEN = re.compile(
    r"blocks\.\d+\.ffn\.(experts\.(gate|up|down)_proj|shared\.(gate|up|down)_proj\.weight)$"
)


def is_muon_param(name: str) -> bool:
    """Muon's parameters: the hidden matrices (attention q/k/v/out, FFN gate/up/down, MoE experts),
    not the embeddings, the head, a router, norm gains or biases (Jordan's Muon, modded-nanogpt and
    Moonlight's split)."""
    return bool(mup.HIDDEN.search(name) or MOE_HIDDEN.search(name))


def build_muon(model: nn.Module, cfg: OptimConfig, device_type: str) -> MuonAdamW:
    """torch.optim.Muon (batched per shape: training/muon.py) on the hidden matrices at
    lr × muon_lr_mult with decoupled decay weight_decay, and build_adamw's groups (lr, weight_decay,
    betas, ε) on every other parameter. Under adjust_lr_fn=match_rms_adamw torch scales each
    matrix's step by 0.2·sqrt(max(A, B)) so its update RMS is AdamW's typical one (Liu et al. 2025,
    Moonlight, arXiv 2502.16982): one optim.lr serves both halves and an LR grid is comparable with
    AdamW's."""
    mcfg = getattr(model, "cfg", None)
    if isinstance(mcfg, GPTConfig) and mcfg.uses_mup:
        muon_refusals(mcfg.parametrization, "auto")
    hidden = [p for n, p in model.named_parameters() if p.requires_grad and is_muon_param(n)]
    matrices, stacks = [p for p in hidden if p.ndim == 2], [p for p in hidden if p.ndim == 3]
    muon = BatchedMuon(
        [{"params": matrices, "lr": cfg.lr * cfg.muon_lr_mult}],
        lr=cfg.lr * cfg.muon_lr_mult,
        weight_decay=cfg.weight_decay,
        momentum=cfg.muon_momentum,
        nesterov=cfg.muon_nesterov,
        ns_steps=cfg.muon_ns_steps,
        adjust_lr_fn=cfg.muon_adjust_lr,
    )
    if stacks:  # the experts, each orthogonalised on its own (training/muon.py)
        muon.add_param_group({"params": stacks, "lr": cfg.lr * cfg.muon_lr_mult})
    adamw = torch.optim.AdamW(
        param_groups(model, cfg.weight_decay, cfg.lr, cfg.eps, skip=is_muon_param),
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        fused=device_type in FUSED_ADAMW_DEVICES,
    )
    return MuonAdamW(adamw, muon)


class MuonAdamW(torch.optim.Optimizer):
    """AdamW's groups then Muon's, as one optimizer: its param_groups are the two optimizers' own
    group dicts (a scheduler's LR reaches both), its state one dict both share, its step both steps.

    Lightning runs several optimizers only under manual optimization, which would bypass the
    module's clipping hook and the non-finite guard; one optimizer keeps them. Group 0 is AdamW's
    decayed matrices at optim.lr, the LR logged.

    The non-finite guard drops a bad step through `found_inf` (a device flag, no host read) when
    `takes_found_inf`: the AdamW half fused (CUDA, CPU) reads it as GradScaler's flag, the Muon half
    (BatchedMuon) keeps its weights and buffers by `torch.where`. Otherwise (a device without fused
    AdamW) the guard clears the gradients, which both halves honour.
    """

    found_inf: torch.Tensor | None = None

    def __init__(self, adamw: torch.optim.AdamW, muon: BatchedMuon) -> None:
        self.adamw, self.muon = adamw, muon
        super().__init__([*adamw.param_groups, *muon.param_groups], {})
        self._link()

    def _link(self) -> None:
        n = len(self.adamw.param_groups)
        # each class's own __setstate__: AdamW fills its group defaults and tensor steps on a load
        self.adamw.__setstate__({"state": self.state, "param_groups": self.param_groups[:n]})
        self.muon.__setstate__({"state": self.state, "param_groups": self.param_groups[n:]})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.takes_found_inf:
            self.adamw.found_inf = self.muon.found_inf = self.found_inf  # type: ignore[attr-defined]
        self.adamw.step()
        self.muon.step()
        return loss

    @property
    def takes_found_inf(self) -> bool:
        """Both halves skip on a device flag: Muon's always, AdamW's when fused."""
        return bool(self.adamw.defaults.get("fused"))

    def load_state_dict(self, state_dict: dict) -> None:
        """Optimizer.load_state_dict builds new group dicts and a new state: hand them to both halves."""
        super().load_state_dict(state_dict)
        self._link()

"""A mixture of experts in place of the FFN (model/ffn=moe): a token-choice top-k router scored in fp32,
experts run grouped (torch._grouped_mm) or one matmul each, balanced by an auxiliary loss or a bias.

y(x) = Σ_{e ∈ topk} g_e(x) · FFN_e(x) + Σ_shared FFN_s(x). Shapes stay static: every token's k
assignments are sorted by expert and run as one (N·k, d) batch, whatever the routing, so torch.compile
traces one graph. Each forward leaves its routing (aux loss, z loss, tokens per expert, dropped
assignments) on the layer for the training loss and telemetry; `routing_loss`, `update_expert_bias`
and `routing_stats` read them. Formulas and their sources: docs/moe.md.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import is_fake

from gptlab.model.config import GPTConfig
from gptlab.model.ffn import ACTIVATIONS, FeedForward


def grouped_mm_available() -> bool:
    """Whether this torch build has torch._grouped_mm (2.8+; on CPU float32 and bfloat16 only)."""
    return hasattr(torch, "_grouped_mm")


class Experts(nn.Module):
    """n_experts FFNs stored as (E, in, out) stacks: x @ W[e] is expert e's projection."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        assert cfg.moe is not None
        E, d, h = cfg.moe.n_experts, cfg.n_embd, cfg.expert_hidden
        self.act = ACTIVATIONS[cfg.ffn_kind]
        self.gate_proj = nn.Parameter(torch.empty(E, d, h)) if cfg.gated else None
        self.up_proj = nn.Parameter(torch.empty(E, d, h))
        self.down_proj = nn.Parameter(torch.empty(E, h, d))

    def grouped(self, xs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """All experts in three grouped matmuls: rows offs[e-1]:offs[e] of xs go to expert e."""
        offs = counts.cumsum(0).to(torch.int32)
        on = xs.device.type
        dtype = torch.get_autocast_dtype(on) if torch.is_autocast_enabled(on) else xs.dtype

        fake = not torch.compiler.is_compiling() and dtype == torch.float32 and is_fake(xs)

        def mm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            if fake:  # the planner's fake step: grouped_mm's meta kernel takes bf16 only; same shapes
                return a @ w[0]
            return torch._grouped_mm(a.to(dtype), w.to(dtype), offs=offs)

        h = mm(xs, self.up_proj)
        h = self.act(mm(xs, self.gate_proj)) * h if self.gate_proj is not None else self.act(h)
        return mm(h, self.down_proj)

    def loop(self, xs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """One matmul per expert over its contiguous rows (the sizes reach the host: eager only)."""
        outs = []
        for e, rows in enumerate(xs.split(counts.tolist())):
            h = rows @ self.up_proj[e]
            h = self.act(rows @ self.gate_proj[e]) * h if self.gate_proj is not None else self.act(h)
            outs.append(h @ self.down_proj[e])
        return torch.cat(outs)


class MoE(nn.Module):
    """Router → top-k experts (sorted, static shapes) → gate-weighted sum, plus the shared experts."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        assert cfg.moe is not None
        self.mcfg = m = cfg.moe
        self.router = nn.Linear(cfg.n_embd, m.n_experts, bias=False)
        # DeepSeek-V3's balancing bias: added to the scores for choosing experts only; no gradient,
        # moved by update_expert_bias after each optimizer step; a buffer, so checkpoints keep it
        self.register_buffer("expert_bias", torch.zeros(m.n_experts))
        # this optimizer step's tokens per expert: a plain attribute, not a buffer, which DDP would
        # overwrite with rank 0's at every forward (broadcast_buffers) between accumulated micro-batches
        self.step_load: torch.Tensor | None = None
        self.experts = Experts(cfg)
        self.shared = FeedForward(cfg, hidden=m.n_shared * cfg.expert_hidden) if m.n_shared else None
        self.drop = nn.Dropout(cfg.dropout)
        aligned = cfg.n_embd % 8 == 0 and cfg.expert_hidden % 8 == 0  # 16-byte strides in bf16
        self.grouped = m.impl == "grouped" or (m.impl == "auto" and grouped_mm_available() and aligned)
        # the last forward's routing (detached but the losses): the loss path and telemetry read these
        self.aux_loss: torch.Tensor | None = None
        self.z_loss: torch.Tensor | None = None
        self.load: torch.Tensor | None = None  # tokens (assignments) per expert, dropped ones included
        self.dropped: torch.Tensor | None = None  # assignments over capacity
        self.entropy_sum: torch.Tensor | None = None  # Σ over tokens of the router distribution's entropy
        # this optimizer step's [Σ entropy, tokens, Σ aux, Σ z, forwards, Σ dropped] (telemetry reads it)
        self.step_sums: torch.Tensor | None = None

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Router logits (N, E) in fp32 at least (whatever autocast says), scores, the chosen experts
        (N, k) and their gate weights (N, k)."""
        dtype = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(x.device.type, enabled=False):
            logits = F.linear(x.to(dtype), self.router.weight.to(dtype))
        scores = logits.softmax(dim=-1) if self.mcfg.router == "softmax" else logits.sigmoid()
        choice = scores + self.expert_bias if self.mcfg.balance == "bias" else scores
        chosen = choice.topk(self.mcfg.top_k, dim=-1).indices
        gates = scores.gather(-1, chosen)  # the bias chooses; the gate weights are the scores alone
        if self.mcfg.norm_topk:
            gates = gates / gates.sum(dim=-1, keepdim=True)
        return logits, scores, chosen, gates

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape, E, k = x.shape, self.mcfg.n_experts, self.mcfg.top_k
        x = x.reshape(-1, shape[-1])
        N = x.shape[0]
        logits, scores, chosen, gates = self.route(x)
        flat = chosen.reshape(-1)  # assignment a = token a // k, its (a % k)-th choice
        order = flat.argsort(stable=True)  # by expert; within one, in token order (capacity keeps the first)
        counts = torch.zeros(E, dtype=torch.long, device=x.device).scatter_add_(
            0, flat, torch.ones_like(flat)
        )
        token, expert, gate = order // k, flat[order], gates.reshape(-1)[order]
        rank = torch.arange(N * k, device=x.device) - (counts.cumsum(0) - counts)[expert]
        kept = rank < self.mcfg.capacity(N)  # all true when dropless
        if self.mcfg.capacity_factor is not None:
            gate = gate * kept
        xs = x[token]
        ys = self.experts.grouped(xs, counts) if self.use_grouped(xs) else self.experts.loop(xs, counts)
        y = torch.zeros(N, shape[-1], dtype=ys.dtype, device=x.device)
        y = self.drop(y.index_add(0, token, ys * gate.to(ys.dtype)[:, None]))
        if self.shared is not None:
            y = y + self.shared(x)
        self.record(logits, scores, counts, kept)
        return y.reshape(shape)

    def use_grouped(self, xs: torch.Tensor) -> bool:
        """impl=grouped, or auto where torch._grouped_mm runs: float32 or bfloat16 eagerly; under
        torch.compile bfloat16 only (its meta kernel refuses float32 on this build, torch 2.13)."""
        if self.mcfg.impl != "auto":
            return self.grouped
        on = xs.device.type
        dtype = torch.get_autocast_dtype(on) if torch.is_autocast_enabled(on) else xs.dtype
        accepted = (torch.bfloat16,) if torch.compiler.is_compiling() else (torch.float32, torch.bfloat16)
        return self.grouped and dtype in accepted

    def record(
        self, logits: torch.Tensor, scores: torch.Tensor, counts: torch.Tensor, kept: torch.Tensor
    ) -> None:
        """Aux loss E·Σ_i f_i·P_i (f_i: expert i's share of the N·k assignments, P_i: its mean router
        probability; Switch eq. 4, OLMoE eq. 2), z loss mean(logsumexp(logits)²) (ST-MoE), the load."""
        E, assigned = self.mcfg.n_experts, kept.numel()
        f = counts.float() / assigned
        probs = scores if self.mcfg.router == "softmax" else scores / scores.sum(dim=-1, keepdim=True)
        self.aux_loss = E * (f * probs.mean(dim=0)).sum()
        self.z_loss = torch.logsumexp(logits, dim=-1).pow(2).mean()
        self.load = counts.detach()
        self.dropped = (~kept).sum()
        with torch.no_grad():  # N·E elementwise, no host read: cheap beside the experts' matmuls
            self.entropy_sum = torch.special.entr(probs).sum(dim=-1).sum()


def moe_layers(model: nn.Module) -> list[MoE]:
    """The model's MoE layers, in depth order."""
    return [m for m in model.modules() if isinstance(m, MoE)]


def routing_loss(model: nn.Module) -> torch.Tensor | None:
    """The last forward's balancing terms summed over layers: aux_loss_coef · aux (balance=aux_loss)
    + router_z_loss · z; None for a dense model."""
    total: torch.Tensor | None = None
    for layer in moe_layers(model):
        m = layer.mcfg
        if layer.aux_loss is None or layer.z_loss is None:
            continue
        term = m.router_z_loss * layer.z_loss
        if m.balance == "aux_loss":
            term = term + m.aux_loss_coef * layer.aux_loss
        total = term if total is None else total + term
    return total


@torch.no_grad()
def routing_terms(model: nn.Module) -> dict[str, torch.Tensor]:
    """The last forward's terms before their coefficients, summed over MoE layers (what the module logs):
    moe_aux_loss (Σ E·Σ_i f_i·P_i) and moe_z_loss; the penalty that reached the loss, moe_routing_loss."""
    layers = [m for m in moe_layers(model) if m.aux_loss is not None and m.z_loss is not None]
    penalty = routing_loss(model)
    if not layers or penalty is None:
        return {}
    return {
        "moe_aux_loss": torch.stack([m.aux_loss for m in layers]).sum(),  # type: ignore[misc]
        "moe_z_loss": torch.stack([m.z_loss for m in layers]).sum(),  # type: ignore[misc]
        "moe_routing_loss": penalty.detach(),
    }


@torch.no_grad()
def accumulate_load(model: nn.Module, fresh: bool = False) -> None:
    """Add each layer's last tokens per expert to this optimizer step's load (training forwards only:
    not validation, not a spike's re-run), which update_expert_bias reads, and its last routing sums
    to step_sums, which telemetry reads. `fresh`: the step's first micro-batch (start both anew)."""
    for layer in moe_layers(model):
        if layer.load is None or layer.aux_loss is None or layer.z_loss is None:
            continue
        load = layer.load.float()
        sums = torch.stack(
            [
                layer.entropy_sum,  # type: ignore[list-item]
                load.sum() / layer.mcfg.top_k,  # tokens: every one has k assignments, dropped included
                layer.aux_loss.detach(),
                layer.z_loss.detach(),
                torch.ones_like(load[0]),
                layer.dropped.float(),  # type: ignore[union-attr]
            ]
        ).double()
        if fresh or layer.step_load is None or layer.step_sums is None:
            layer.step_load, layer.step_sums = load, sums
        else:
            layer.step_load, layer.step_sums = layer.step_load + load, layer.step_sums + sums


@torch.no_grad()
def update_expert_bias(model: nn.Module) -> None:
    """DeepSeek-V3's auxiliary-loss-free balancing, after an optimizer step: b_i += γ·sign(mean load −
    load_i) over the step's tokens (summed over ranks, so every rank moves its bias alike)."""
    for layer in moe_layers(model):
        load, layer.step_load = layer.step_load, None
        if layer.mcfg.balance == "bias" and load is not None:
            if dist.is_available() and dist.is_initialized():
                dist.all_reduce(load)
            layer.expert_bias += layer.mcfg.bias_update_rate * torch.sign(load.mean() - load)


def routing_stats(model: nn.Module) -> dict[str, torch.Tensor]:
    """Per MoE layer, from its last forward: tokens per expert, max/mean load, aux and z loss, the
    bias and dropped assignments, keyed moe/block_XX/<name> (for telemetry; tensors on the device)."""
    out: dict[str, torch.Tensor] = {}
    for name, layer in model.named_modules():
        if not isinstance(layer, MoE) or layer.load is None:
            continue
        block = f"block_{int(name.split('.')[1]):02d}" if name.startswith("blocks.") else name
        load = layer.load.float()
        out |= {
            f"moe/{block}/tokens_per_expert": load,
            f"moe/{block}/max_over_mean_load": load.max() / load.mean(),
            f"moe/{block}/aux_loss": layer.aux_loss.detach(),  # type: ignore[union-attr]
            f"moe/{block}/z_loss": layer.z_loss.detach(),  # type: ignore[union-attr]
            f"moe/{block}/expert_bias": layer.expert_bias.detach(),
            f"moe/{block}/dropped": layer.dropped.float(),  # type: ignore[union-attr]
        }
    return out


def inactive_params(model: nn.Module) -> int:
    """Expert parameters a token does not pass through: (n_experts − top_k) experts per MoE layer."""
    total = 0
    for layer in moe_layers(model):
        per_expert = sum(p[0].numel() for p in layer.experts.parameters())
        total += (layer.mcfg.n_experts - layer.mcfg.top_k) * per_expert
    return total

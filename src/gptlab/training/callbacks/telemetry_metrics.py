"""Layer telemetry's numbers, from tensors to the logged keys: which parameter is in which group (one
0/1 matrix, so every per-group sum of squares is one small matrix product), and a log step's sums
packed into one SUM and one MAX all-reduce, read to the host once and named (the key formats
docs/architecture.md lists and gptlab.dashboards.keys follows). LayerTelemetry decides when.

Under FSDP2 the local gradients and weights are shards (sum their squares over ranks); under DDP
replicas (count once). act_rms is the mean over ranks of each rank's mean square; entropy and logit
means are token-weighted (Σ over ranks / Σ counts); attention and logit maxima are MAX-reduced.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from gptlab.training.callbacks import moe_telemetry
from gptlab.training.callbacks.groups import group_names, local


@dataclass
class GroupIndex:
    """The telemetry groups of a model's parameters (a tied matrix once, as tok_emb): `member` (G, P)
    is 1 where parameter p is in group g, `numel` (G,) the group's local element count."""

    params: list[nn.Parameter]
    names: list[str]
    groups: list[str]  # total, embed, block_XX and its /attn, /ffn, final_norm, head
    blocks: list[str]  # the block_XX groups
    block_rows: list[int]  # their rows in `member`
    sharded: bool  # FSDP2 DTensors: each rank holds a shard
    member: torch.Tensor
    numel: torch.Tensor
    # model.norm=dyt: (site, row in `params`) of each DyT α, block_XX/<norm's name> or final_norm
    alphas: list[tuple[str, int]] = field(default_factory=list)
    # the parameters of the blocks (their rows in `params`): update_ratio/update_rms are logged per
    # block only, so only these are copied before a log step's update (not the embedding, the
    # head, the final norm: at GPT-2's shape the embedding alone is 31 % of the weights)
    updated: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, model: nn.Module, device: torch.device) -> GroupIndex:
        """The index of `model` (a GPT), built at the first training batch, when its parameters are
        on their device and, under FSDP2, sharded."""
        params: list[nn.Parameter] = []
        names: list[str] = []
        for name, p in model.named_parameters():  # a tied matrix appears once, as tok_emb
            params.append(p)
            names.append(name)
        groups = ["total", "embed"]
        groups += [f"block_{i:02d}{s}" for i in range(len(model.blocks)) for s in ("", "/attn", "/ffn")]
        groups += ["final_norm"] if model.final_norm is not None else []
        groups += ["head"] if not model.cfg.tie_embeddings else []
        index = {g: k for k, g in enumerate(groups)}
        # filled as Python lists, made a tensor once: one op, not one per entry (under the
        # planner's FakeTensorMode each entry's write was a dispatched op: planning.step)
        rows = [[0.0] * len(names) for _ in groups]
        for j, name in enumerate(names):
            rows[index["total"]][j] = 1.0
            for g in group_names(name):
                rows[index[g]][j] = 1.0
        member = torch.tensor(rows, dtype=torch.float32).reshape(len(groups), len(names))
        blocks = [g for g in groups if re.fullmatch(r"block_\d+", g)]
        alphas = [(site, j) for j, name in enumerate(names) if (site := dyt_site(name)) is not None]
        numel = torch.tensor([float(local(p).numel()) for p in params], dtype=torch.float64)
        updated = [j for j, name in enumerate(names) if any(g in blocks for g in group_names(name))]
        return cls(
            params=params,
            names=names,
            groups=groups,
            blocks=blocks,
            block_rows=[index[b] for b in blocks],
            sharded=any(hasattr(p, "to_local") for p in params),
            member=member.to(device),
            numel=(member.double() @ numel).to(device),  # local elements per group
            alphas=alphas,
            updated=updated,
        )

    def group_sq(self, tensors: list[torch.Tensor], cols: list[int] | None = None) -> torch.Tensor:
        """(G,) per-group sums of squares of one tensor per parameter (this rank's part of each), or
        of one per parameter in `cols` (rows of `params`; the groups' other members count 0)."""
        norms = torch._foreach_norm([local(t).detach() for t in tensors], 2)
        sq = torch.stack([n.float() for n in norms]).pow(2).to(self.member.device)
        return (self.member if cols is None else self.member[:, cols]) @ sq


def dyt_site(param_name: str) -> str | None:
    """The telemetry site of a DyT α (blocks.3.attn_norm.alpha: block_03/attn_norm), else None."""
    m = re.fullmatch(r"blocks\.(\d+)\.(\w+)\.alpha", param_name)
    if m is not None:
        return f"block_{int(m.group(1)):02d}/{m.group(2)}"
    return "final_norm" if param_name == "final_norm.alpha" else None


def reduce_metrics(
    index: GroupIndex,
    fwd: dict[str, torch.Tensor],
    grad_sq: torch.Tensor,
    param_sq: torch.Tensor,
    delta_sq: torch.Tensor,
    world: int,
    coef: torch.Tensor | None,
    routing: moe_telemetry.MoEPack | None = None,
) -> dict[str, float]:
    """Pack, all-reduce (one SUM, one MAX), read once, name. `fwd`: the forward side's sums of the
    step (act/<i>, attn/<i>, logits); `coef`: the factor clipping applied, when it did; `routing`:
    the MoE layers' step (loads summed over ranks in the same SUM; moe_telemetry.py)."""
    dev = grad_sq.device
    replicated = 1.0 if index.sharded else 1.0 / world  # DDP replicas: count once in the SUM
    n_points = len(index.blocks) + 1
    acts = [fwd.get(f"act/{j}") for j in range(n_points)]
    has_act = all(a is not None for a in acts)
    attn = [fwd.get(f"attn/{j}") for j in range(len(index.blocks))]
    has_attn = all(a is not None for a in attn)
    gates = [fwd.get(f"gate/{j}") for j in range(len(index.blocks))]
    has_gate = bool(gates) and all(g is not None for g in gates)
    logits = fwd.get("logits")
    sums = [
        grad_sq.double() * replicated,
        param_sq.double() * replicated,
        delta_sq.double() * replicated,
        index.numel * replicated,
    ]
    maxes = []
    if has_act:
        sums.append(torch.stack([a.to(dev).double() for a in acts if a is not None]) / world)
    if has_attn:
        # (L, [max, Σent, Σsink, rows, sink rows])
        stacked = torch.stack([a.to(dev) for a in attn if a is not None])
        sums.append(stacked[:, 1:].reshape(-1))
        maxes.append(stacked[:, 0])
    if has_gate:  # (L, [Σ gate, gate values])
        sums.append(torch.stack([g.to(dev) for g in gates if g is not None]).reshape(-1))
    if logits is not None:
        logits = logits.to(dev)
        sums.append(logits[[0, 1, 3, 4, 5]])
        maxes.append(logits[2:3])
    if index.alphas:  # each α after the step: a replica (DDP) or one rank's one-element shard (FSDP2)
        alpha = [local(index.params[j]).detach().float().sum().to(dev) for _, j in index.alphas]
        sums.append(torch.stack(alpha).double() * replicated)
    if routing is not None:  # each rank's own tokens: summed, not counted once
        sums.append(moe_telemetry.sum_part(routing).to(dev))
        maxes.append(moe_telemetry.max_part(routing).to(dev))
    packed = torch.cat(sums)
    top = torch.cat(maxes) if maxes else packed.new_zeros(0)
    if world > 1 and dist.is_available() and dist.is_initialized():
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        if top.numel():
            dist.all_reduce(top, op=dist.ReduceOp.MAX)
    tail = [top]
    if coef is not None:  # set by the module only when optim.grad_clip > 0
        tail.append(coef.detach().reshape(1).to(packed))
    values = torch.cat([packed, *tail]).tolist()  # the one host sync, on log steps only
    n, nb = len(index.groups), len(index.blocks)
    grad = [math.sqrt(v) for v in values[:n]]
    param = [math.sqrt(v) for v in values[n : 2 * n]]
    delta = [math.sqrt(v) for v in values[2 * n : 3 * n]]
    numel = values[3 * n : 4 * n]
    at = 4 * n
    metrics: dict[str, float] = {f"grad_norm/{g}": v for g, v in zip(index.groups, grad, strict=True)}
    for g, v in zip(index.groups, param, strict=True):
        if g == "total" or "/" not in g:
            metrics[f"param_norm/{g}"] = v
    for row, block in zip(index.block_rows, index.blocks, strict=True):
        metrics[f"update_ratio/{block}"] = delta[row] / max(param[row], 1e-12)
        metrics[f"update_rms/{block}"] = delta[row] / math.sqrt(max(numel[row], 1.0))
    if has_act:
        names = ["embed", *index.blocks]
        metrics.update(
            {f"act_rms/{k}": math.sqrt(v) for k, v in zip(names, values[at : at + n_points], strict=True)}
        )
        at += n_points
    if has_attn:
        rows = values[at : at + 4 * nb]
        for j, block in enumerate(index.blocks):
            ent, sink, n, n_sink = rows[4 * j : 4 * j + 4]
            metrics[f"attn_entropy/{block}"] = ent / max(n, 1.0)
            metrics[f"attn_sink/{block}"] = sink / max(n_sink, 1.0)
        at += 4 * nb
    if has_gate:
        pairs = values[at : at + 2 * nb]
        for j, block in enumerate(index.blocks):
            metrics[f"attn_gate/{block}"] = pairs[2 * j] / max(pairs[2 * j + 1], 1.0)
        at += 2 * nb
    if logits is not None:
        s, s2, sz, count, positions = values[at : at + 5]
        mean = s / count
        metrics["logits/mean"] = mean
        metrics["logits/std"] = math.sqrt(max(s2 / count - mean * mean, 0.0))
        metrics["logits/log_z_mean"] = sz / positions
        at += 5
    for k, (site, _) in enumerate(index.alphas):
        metrics[f"dyt_alpha/{site}"] = values[at + k]
    at += len(index.alphas)
    n_routing = routing.loads.numel() + routing.sums.numel() if routing is not None else 0
    routing_sums = values[at : at + n_routing]
    at_max = len(packed)
    if has_attn:
        for j, block in enumerate(index.blocks):
            metrics[f"attn_logit_max/{block}"] = values[at_max + j]
        at_max += nb
    if logits is not None:
        metrics["logits/max"] = values[at_max]
        at_max += 1
    if routing is not None:
        n_max = 2 * len(routing.blocks)
        metrics.update(moe_telemetry.name(routing, routing_sums, values[at_max : at_max + n_max]))
        at_max += n_max
    if coef is not None:  # the clipping factor the module applied, not recomputed here
        metrics["grad_norm/clip_coef"] = values[at_max]
    return metrics

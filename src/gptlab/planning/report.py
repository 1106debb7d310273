"""The planner's report as text: what was planned, parameters, memory, compute, fit, alternatives."""

from __future__ import annotations

from gptlab.model import GPTConfig
from gptlab.planning.plan import GIB, Alternative, Plan, budget
from gptlab.planning.step import PARTS, Setup


def gib(n: float) -> str:
    """GiB, or MiB below one GiB (a CPU-sized model)."""
    if abs(n) < GIB:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / GIB:.2f} GiB"


def count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def describe(s: Setup) -> str:
    how = (
        f"FSDP2 over {s.world_size} devices"
        if s.fsdp
        else (f"DDP over {s.world_size} devices (replicas)" if s.world_size > 1 else "1 device")
    )
    ac = getattr(s.model, "activation_checkpointing", "none")
    return (
        f"{how}, {s.precision}, micro-batch {s.micro_batch} × accumulate {s.accumulate} × "
        f"{s.world_size} device(s) × {s.model.block_size} tokens = {s.tokens_per_step:,} tokens/step, "
        f"activation checkpointing {ac}"
    )


def fit_line(p: Plan) -> str:
    verdict = "fits" if p.fits else "does NOT fit"
    return (
        f"{verdict}: peak {gib(p.memory.peak)} of {gib(p.usable)} usable on a {p.gpu.name} "
        f"({p.gpu.memory_gib:g} GiB less headroom), {p.memory.peak / p.usable:.0%}"
    )


def speed_line(p: Plan) -> str:
    if p.speed is None:
        return f"step time: no measured MFU for a {p.gpu.name} in the table; give plan.mfu=<fraction>"
    sp = p.speed
    ac = f", ×{sp.recompute:.2f} for recompute" if sp.recompute > 1 else ""
    return (
        f"step {duration(sp.step_time)}, {sp.tokens_per_sec:,.0f} tokens/s at MFU {sp.mfu:.3f}{ac} "
        f"(MFU from {sp.source})"
    )


def heads(cfg: GPTConfig) -> str:
    """'12 heads', or '32 heads (8 key/value)' for grouped-query and multi-query attention."""
    kv = "" if cfg.kv_heads == cfg.n_head else f" ({cfg.kv_heads} key/value)"
    return f"{cfg.n_head} heads{kv}"


def optimizer_line(s: Setup) -> str:
    """Which optimizer was planned and what state it keeps (gptlab.training.optim)."""
    if s.optim.name == "muon":
        return (
            "muon: torch.optim.Muon on the hidden matrices (one momentum buffer each), AdamW on "
            "embeddings, head, gains and biases (two moments each)"
        )
    return "adamw: two moments per parameter"


def planned_step(s: Setup) -> str:
    """Which step the peak is of: a telemetry log step (its extras named) or a plain one, and the
    tasks' scoring forward when the run scores tasks."""
    if s.log_step:
        extras = ["logit statistics", "a copy of the weights for the update norms"]
        if s.attention:
            extras.insert(0, "q/k kept for the attention statistics")
        if s.act_rms:
            extras.append("act_rms")
        what = f"a telemetry log step ({', '.join(extras)})"
    else:
        what = "a plain training step (telemetry off)"
    if s.task_batch:
        tokens = min(s.task_tokens or s.model.block_size, s.model.block_size)
        what += f", then the tasks' scoring forward ({s.task_batch} requests of {tokens} tokens)"
    return what


def moe_lines(cfg: GPTConfig) -> list[str]:
    """Under ffn=moe: the experts, and what the measured activations assume of the routing."""
    m = cfg.moe if cfg.ffn == "moe" else None
    if m is None:
        return []
    drops = "dropless" if m.capacity_factor is None else f"capacity factor {m.capacity_factor:g}"
    return [
        f"experts    {m.n_experts}×{m.expert_ffn} of width {cfg.expert_hidden}, top-{m.top_k}, "
        f"{m.n_shared} shared, {drops}: all expert weights and their optimizer state counted; the "
        "routed activations are the step's tokens·top_k rows, sorted by expert, the same for any "
        "imbalance (no per-expert padding to assume)"
    ]


def format_plan(p: Plan, tokens: float | None = None) -> str:
    s, m = p.setup, p.memory
    cfg = s.model
    lines = [
        f"model      {cfg.n_layer} layers, d={cfg.n_embd}, {heads(cfg)}, ffn {cfg.ffn} "
        f"{cfg.hidden_dim}, T={cfg.block_size}, vocab {cfg.vocab_size:,}"
        + (f" ({s.vocab_source})" if s.vocab_source else ""),
        f"setup      {describe(s)}",
        *moe_lines(cfg),
        f"optimizer  {optimizer_line(s)}",
        "",
        f"{'parameters':<14}{'total':>12}{'per device':>14}",
    ]
    for name, n in p.params.items():
        if n:
            lines.append(f"  {name:<12}{count(n):>12}{count(p.params_device[name]):>14}")
    lines.append(f"  {'all':<12}{count(p.total_params):>12}{count(sum(p.params_device.values())):>14}")
    lines += [
        "",
        f"memory per device at the step's peak (one fake training step, {m.seconds:.1f} s to measure)",
        f"  planned: {planned_step(s)}",
    ]
    for part in PARTS:
        lines.append(f"  {part:<14}{gib(m.part(part)):>14}")
    lines.append(f"  {'peak':<14}{gib(m.peak):>14}")
    fpt = p.flops_per_token
    lines += [
        "",
        f"compute    {count(fpt)}FLOP/token (GPT.flops_per_token: 6·N + 12·L·T·d), "
        f"{fpt * s.tokens_per_step / 1e15:.3f} PFLOP/step",
        f"speed      {speed_line(p)}",
    ]
    if tokens is not None:
        b = budget(p, tokens)
        if b is None:
            lines.append(f"budget     {tokens:.3g} tokens: give plan.mfu to time it")
        else:
            lines.append(f"budget     {tokens:.3g} tokens: {b.steps:,} steps, {duration(b.seconds)}")
    lines += ["", f"memory     {fit_line(p)}"]
    return "\n".join(lines)


def format_alternatives(alts: list[Alternative], fsdp_refused: str | None = None) -> str:
    """The alternatives planned; `fsdp_refused`: why FSDP2 was not tried (plan.fsdp_refusal)."""
    skipped = [f"  FSDP2 not tried: {fsdp_refused}"] if fsdp_refused else []
    if not alts:
        return "\n".join(
            ["what would fit: nothing tried fits (each alternative was planned on fake tensors)", *skipped]
        )
    lines = ["what would fit (each planned again on fake tensors):"]
    for a in alts:
        p = a.plan
        mark = "fits" if p.fits else "no  "
        t = f", step {duration(p.speed.step_time)}" if p.speed is not None else ""
        note = f"; {a.note}" if a.note else ""
        lines.append(
            f"  [{mark}] {a.what}: peak {gib(p.memory.peak)}{t}{note}\n         {' '.join(a.overrides)}"
        )
    return "\n".join(lines + skipped)

"""What a spike record names (callbacks/spikes.py): the blocks whose gradient norm jumped most and,
under model/ffn=moe, the layers whose router's balance moved most, both read from LayerTelemetry's
history at the spike's step against the last logged step before it."""

from __future__ import annotations

import math
from typing import Any


def blocks(telemetry: Any, step: int, top: int = 3) -> list[dict[str, Any]]:
    """The blocks whose gradient norm at the spike rose most over their last logged value
    before it (the largest norms when nothing was logged before)."""
    if telemetry is None:
        return []
    history = dict(telemetry.history)
    at = history.get(step)
    if at is None:
        return []
    earlier = [m for s, m in telemetry.history if s < step]
    rows = []
    for b in telemetry.blocks:
        now = at.get(f"grad_norm/{b}", float("nan"))
        before = earlier[-1].get(f"grad_norm/{b}") if earlier else None
        ratio = now / before if before else None
        rows.append(
            {
                "block": b,
                "grad_norm": now,
                "grad_norm_ratio": ratio,
                "attn_logit_max": at.get(f"attn_logit_max/{b}"),
                "update_ratio": at.get(f"update_ratio/{b}"),
            }
        )

    def key(r: dict[str, Any]) -> float:
        v = r["grad_norm_ratio"] if r["grad_norm_ratio"] is not None else r["grad_norm"]
        return v if v == v else -math.inf

    return sorted(rows, key=key, reverse=True)[:top]


def routers(telemetry: Any, step: int, top: int = 3) -> list[dict[str, Any]]:
    """Under model/ffn=moe, the MoE layers whose balance moved most at the spike: max/mean load over
    its last logged value before it (the largest loads when nothing was logged before), with the
    layer's other routing numbers (moe_telemetry.py). Empty for a dense model."""
    if telemetry is None:
        return []
    at = dict(telemetry.history).get(step)
    if at is None:
        return []
    earlier = [m for s, m in telemetry.history if s < step]
    rows = []
    for block in sorted({k.split("/")[1] for k in at if k.startswith("moe/")}):
        stats = {k.rsplit("/", 1)[1]: v for k, v in at.items() if k.startswith(f"moe/{block}/")}
        before = earlier[-1].get(f"moe/{block}/max_over_mean_load") if earlier else None
        load = stats.get("max_over_mean_load", float("nan"))
        rows.append({"block": block, "load_ratio": load / before if before else None, **stats})

    def key(r: dict[str, Any]) -> float:
        v = r["load_ratio"] if r["load_ratio"] is not None else r.get("max_over_mean_load", math.nan)
        return v if v == v else -math.inf

    return sorted(rows, key=key, reverse=True)[:top]  # the largest jump in balance first

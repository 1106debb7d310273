"""A wandb saved view (wandb-workspaces) for a sweep's group or a single run, built offline.

Sections, in the order a researcher reads them: the question (final val loss against LR per arm,
val curves per arm, the summary run's report figures and verdict tables), loss, downstream tasks
(a panel per task metric, when the config names tasks), gradients by depth,
attention and logits, updates and activations, stability and speed. The run set is the sweep's
group: its jobs and its summary run (job_type `report`, the report's figures). The run set itself is
not grouped (a workspace has one run set, and grouping it by `arm` made the summary run, which has no
arm, an extra unnamed group in every panel, its figures' included); each curve panel groups its runs
by `arm` itself (seeds: mean and a min-max band), and each job's run has its arm's color (the
report's figure colors), so the scatter plots read per arm too. A budget sweep's view (issue 45)
names trunks and branches: the run table pins each run's trunk (`branch_from`, empty for a trunk),
branch point and trainer.max_steps, and the question plots the final val loss against
trainer.max_steps per arm (a branch's budget; a trunk's last branch point). Every panel names only
keys that the runs' config logs (gptlab.dashboards.keys). The view is a plain file first
(`wandb_view.json`: the library's own View model as JSON); saving it to a server is one library call
(`save`), the only step that needs a network.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptlab.dashboards.keys import TASK_METRICS, RunShape, families

VIEW_FILE = "wandb_view.json"
# a budget sweep's runs: a branch's config names its trunk's run dir (branch_from, empty for a trunk)
# and branch point; trainer.max_steps is a branch's budget, a trunk's last branch point
BUDGET_KEY = "trainer.max_steps"
BRANCH_COLUMNS = ("branch_from", "branch.at", BUDGET_KEY)
# matplotlib's tab10: the same arm order gives the same colors in the report's figures
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


@dataclass
class Target:
    """Which runs the view shows and what the question is."""

    entity: str
    project: str
    name: str
    group: str | None = None  # the sweep's wandb group (a sweep's view)
    run_ids: list[str] = field(default_factory=list)  # without a group: these runs
    arm_key: str | None = None
    arms: list[str] = field(default_factory=list)
    ladder_key: str | None = None
    report_keys: list[str] = field(default_factory=list)  # report/<figure> images of the summary run
    run_arms: dict[str, str] = field(default_factory=dict)  # each job's wandb run id -> its arm
    verdict_md: str = ""
    budgets: list[int] = field(default_factory=list)  # a budget sweep's budgets in steps (trunks, branches)


def _line(title: str, y: list[str], x: str = "Step", **kw: Any) -> Any:
    import wandb_workspaces.reports.v2 as wr

    return wr.LinePlot(title=title, x=x, y=list(y), **kw)


def _question(shape: RunShape, t: Target) -> list[Any]:
    import wandb_workspaces.reports.v2 as wr

    if not t.arm_key:
        return []
    panels = [
        wr.ScatterPlot(
            title=f"final val loss against LR, per {t.arm_key}",
            x=wr.Config("lr"), y=wr.SummaryMetric("val/loss"), log_x=True,
        ),
        _line(f"val loss per {t.arm_key} ({'trunks and branches' if t.budgets else 'seeds'}: mean and band)",
              ["val/loss"]),
    ]  # fmt: skip
    if t.budgets:  # a trunk (LR held) ends at its last branch point, each branch at its budget
        panels.append(
            wr.ScatterPlot(
                title=f"final val loss against {BUDGET_KEY} per {t.arm_key}: branches at their budget "
                f"({', '.join(map(str, t.budgets))}), trunks (LR held, no budget's result) at their end",
                x=wr.Config(BUDGET_KEY), y=wr.SummaryMetric("val/loss"), log_x=True,
            )
        )  # fmt: skip
    if t.ladder_key:
        panels.append(
            wr.ScatterPlot(
                title=f"final val loss against {t.ladder_key} (N), per {t.arm_key}",
                x=wr.Config(t.ladder_key), y=wr.SummaryMetric("val/loss"), log_x=True,
            )
        )  # fmt: skip
    if t.report_keys:
        panels.append(wr.MediaBrowser(title="report figures (summary run)", media_keys=list(t.report_keys)))
    if t.verdict_md:
        panels.append(wr.MarkdownPanel(markdown=t.verdict_md))
    return panels


def _names_a_key(panel: Any) -> bool:
    """A line plot without a y key (a family this config does not log) is left out."""
    return type(panel).__name__ != "LinePlot" or bool(panel.y)


def sections(shape: RunShape, t: Target) -> list[Any]:
    """The view's sections; a section with no key this config logs is left out."""
    import wandb_workspaces.workspaces as ws

    k = families(shape)
    train = [key for key in k["train"] if key == "train/loss"]
    loss = [
        _line("train loss", train),
        _line("val loss", ["val/loss"]),
        _line("train loss against tokens", train, x="tokens_seen"),
        _line("val loss against tokens", ["val/loss"], x="tokens_seen"),
        _line("val bits per byte", ["val/bpb"]),
        _line("z-loss term (mean log²Z)", [key for key in k["train"] if key == "train/z_loss"]),
    ]
    grads = []
    for family, title in (
        ("grad_norm/block", "grad norm by block (input → output)"),
        ("grad_norm/attn", "grad norm of each block's attention"),
        ("grad_norm/ffn", "grad norm of each block's FFN"),
        ("grad_norm/whole", "grad norm: total, embeddings, final norm, head"),
        ("clip_coef", "clipping factor applied"),
        ("param_norm/block", "weight norm by block"),
        ("param_norm/whole", "weight norm: total, embeddings, final norm, head"),
    ):
        if k.get(family):
            grads.append(_line(title, k[family], log_y=family.startswith("grad_norm") or None))
    attention = []
    for family, title in (
        ("attn_logit_max", "max attention logit q·k/√d_h by block"),
        ("attn_entropy", "attention entropy (nats) by block"),
        ("logits", "output logits: mean, std, max, mean log Z"),
    ):
        if k.get(family):
            attention.append(_line(title, k[family]))
    updates = []
    for family, title in (
        ("update_ratio", "update ratio ‖ΔW‖/‖W‖ by block"),
        ("update_rms", "update RMS by block"),
        ("act_rms", "residual stream RMS (embed, after each block)"),
    ):
        if k.get(family):
            updates.append(_line(title, k[family], log_y=True))
    if k.get("dyt_alpha"):  # model.norm=dyt: each site's learned α (linear: it starts at α0)
        updates.append(_line("DyT α by site", k["dyt_alpha"]))
    routing = [  # model/ffn=moe: one panel per statistic, a line per MoE layer
        _line(title, k.get(f"moe/{stat}", []))
        for stat, title in (
            ("max_over_mean_load", "MoE load: max/mean tokens per expert by layer (1 = even)"),
            ("dead_experts", "MoE dead experts (no token in the step) by layer"),
            ("router_entropy", "MoE router entropy (nats) by layer"),
            ("aux_loss", "MoE aux loss E·Σ f_i·P_i by layer"),
            ("z_loss", "MoE router z-loss by layer"),
            ("dropped", "MoE assignments dropped over capacity by layer"),
            ("bias_max", "MoE expert bias: max by layer"),
            ("bias_min", "MoE expert bias: min by layer"),
        )
    ] + [  # one panel per MoE layer, a line per expert (layers of at most 16 experts)
        _line(f"MoE tokens per expert, {family.rsplit('/', 1)[1]}", keys)
        for family, keys in k.items()
        if family.startswith("moe/tokens/")
    ]
    speed = [
        _line("updates skipped (non-finite or spike)", k["skipped"]),
        _line("learning rate", k["lr"]),
        _line("throughput (tokens/s)", [key for key in k["throughput"] if key.endswith("tokens_per_sec")]),
        _line("step time (s)", [key for key in k["throughput"] if key.endswith("step_time")]),
        _line("MFU", [key for key in k["throughput"] if key.endswith("mfu")]),
    ]
    tasks = [  # one panel per task and metric, so each groups by arm on its own scale
        _line(f"{task}: {metric} ({'lower' if metric == 'bpb' else 'higher'} is better)", [key])
        for task in shape.tasks
        for metric in TASK_METRICS
        if (key := f"task/{task}/{metric}") in k["tasks"]
    ]
    named = [
        ("The question", _question(shape, t)),
        ("Loss", loss),
        ("Downstream tasks", tasks),
        ("Gradients by depth", grads),
        ("Attention and logits", attention),
        ("Updates and activations", updates),
        ("Routing (MoE)", routing),
        ("Stability and speed", speed),
    ]
    named = [(n, [p for p in panels if _names_a_key(p)]) for n, panels in named]
    if t.arm_key:  # each curve panel groups by arm: seeds' mean, and a band from min to max
        import wandb_workspaces.reports.v2 as wr

        for _, panels in named:
            for panel in panels:
                if type(panel).__name__ == "LinePlot":
                    panel.groupby = wr.Config("arm")
                    panel.groupby_aggfunc, panel.groupby_rangefunc = "mean", "minmax"
    return [ws.Section(name=n, panels=p, is_open=True) for n, p in named if p]


def build_view(shape: RunShape, t: Target) -> Any:
    """The wandb_workspaces Workspace of this target."""
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces import expr

    if t.group:
        filters = [expr.Metric("Group") == t.group]
    else:
        filters = [expr.Metric("ID").isin(list(t.run_ids))]
    pinned = ["config:arm", "config:lr", "config:seed", "summary:val/loss"] if t.arm_key else []
    if t.budgets:  # which run is a trunk and which a branch: its trunk (empty for a trunk), point, budget
        pinned[-1:-1] = [f"config:{key}" for key in BRANCH_COLUMNS]
    colors = {arm: COLORS[i % len(COLORS)] for i, arm in enumerate(t.arms)} if t.arm_key else {}
    runs = {rid: ws.RunSettings(color=colors[arm]) for rid, arm in t.run_arms.items() if arm in colors}
    return ws.Workspace(
        entity=t.entity,
        project=t.project,
        name=t.name,
        sections=sections(shape, t),
        settings=ws.WorkspaceSettings(x_axis="Step", group_by_prefix="first"),
        runset_settings=ws.RunsetSettings(
            filters=filters, groupby=[], run_settings=runs, pinned_columns=pinned,
        ),  # not grouped: the summary run would be a group of its own (see the module's docstring)
    )  # fmt: skip


def to_json(view: Any) -> str:
    """The view in the library's own serialized form (its View model)."""
    return view._to_model().model_dump_json(by_alias=True)


def from_json(text: str) -> Any:
    """A Workspace read back from `to_json`'s text through the library's models."""
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces.workspaces import internal

    return ws.Workspace._from_model(internal.View.model_validate_json(text))


def panel_keys(view: Any) -> set[str]:
    """Every history or summary key any panel of the view names (its x axes included)."""
    found: set[str] = set()
    for section in view.sections:
        for panel in section.panels:
            for attr in ("x", "y"):
                value = getattr(panel, attr, None)
                for item in value if isinstance(value, list) else [value]:
                    name = getattr(item, "name", item)
                    if isinstance(name, str) and type(item).__name__ != "Config" and name != "Step":
                        found.add(name)
            found.update(getattr(panel, "media_keys", None) or [])
    return found


def config_keys(view: Any) -> set[str]:
    """Config keys the view groups, filters or plots by (the run set's grouping and the panels')."""
    found = {getattr(g, "name", str(g)) for g in view.runset_settings.groupby}
    for section in view.sections:
        for panel in section.panels:
            group = getattr(panel, "groupby", None)
            if group is not None:
                found.add(getattr(group, "name", str(group)))
            for attr in ("x", "y"):
                item = getattr(panel, attr, None)
                if type(item).__name__ == "Config":
                    found.add(item.name)
    return found


def write_view(view: Any, out_dir: Path) -> Path:
    """<out_dir>/wandb_view.json, written whole (a temporary name, then renamed)."""
    path = out_dir / VIEW_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(json.loads(to_json(view)), indent=1) + "\n")
    tmp.replace(path)
    return path


def verdict_markdown(report: Path) -> str:
    """The report's arm and baseline tables (with the verdicts), for the question's text panel."""
    try:
        text = report.read_text()
    except OSError:
        return ""
    keep = [
        m.group(0).strip()
        for m in re.finditer(r"^#### (Arms|Against the baseline)[^\n]*\n(?:.*\n)*?(?=^#|\Z)", text, re.M)
    ]
    return "\n\n".join(keep)

"""The sweep view's run set: the summary run's figures are shown, and it is in no arm group (issue 37 §1).

A workspace has one run set; its filter decides which runs every panel sees, its grouping groups
every panel (wandb-workspaces' RunsetSettings), and a line plot's own `groupby` groups that plot.
Oracle: the runs of a sweep written here by hand, as wandb records them (group, job_type, config,
logged keys): two jobs of two arms and the sweep's summary run (job_type `report`, no `arm`, only
`report/<figure>` images). A panel that is grouped must hold only runs that have an arm (a run
without one is an extra, unnamed group); the media panel must hold the summary run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gptlab.dashboards.keys import RunShape
from gptlab.dashboards.view import COLORS, Target, build_view, from_json, to_json

FIGURE = "report/lr_sweep"


@dataclass
class Run:
    id: str
    group: str
    job_type: str | None
    config: dict[str, Any]
    history: set[str] = field(default_factory=set)
    summary: set[str] = field(default_factory=set)


JOB_KEYS = {"train/loss", "val/loss", "val/bpb", "lr", "tokens_seen", "train/skipped_steps"}
RUNS = [
    Run("r1", "g", None, {"arm": "swiglu", "lr": 1e-3, "seed": 1}, JOB_KEYS, {"val/loss"}),
    Run("r2", "g", None, {"arm": "gelu", "lr": 1e-3, "seed": 1}, JOB_KEYS, {"val/loss"}),
    Run("r3", "g", None, {"arm": "swiglu", "lr": 3e-3, "seed": 1}, JOB_KEYS, {"val/loss"}),
    Run("rep", "g", "report", {"report": "report.md"}, {FIGURE}, {"report_md", FIGURE}),
    Run("other", "h", None, {"arm": "swiglu", "lr": 1e-3, "seed": 1}, JOB_KEYS, {"val/loss"}),
]
SHAPE = RunShape(groups=(), telemetry=False, act_rms=False, log_steps=True, throughput=False,
                 attention=False, grad_clip=False, z_loss=False)  # fmt: skip


def target() -> Target:
    return Target(
        entity="me", project="p", name="v", group="g", arm_key="model/ffn", arms=["swiglu", "gelu"],
        report_keys=[FIGURE], verdict_md="#### Arms", run_arms={"r1": "swiglu", "r2": "gelu", "r3": "swiglu"},
    )  # fmt: skip


def in_run_set(view: Any, run: Run) -> bool:
    """The view's filter, read as wandb's: only `Metric("Group") == '<group>'` is written here."""
    assert view.runset_settings.filters == "Metric(\"Group\") == 'g'", view.runset_settings.filters
    return run.group == "g"


def shown(panel: Any, run: Run) -> bool:
    """The run draws in the panel: it logged a key the panel names (history, summary or media)."""
    names: set[str] = set(getattr(panel, "media_keys", None) or [])
    for attr in ("y",):
        value = getattr(panel, attr, None)
        for item in value if isinstance(value, list) else [value]:
            name = getattr(item, "name", item)
            if isinstance(name, str) and type(item).__name__ != "Config":
                names.add(name)
    return bool(names & (run.history | run.summary))


def group_keys(view: Any, panel: Any) -> list[str]:
    keys = [g.name for g in view.runset_settings.groupby]
    own = getattr(panel, "groupby", None)
    return keys + ([getattr(own, "name", own)] if own is not None else [])


def test_the_summary_runs_figures_show_and_it_is_in_no_arm_group() -> None:
    view = from_json(to_json(build_view(SHAPE, target())))  # as saved and loaded back
    panels = [p for s in view.sections for p in s.panels]
    runs = [r for r in RUNS if in_run_set(view, r)]
    assert [r.id for r in runs] == ["r1", "r2", "r3", "rep"]
    (media,) = [p for p in panels if type(p).__name__ == "MediaBrowser"]
    assert [r.id for r in runs if shown(media, r)] == ["rep"]  # its figures are in the view
    for panel in panels:
        keys = group_keys(view, panel)
        for run in runs:
            if keys and shown(panel, run):
                assert all(k in run.config for k in keys), (type(panel).__name__, panel.title, run.id, keys)
    curves = [p for p in panels if type(p).__name__ == "LinePlot"]
    assert curves and all(group_keys(view, p) == ["arm"] for p in curves)  # seeds of an arm: one band
    assert all((p.groupby_aggfunc, p.groupby_rangefunc) == ("mean", "minmax") for p in curves)
    assert any(shown(p, r) for p in curves for r in runs if r.job_type is None)


def test_each_jobs_run_has_its_arms_color_in_the_reports_order() -> None:
    """tab10 in the order of the arms (the report's figures): swiglu blue, gelu orange; the summary
    run keeps wandb's own color."""
    settings = from_json(to_json(build_view(SHAPE, target()))).runset_settings.run_settings
    assert {k: v.color for k, v in settings.items()} == {"r1": COLORS[0], "r2": COLORS[1], "r3": COLORS[0]}
    assert COLORS[:2] == ("#1f77b4", "#ff7f0e")

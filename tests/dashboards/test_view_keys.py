"""The sweep's wandb view against what real runs logged (issue 31).

Oracle: the runs' own wandb transaction logs (`run-<id>.wandb`, written offline), read record by
record with wandb's protobuf schema (wandb 0.31 ships no Python reader of these files; the record
framing is tests/distributed/test_multirun.py's). Two small ablation sweeps stand for the shapes a
view must follow: L = 2 with every placement (two with a final norm, two without), untied, attention
telemetry on, no downstream task; and L = 12 with two FFN arms, tied, attention telemetry and act_rms
off, no clipping, z-loss on, the default task scored. Every key a panel names must be in some run's
logged history (or, for the report's figures, the summary run's); every config key the view groups
or plots by must be in the runs' config; the run set's group must be the runs' group. A key renamed
in telemetry leaves the view naming a key that no run logged: the first test fails (mutant
`view_key_renamed_update_rms`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gptlab.dashboards.view import VIEW_FILE, config_keys, from_json, panel_keys, to_json
from tests.cli_here import train_py_run_here
from tests.conftest import REPO, run_script
from tests.distributed.test_multirun import wandb_records
from tests.in_process import call_main

pytestmark = pytest.mark.slow
COMMON = [
    "trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.log_every_n_steps=1",
    "hydra.sweeper.seeds=1", "hydra.sweeper.lr.points=1", "sample.max_new_tokens=0",
    "trainer.enable_progress_bar=false", "logger.csv=false", "callbacks.telemetry.every_n_steps=1",
]  # fmt: skip
SWEEPS = {
    "L2_placements": [
        "experiment=ablate_placement_quick", "hydra.sweeper.arms=[pre,post,sandwich,deepnorm]",
        "model.n_layer=2", "model/tying=untied", "callbacks.tasks.names=[]",
    ],
    "L12_ffn_tied_no_attention": [
        "experiment=ablate_ffn_quick", "hydra.sweeper.arms=[swiglu,gelu]", "model.n_layer=12",
        "model.n_embd=32", "model.ffn_multiple_of=32", "model/tying=tied", "callbacks.telemetry.enabled=true",
        "callbacks.telemetry.attention=false", "callbacks.telemetry.act_rms=false",
        "optim.grad_clip=0", "optim.z_loss=1e-4",
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two sweeps, serial, one thread, wandb offline (their view written at the sweep's end), in
    this process (tests/cli_here.py: what they log is the point here, not the process around them)."""
    cache = tmp_path_factory.getbasetemp() / "token-cache"
    out = {}
    for name, args in SWEEPS.items():
        sweep = tmp_path_factory.mktemp(name) / "sweep"
        proc = train_py_run_here(
            "-m", *args, *COMMON, f"hydra.sweep.dir={sweep}", f"data.cache_dir={cache}",
            env={"OMP_NUM_THREADS": "1"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[name] = sweep
    return out


def run_files(sweep: Path) -> list[Path]:
    return sorted(sweep.glob("*/wandb/offline-run-*/run-*.wandb"))


def summary_run_file(sweep: Path) -> Path:
    (found,) = sorted(sweep.glob("wandb/offline-run-*/run-*.wandb"))
    return found


def logged(path: Path) -> tuple[set[str], set[str], str, set[str]]:
    """(history keys, top-level config keys, the run's group, files saved) of one .wandb file."""
    history, config, group, files = set(), set(), "", set()
    for r in wandb_records(path):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            history.update(i.key or i.nested_key[0] for i in r.history.item)
        elif kind == "run":
            config.update(i.key or i.nested_key[0] for i in r.run.config.update)
            group = r.run.run_group or group
        elif kind == "config":
            config.update(i.key or i.nested_key[0] for i in r.config.update)
        elif kind == "files":
            files.update(f.path for f in r.files.files)
    return history, config, group, files


def without_ids(view_json: str) -> object:
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "__id__"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return strip(json.loads(view_json))


def view_of(sweep: Path):
    return from_json((sweep / VIEW_FILE).read_text())


@pytest.mark.parametrize("name", list(SWEEPS))
def test_every_key_a_panel_names_was_logged_by_the_runs(sweeps: dict[str, Path], name: str) -> None:
    sweep = sweeps[name]
    jobs = [logged(p) for p in run_files(sweep)]
    assert len(jobs) == {"L2_placements": 4, "L12_ffn_tied_no_attention": 2}[name]
    report_history, *_ = logged(summary_run_file(sweep))
    history = set().union(*(h for h, *_ in jobs)) | report_history
    view = view_of(sweep)
    named = panel_keys(view)
    assert named and not (named - history), f"panels name keys no run logged: {sorted(named - history)}"
    for _, config, group, _ in jobs:
        assert config_keys(view) <= config, sorted(config_keys(view) - config)
        assert group and view.runset_settings.filters == f"Metric(\"Group\") == '{group}'"


def test_panels_follow_the_config_not_a_fixed_list(sweeps: dict[str, Path]) -> None:
    """Attention off, act_rms off, tied, no clipping at L = 12: none of those families is named;
    z-loss on: its key is. At L = 2 untied with final-norm placements: the head and final norm are,
    and each family holds every block's key in one panel (the 12 blocks in one plot at L = 12)."""
    small = panel_keys(view_of(sweeps["L2_placements"]))
    big_view = view_of(sweeps["L12_ffn_tied_no_attention"])
    big = panel_keys(big_view)
    assert not {k for k in big if k.startswith(("attn_", "act_rms/"))}
    assert "grad_norm/head" not in big and "grad_norm/clip_coef" not in big and "train/z_loss" in big
    assert {"grad_norm/head", "grad_norm/final_norm", "grad_norm/clip_coef", "attn_entropy/block_01"} <= small
    (depth,) = [s for s in big_view.sections if s.name == "Gradients by depth"]
    per_block = [p for p in depth.panels if [m.name for m in p.y][:1] == ["grad_norm/block_00"]]
    assert [m.name for m in per_block[0].y] == [f"grad_norm/block_{i:02d}" for i in range(12)]
    assert [s.name for s in big_view.sections] == [
        "The question", "Loss", "Downstream tasks", "Gradients by depth", "Attention and logits",
        "Updates and activations", "Stability and speed",
    ]  # fmt: skip


def test_the_view_passes_through_the_librarys_models(sweeps: dict[str, Path]) -> None:
    """Built, serialized, loaded back: the same View model; and the arms grouped with one color each."""
    from wandb_workspaces.workspaces import internal

    sweep = sweeps["L2_placements"]
    text = (sweep / VIEW_FILE).read_text()
    model = internal.View.model_validate_json(text)
    again = from_json(text)
    assert json.loads(to_json(again)) == json.loads(model.model_dump_json(by_alias=True)) == json.loads(text)
    assert again.runset_settings.groupby == []  # the curve panels group by arm (issue 37 §1)
    curves = [p for s in again.sections for p in s.panels if type(p).__name__ == "LinePlot"]
    assert curves and {getattr(p.groupby, "name", None) for p in curves} == {"arm"}
    colors = {k: v.color for k, v in again.runset_settings.run_settings.items()}
    arms = {run_id(p): logged_arm(p) for p in run_files(sweep)}  # each job's run, its arm as wandb has it
    assert sorted(colors) == sorted(arms) and sorted(set(arms.values())) == [
        "deepnorm",
        "post",
        "pre",
        "sandwich",
    ]
    assert len(set(colors.values())) == 4 and all(
        (colors[a] == colors[b]) == (arms[a] == arms[b]) for a in arms for b in arms
    )  # one color an arm


def run_id(path: Path) -> str:
    return path.stem.removeprefix("run-")


def logged_arm(path: Path) -> str | None:
    """The `arm` config value a run's .wandb file records (JSON-encoded, as wandb stores it)."""
    for r in wandb_records(path):
        kind = r.WhichOneof("record_type")
        items = r.run.config.update if kind == "run" else r.config.update if kind == "config" else []
        for i in items:
            if (i.key or i.nested_key[0]) == "arm":
                return json.loads(i.value_json)
    return None


def job_type(path: Path) -> str:
    return next((r.run.job_type for r in wandb_records(path) if r.WhichOneof("record_type") == "run"), "")


def test_the_summary_run_is_in_no_arm_group_and_its_figures_show(sweeps: dict[str, Path]) -> None:
    """The real sweep's runs, read from their .wandb files: the summary run (job_type report, no
    arm) is in the run set (the group), it alone logged the media panel's keys, and no grouped panel
    holds it: a panel is grouped by the run set's grouping or its own, and holds a run that logged
    a key it names. Every run a grouped panel holds has an arm."""
    sweep = sweeps["L2_placements"]
    runs = [(p, *logged(p)) for p in [*run_files(sweep), summary_run_file(sweep)]]
    view = view_of(sweep)
    assert [job_type(p) for p, *_ in runs].count("report") == 1 and job_type(runs[-1][0]) == "report"
    assert {group for *_, group, _ in runs} == {view.runset_settings.filters.split("'")[1]}
    for section in view.sections:
        for panel in section.panels:
            names = panel_keys(single_panel_view(view, panel))
            holds = [p for p, history, *_ in runs if names & history]
            grouped = [g.name for g in view.runset_settings.groupby] + (
                [panel.groupby.name] if getattr(panel, "groupby", None) is not None else []
            )
            if type(panel).__name__ == "MediaBrowser":
                assert holds == [runs[-1][0]] and not grouped, (holds, grouped)
            if grouped:
                assert all(logged_arm(p) is not None for p in holds), (panel.title, holds)


def single_panel_view(view, panel):
    """A copy of the view with only `panel`, so panel_keys names that panel's keys alone."""
    import wandb_workspaces.workspaces as ws

    return ws.Workspace(entity=view.entity, project=view.project, name="one",
                        sections=[ws.Section(name="one", panels=[panel])])  # fmt: skip


def test_the_summary_run_carries_the_view_and_the_question_shows_its_figures(sweeps: dict[str, Path]) -> None:
    sweep = sweeps["L2_placements"]
    history, _, group, files = logged(summary_run_file(sweep))
    assert VIEW_FILE in files
    (question,) = [s for s in view_of(sweep).sections if s.name == "The question"]
    media = [k for p in question.panels for k in (getattr(p, "media_keys", None) or [])]
    assert media and set(media) <= history
    text = [p.markdown for p in question.panels if hasattr(p, "markdown")]
    assert text and "verdict" in text[0]


def _dashboard(*args: str) -> subprocess.CompletedProcess:
    """`python scripts/dashboard.py <args>` in a process: for the command line's own contract."""
    return run_script("scripts/dashboard.py", *map(str, args), timeout=120)


def _dashboard_here(*args: object) -> subprocess.CompletedProcess:
    """The same command as its `main` in this process (tests/in_process.py), offline as the runs."""
    from unittest import mock

    from gptlab.dashboards.cli import main

    with mock.patch.dict(os.environ, {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}):
        return call_main("scripts/dashboard.py", main, *args)


def test_offline_the_command_writes_the_file_and_says_how_to_upload(
    sweeps: dict[str, Path], tmp_path: Path
) -> None:
    sweep = shutil.copytree(sweeps["L12_ffn_tied_no_attention"], tmp_path / "s")
    (sweep / VIEW_FILE).unlink()
    proc = _dashboard(sweep, "entity=me", "project=gptlab")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"wrote {sweep / VIEW_FILE} (not saved to wandb: offline)")
    assert f"wandb sync {sweep}/*/wandb/offline-run-* && python scripts/dashboard.py {sweep}" in line
    assert (sweep / VIEW_FILE).is_file()
    job = _dashboard_here(sweep / "0")  # a single run's view: the same sections, its own run as the run set
    assert job.returncode == 0, job.stderr
    single = view_of(sweep / "0")
    assert 'Metric("ID") in' in single.runset_settings.filters and single.sections[0].name == "Loss"


def _bad(path: Path, *args: str, message: str, in_a_process: bool = False) -> None:
    proc = (_dashboard if in_a_process else _dashboard_here)(path, *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert not (path / VIEW_FILE).exists() if path.is_dir() else True


def test_bad_inputs_one_line_exit_2(sweeps: dict[str, Path], tmp_path: Path) -> None:
    _bad(tmp_path / "nowhere", message="is not a directory", in_a_process=True)  # the CLI's contract
    (tmp_path / "empty").mkdir()
    _bad(tmp_path / "empty", message="is neither a sweep dir (ablation.json or multirun.yaml) nor a run dir")
    source = sweeps["L12_ffn_tied_no_attention"]
    failed = shutil.copytree(source, tmp_path / "failed")
    (failed / VIEW_FILE).unlink()
    (failed / "1" / "metrics.json").write_text(json.dumps({"status": "failed", "error": "boom"}))
    _bad(failed, message="has failed job(s) 1 (metrics.json status failed)")
    no_wandb = shutil.copytree(source, tmp_path / "csv_only", ignore=shutil.ignore_patterns("wandb"))
    no_wandb.joinpath(VIEW_FILE).unlink()
    _bad(no_wandb, message="no job logged to wandb (empty group")
    _bad(no_wandb, "colour=red", message="colour= is not accepted")
    assert subprocess.run([sys.executable, str(REPO / "scripts" / "dashboard.py")]).returncode == 2


def test_a_single_run_shorter_than_the_telemetry_cadence(tmp_path: Path) -> None:
    """`python train.py` for 2 steps at the default cadence (telemetry every 10 steps) logs no
    telemetry key: its view has no telemetry section, and every key it names is in the run's history.
    train.py in this process (tests/cli_here.py), its own end-of-run view writing included."""
    run = tmp_path / "run"
    proc = train_py_run_here(
        "model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32",
        "data.batch_size=4", "data.max_bytes=100000", "data.val_windows=4", "trainer.max_steps=2",
        "trainer.val_check_interval=2", "sample.max_new_tokens=0", "trainer.enable_progress_bar=false",
        f"hydra.run.dir={run}", f"data.cache_dir={tmp_path / 'cache'}", env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    written_by_the_run = (run / VIEW_FILE).read_text()  # train.py writes a single run's view itself
    built = _dashboard_here(run)
    assert built.returncode == 0, built.stderr
    (wandb_file,) = sorted(run.glob("wandb/offline-run-*/run-*.wandb"))
    history, *_ = logged(wandb_file)
    view = view_of(run)
    assert not {k for k in history if k.startswith("grad_norm/")}  # the premise: no telemetry step
    assert panel_keys(view) <= history, sorted(panel_keys(view) - history)
    # the default task is scored at the run's final validation, so its section is there too
    assert [s.name for s in view.sections] == ["Loss", "Downstream tasks", "Stability and speed"]
    assert {f"task/val_continuation/{m}" for m in ("acc", "acc_norm", "bpb")} <= panel_keys(view)
    # the same view as scripts/dashboard.py builds, but for the random ids wandb-workspaces gives panels
    assert without_ids(written_by_the_run) == without_ids((run / VIEW_FILE).read_text())

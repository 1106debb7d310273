"""The end of an ablation sweep: report.md in the sweep dir, and its figures in a wandb summary run.

The summary run joins the sweep's group (job_type "report"), so the dashboard shows the LR figure
beside the jobs' curves. A wandb that cannot start never fails a sweep whose jobs all ran.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("gptlab")
OPTIONS = {
    "out": None,
    "figures": "true",
    "wandb": "false",
    "baseline": None,
    "lr_sensitivity": "init",
    "seeds": None,
}


def log_report_to_wandb(report: Path, group: str | None, logger_cfg: dict[str, Any]) -> str | None:
    """Log every figure under <report dir>/figures and the report text to a summary run of `group`;
    returns the run's id (None when wandb is off or failed)."""
    mode = logger_cfg.get("mode", "offline")
    if not logger_cfg.get("wandb") or mode == "disabled":
        return None
    try:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        run = wandb.init(
            project=logger_cfg.get("project"),
            entity=logger_cfg.get("entity"),
            group=group,
            job_type="report",
            name=f"{group}-report" if group else "report",
            dir=str(report.parent),
            mode="offline" if mode == "online" and not os.environ.get("WANDB_API_KEY") else mode,
            config={"report": str(report)},
            reinit="create_new",
        )
        images = {
            f"report/{p.stem}": wandb.Image(str(p)) for p in sorted((report.parent / "figures").glob("*.png"))
        }
        run.log(images)
        run.summary["report_md"] = report.read_text()
        view = report.parent / "wandb_view.json"  # gptlab.dashboards: the sweep's saved view
        if view.is_file():
            run.save(str(view), base_path=str(report.parent), policy="now")
        run_id = run.id
        run.finish()
        return run_id
    except Exception as err:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("wandb summary run not written: %s", str(err).splitlines()[0] if str(err) else err)
        return None


def report_and_log(
    sweep_dir: Path, config: DictConfig, group: str | None, before_log: Callable[[], Any] | None = None
) -> Path | None:
    """Write the report (figures included) and log it to the group's summary run; `before_log`
    runs between the two (the sweep's wandb view, which reads the report, is then attached too)."""
    from gptlab.analysis.ladder.records import LadderError
    from gptlab.analysis.report import write_report

    try:
        report = write_report(sweep_dir)
    except LadderError as err:  # the report is written, its ladder fit refused: say why, go on
        log.warning("%s", err)
        report = sweep_dir / "report.md"
    except Exception as err:  # noqa: BLE001 - the jobs are done; scripts/report.py can retry
        log.warning("report not written (%s); run scripts/report.py %s", err, sweep_dir)
        return None
    log.info("ablation report: %s", report)
    logger_cfg = OmegaConf.to_container(config.logger, resolve=False)
    assert isinstance(logger_cfg, dict)
    logger_cfg["group"] = group
    if before_log is not None:
        before_log()
    log_report_to_wandb(report, group, logger_cfg)
    return report


def _flag(name: str, value: str | None) -> bool:
    if value not in ("true", "false"):
        raise ValueError(f"{name}={value!r} is not accepted; choose true or false")
    return value == "true"


def report_from_cli(
    sweep: str,
    out: str | None,
    figures: str | None,
    wandb: str | None,
    baseline: str | None = None,
    lr_sensitivity: str = "init",
    seeds: str | None = None,
) -> Path:
    """scripts/report.py: the report, and with wandb=true the summary run of the sweep's group (the
    group and logger settings read from its multirun.yaml and ablation.json)."""
    from gptlab.ablation.sweep_dir import read_record
    from gptlab.analysis.report import write_report

    draw, log_it = _flag("figures", figures), _flag("wandb", wandb)
    report = write_report(
        sweep, out=out, figures=draw, baseline=baseline, sensitivity=lr_sensitivity, seeds=seeds
    )
    if log_it:
        master = Path(sweep) / "multirun.yaml"
        if not master.is_file():
            raise FileNotFoundError(f"wandb=true needs {master} (the sweep's logger settings)")
        logger_cfg = OmegaConf.to_container(OmegaConf.load(master).logger, resolve=False)
        record = read_record(Path(sweep)) or {}
        assert isinstance(logger_cfg, dict)
        log_report_to_wandb(report, record.get("group"), {**logger_cfg, "wandb": True})
    return report


def main(argv: list[str], usage: str) -> int:
    """scripts/report.py `<sweep dir> [key=value ...]`: write the report, print its path; errors exit 2.
    A refused option's message quotes the usage's lines 3-4 (the options)."""
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(usage.strip())
        return 0 if argv else 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        options = dict(OPTIONS)
        for arg in argv[1:]:
            key, sep, value = arg.partition("=")
            if not sep or key not in OPTIONS:
                raise ValueError(f"argument {arg!r} is not accepted; {' '.join(usage.splitlines()[2:4])}")
            options[key] = value
        print(report_from_cli(argv[0], **options))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0

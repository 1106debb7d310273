"""scripts/dashboard.py: build a sweep's or run's wandb view from its dir, write it, save it if online.

Offline (the default for runs here, or no API key, or no network) the view is written to
<dir>/wandb_view.json and one line says so and what uploads it; online it is also saved with
wandb-workspaces' `Workspace.save()` and the view's URL printed. A failure to save is one line, never
a traceback: the file is written either way.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from gptlab.dashboards.keys import ConfigUnreadable
from gptlab.dashboards.source import NotBuildable, load
from gptlab.dashboards.view import build_view, write_view

log = logging.getLogger(__name__)
OPTIONS = ("entity", "project", "allow_failed", "save")


def online() -> bool:
    """wandb would reach a server: not WANDB_MODE=offline/disabled, and an API key is known."""
    if os.environ.get("WANDB_MODE", "") in ("offline", "disabled", "dryrun"):
        return False
    try:
        import wandb

        return bool(wandb.Api(timeout=10).api_key)
    except Exception:  # noqa: BLE001 - no key, no settings: offline
        return False


def upload_hint(root: Path, entity: str, project: str) -> str:
    runs = f"{root}/wandb/offline-run-*" if (root / ".hydra").is_dir() else f"{root}/*/wandb/offline-run-*"
    who = f" entity={entity}" if entity else " entity=<your entity>"
    return f"wandb sync {runs} && python scripts/dashboard.py {root}{who} project={project}"


def save(view: Any) -> str:
    """Save the view to the server (the library's own call) and return its URL."""
    view.save()
    return str(view.url)


def build(path: str, **options: str) -> tuple[Path, str]:
    """Write the view file; save it when online (save=auto) or asked (save=true). Returns (file,
    the line to print)."""
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise NotBuildable(f"{unknown[0]}= is not accepted; give entity=, project=, allow_failed=, save=")
    flags = {}
    for key, default in (("allow_failed", "false"), ("save", "auto")):
        value = options.get(key, default)
        accepted = ("true", "false", "auto") if key == "save" else ("true", "false")
        if value not in accepted:
            raise NotBuildable(f"{key}={value!r} is not accepted; give {' or '.join(accepted)}")
        flags[key] = value
    shape, target, root = load(
        path, options.get("entity"), options.get("project"), flags["allow_failed"] == "true"
    )
    view = build_view(shape, target)
    path_written = write_view(view, root)
    want = flags["save"] == "true" or (flags["save"] == "auto" and online())
    if not want:
        return path_written, (
            f"wrote {path_written} (not saved to wandb: offline); to upload the runs and save the view: "
            + upload_hint(root, target.entity, target.project)
        )
    if not target.entity:
        raise NotBuildable("saving the view needs entity=<your wandb entity> (logger.entity is not set)")
    try:
        url = save(view)
    except Exception as err:  # noqa: BLE001 - the network or the server: the file is written anyway
        first = " ".join(str(err).split())[:200] or type(err).__name__
        return path_written, (
            f"wrote {path_written}; saving to wandb failed ({first}); after `wandb sync` retry: "
            + upload_hint(root, target.entity, target.project)
        )
    return path_written, f"wrote {path_written}; view saved: {url}"


def write_at_sweep_end(sweep_dir: Path, logger_cfg: dict[str, Any]) -> Path | None:
    """The sweep's last step: write its view (and save it when the sweep logged online); never
    raises, a sweep whose jobs ran is not failed by its dashboard."""
    if not logger_cfg.get("wandb") or logger_cfg.get("mode") == "disabled":
        return None
    save_it = "true" if logger_cfg.get("mode") == "online" and online() else "false"
    try:
        written, line = build(str(sweep_dir), allow_failed="true", save=save_it)
    except Exception as err:  # noqa: BLE001 - see the docstring
        log.warning("wandb view not written: %s", " ".join(str(err).split()))
        return None
    log.info("%s", line)
    return written


def write_at_run_end(cfg: Any) -> Path | None:
    """train.py's last step for a single run: its own view beside it, as a sweep writes one for its
    jobs (in a multirun the sweep writes one view for all of them). Rank 0 only; never raises."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from lightning.pytorch.utilities import rank_zero_only
    from omegaconf import OmegaConf

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN or rank_zero_only.rank != 0:
        return None
    logger_cfg = OmegaConf.to_container(cfg.logger, resolve=True)
    assert isinstance(logger_cfg, dict)
    return write_at_sweep_end(Path(hydra_cfg.runtime.output_dir), logger_cfg)


def main(argv: list[str], usage: str) -> int:
    """scripts/dashboard.py `<dir> [key=value ...]`: build, print the line; bad input: one line, exit 2."""
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(usage.strip())
        return 0 if argv else 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        options = {}
        for arg in argv[1:]:
            key, sep, value = arg.partition("=")
            if not sep:
                raise NotBuildable(
                    f"argument {arg!r} is not accepted; give key=value (entity=, project=, ...)"
                )
            options[key] = value
        _, line = build(argv[0], **options)
    except (NotBuildable, ConfigUnreadable) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(line)
    return 0

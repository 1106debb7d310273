"""`hydra/sweeper: ablation`: arms × log-spaced LR grid × seeds, resumable in its sweep directory.

Hydra finds sweepers only in the `hydra_plugins` namespace, so this module is the thin plugin: the
schema (a typo in the grid fails at compose time) and a class that hands the work to
`gptlab.ablation.launch`. Hydra imports every plugin module at start-up: nothing heavy here.
"""

# No `from __future__ import annotations`: Hydra's plugin scanner runs this module before it is in
# sys.modules, and dataclasses cannot resolve string annotations then.
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class LRGridConf:
    """A log-spaced grid of `points` learning rates from `min` to `max` (both included)."""

    min: float = 1e-3
    max: float = 3e-2
    points: int = 5


@dataclass
class LadderConf:
    """Model sizes as cells, one per width, or one per depth at the preset's width
    (gptlab.ablation.grid.Ladder has the rules); no widths and no depths: no ladder."""

    widths: list[int] = field(default_factory=list)  # n_embd of each rung, increasing in N
    aspect: int = 24  # n_layer = n_embd / aspect
    head_dim: int = 24  # n_head = n_embd / head_dim
    lr_ref_width: int = 96  # hydra.sweeper.lr is the LR grid at this width
    lr_width_exponent: float = 0.5  # the grid at width d: × (lr_ref_width / d) ** exponent
    tokens: int | None = None  # a fixed token budget per rung, or
    tokens_per_param: float | None = None  # tokens = ratio × N (N = 12·n_layer·n_embd²)
    depths: list[int] = field(default_factory=list)  # a depth ladder instead: n_layer per rung, width kept


@dataclass
class AblationSweeperConf:
    _target_: str = "hydra_plugins.gptlab_ablation.ablation_sweeper.AblationSweeper"
    arm: str = ""  # the override key whose values are the arms: a config group (model/ffn) or a field
    arms: list[str] = field(default_factory=list)
    baseline: str | None = None  # the arm the others are compared with; default: the first
    lr: LRGridConf = field(default_factory=LRGridConf)
    seeds: int = 3  # seeds 1..seeds; each reseeds init and data order
    params: dict[str, str] = field(default_factory=dict)  # further swept keys, e.g. model.n_layer: 4,12
    report: bool = True  # write <sweep>/report.md (and a wandb summary run) when the sweep ends
    ladder: LadderConf = field(default_factory=LadderConf)  # model sizes as cells (widths: [] = none)
    # token budgets: steps, or tokens with a K/M/G/T suffix; each (arm, LR, seed) is then a WSD trunk
    # and a decay branch per budget (gptlab.ablation.budgets); []: one run per job, no branches
    budgets: list[Any] = field(default_factory=list)
    decay_fraction: float = 0.2  # a budget of B steps decays over its last round(fraction × B)


ConfigStore.instance().store(
    group="hydra/sweeper", name="ablation", node=AblationSweeperConf, provider="gptlab"
)


class AblationSweeper(Sweeper):
    """Runs the grid one job at a time with the configured launcher, skipping finished jobs."""

    def __init__(
        self,
        arm: str,
        arms: list[str],
        baseline: str | None,
        lr: Any,
        seeds: int,
        params: dict[str, str],
        report: bool,
        ladder: Any = None,
        budgets: Any = (),
        decay_fraction: float = 0.2,
    ) -> None:
        self.spec = dict(
            arm=arm, arms=list(arms), baseline=baseline, lr=lr, seeds=seeds, params=params, ladder=ladder,
            budgets=list(budgets or ()), decay_fraction=decay_fraction,
        )  # fmt: skip
        self.report = report
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from pathlib import Path

        from gptlab.ablation.launch import run_grid, sweep_group_of_record

        assert self.config is not None and self.hydra_context is not None
        results = run_grid(self, arguments)
        if self.report:
            from omegaconf import OmegaConf

            from gptlab.analysis.sweep_summary import report_and_log
            from gptlab.dashboards.cli import write_at_sweep_end

            sweep_dir = Path(str(self.config.hydra.sweep.dir))
            logger_cfg = OmegaConf.to_container(self.config.logger, resolve=False)
            report_and_log(
                sweep_dir, self.config, sweep_group_of_record(sweep_dir, self.config),
                before_log=lambda: write_at_sweep_end(sweep_dir, logger_cfg),  # type: ignore[arg-type]
            )  # fmt: skip
        return results

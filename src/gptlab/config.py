"""The structured schema of the whole Hydra tree: a wrong type or an unknown key fails at compose."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from gptlab.data.config import DataConfig
from gptlab.model.config import GPTConfig
from gptlab.wsd import check_decay_fields, check_wsd

STRATEGIES = ("auto", "ddp", "fsdp")
SCHEDULES = ("cosine", "linear", "constant", "wsd")
OPTIMIZERS = ("adamw", "muon")
MUON_ADJUST_LR = ("match_rms_adamw", "original")  # torch.optim.Muon's adjust_lr_fn options
NONFINITE_POLICIES = ("stop", "skip")
# the benchmark's runs: a bare PyTorch loop, the Lightning path, and the Lightning path with layer
# telemetry every 10 and every step (the number after the slash)
BENCH_VARIANTS = ("bare", "lightning", "lightning+telemetry/10", "lightning+telemetry/1")
SPIKE_POLICIES = ("record", "skip")
AUTO = "auto"  # a cadence that scales with trainer.max_steps (gptlab.training.cadence)


@dataclass
class FSDPConfig:
    """FSDP2 options, used when trainer.strategy=fsdp."""

    reshard_after_forward: bool = True
    # with trainer.precision=bf16-mixed (on a GPU or on CPU/gloo): bf16 parameters in forward and
    # backward, fp32 gradient reduction (FSDP2's MixedPrecisionPolicy); false: autocast only
    mixed_precision: bool = True
    # checkpoint saves off the training thread (DCP's async_save; docs/performance.md): a save stages
    # a host copy of the rank's shards and returns, the next save or the end of fit swaps it in
    async_save: bool = False
    # replaced by model.activation_checkpointing (per block, for every strategy): kept only to say so
    activation_checkpointing: Any = None

    def __post_init__(self) -> None:
        if self.activation_checkpointing is not None:
            raise ValueError(
                f"trainer.fsdp.activation_checkpointing={self.activation_checkpointing!r} is no longer "
                "accepted; use model.activation_checkpointing=none|full|selective (every strategy)"
            )


@dataclass
class TrainerConfig:
    """The subset of lightning.Trainer arguments the project uses, plus the strategy choice."""

    accelerator: str = "auto"
    devices: Any = 1  # an int, or "auto"
    num_nodes: int = 1
    strategy: str = "auto"  # auto | ddp | fsdp
    precision: str = "auto"  # auto: bf16-mixed on a GPU that has bf16, else 32-true
    max_steps: int = 500  # the default run: about 3 minutes on 2 CPU cores
    # optimizer steps between validations (each writes last.ckpt, and best.ckpt when improved);
    # auto: max(100, ceil(max_steps / 20)), 100 for the default run (gptlab.training.cadence)
    val_check_interval: Any = "auto"
    log_every_n_steps: int = 10
    accumulate_grad_batches: int = 1
    deterministic: bool = False
    enable_progress_bar: bool = True
    fsdp: FSDPConfig = field(default_factory=FSDPConfig)

    def __post_init__(self) -> None:
        # Lightning reads max_steps=-1 as "no limit"; the schedule then has no length to decay over
        # and every run must end with a validation at a known step: a run is a number of steps
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(
                f"trainer.max_steps={self.max_steps!r} is not accepted; give the number of optimizer "
                "steps, an integer >= 1 (the LR schedule decays over it)"
            )
        check_interval("trainer.val_check_interval", self.val_check_interval)
        if self.fsdp.async_save and self.strategy != "fsdp":
            raise ValueError(
                f"trainer.fsdp.async_save=true needs trainer.strategy=fsdp, not {self.strategy!r}: only "
                "FSDP2's sharded checkpoint is written asynchronously; use trainer=fsdp or drop it"
            )


@dataclass
class OptimConfig:
    """AdamW (decay on matrices only) with linear warmup then cosine/linear decay or constant."""

    lr: float = 2e-3
    min_lr: float = 2e-4
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    warmup_steps: int = 20
    schedule: str = "cosine"
    grad_clip: float = 1.0  # max global L2 norm; 0 turns clipping off
    z_loss: float = 0.0  # coefficient on the mean log²Z of the output logits (PaLM's 1e-4); 0: off
    # optim=muon: torch.optim.Muon on the hidden matrices, AdamW (the fields above) on the rest
    name: str = "adamw"  # adamw | muon
    muon_momentum: float = 0.95
    muon_nesterov: bool = True
    muon_ns_steps: int = 5  # Newton–Schulz iterations
    muon_adjust_lr: str = "match_rms_adamw"  # or original (Jordan's sqrt(max(1, A/B)))
    muon_lr_mult: float = 1.0  # the Muon group's LR = lr × this (1 under match_rms_adamw)
    # optim.schedule=wsd: warmup, optim.lr held, then a decay to min_lr over exactly one of these
    decay_steps: int | None = None  # the last this many steps (0: no decay, a trunk)
    decay_fraction: float | None = None  # or this fraction of trainer.max_steps (rounded)
    decay_shape: str = "sqrt"  # linear | sqrt (1 − sqrt, Hägele et al. 2024) | cosine
    # a trunk (wsd, decay_steps=0) saves checkpoints/branch_<step>.ckpt at each: a step (int) or
    # a token count (a string with a K/M/G/T suffix, e.g. '2M': the first step reaching it)
    branch_points: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        """One line naming the field, before start-up (torch would refuse some of these only later,
        in its own words, and accept others, such as a negative clip, silently)."""
        _number("optim.lr", self.lr, ">= 0")
        _number("optim.min_lr", self.min_lr, ">= 0")
        _number("optim.weight_decay", self.weight_decay, ">= 0")
        _number("optim.grad_clip", self.grad_clip, ">= 0 (0 turns clipping off)")
        _number("optim.eps", self.eps, "> 0", strict=True)
        _number("optim.z_loss", self.z_loss, ">= 0 (0 turns it off; PaLM used 1e-4)")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 <= value < 1):
                raise ValueError(f"optim.{name}={value!r} is not accepted; give a number in [0, 1)")
        if (
            isinstance(self.warmup_steps, bool)
            or not isinstance(self.warmup_steps, int)
            or self.warmup_steps < 0
        ):
            raise ValueError(
                f"optim.warmup_steps={self.warmup_steps!r} is not accepted; give an integer >= 0"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"optim.schedule={self.schedule!r} is not accepted; choose one of {', '.join(SCHEDULES)}"
            )
        check_decay_fields(self)
        self._check_muon()

    def _check_muon(self) -> None:
        """The Muon fields (read only under optim.name=muon, checked always: a typo is a typo)."""
        if self.name not in OPTIMIZERS:
            raise ValueError(
                f"optim.name={self.name!r} is not accepted; choose one of {', '.join(OPTIMIZERS)}"
            )
        if self.muon_adjust_lr not in MUON_ADJUST_LR:
            raise ValueError(
                f"optim.muon_adjust_lr={self.muon_adjust_lr!r} is not accepted; choose one of "
                f"{', '.join(MUON_ADJUST_LR)} (torch.optim.Muon's adjust_lr_fn)"
            )
        if not (isinstance(self.muon_momentum, int | float) and 0 <= self.muon_momentum < 1):
            raise ValueError(
                f"optim.muon_momentum={self.muon_momentum!r} is not accepted; give a number in [0, 1)"
            )
        steps = self.muon_ns_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps < 100:
            raise ValueError(
                f"optim.muon_ns_steps={steps!r} is not accepted; give an integer in [1, 99] "
                "(Newton–Schulz iterations)"
            )
        _number("optim.muon_lr_mult", self.muon_lr_mult, "> 0", strict=True)


def check_interval(
    field_name: str, value: Any, allow_null: bool = False, unit: str = "optimizer steps"
) -> None:
    """A cadence: `auto`, an integer >= 1 (or null where `allow_null`); else one line naming the field."""
    if value == AUTO or (allow_null and value is None):
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        null = ", or null (at every validation)" if allow_null else ""
        raise ValueError(
            f"{field_name}={value!r} is not accepted; give an integer >= 1 ({unit}), "
            f"or auto (scales with trainer.max_steps){null}"
        )


def _number(field_name: str, value: Any, accepted: str, strict: bool = False) -> None:
    """A finite number >= 0 (> 0 when strict); NaN and inf are refused too."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (strict and value == 0):
        raise ValueError(f"{field_name}={value!r} is not accepted; give a finite number {accepted}")


@dataclass
class LoggerConfig:
    """Where metrics go: wandb (offline unless configured) and a CSV log beside it."""

    wandb: bool = True
    csv: bool = True
    project: str = "gptlab"
    entity: str | None = None
    mode: str = "offline"  # offline | online | disabled; online falls back to offline on failure
    group: str | None = None
    name: str | None = None  # default: Hydra's override dirname, or "default"
    tags: list[str] = field(default_factory=list)


@dataclass
class TelemetryConfig:
    """Layer-wise gradient / parameter / activation statistics on log steps only."""

    enabled: bool = True
    every_n_steps: int | None = None  # None: trainer.log_every_n_steps
    act_rms: bool = True
    attention: bool = True  # attn_logit_max/*, attn_entropy/* (from the q, k SDPA was given)
    attention_every: int = 10  # ... on every this-many-th log step (and on spike steps): T×T scores
    figures: bool = True
    # heat maps re-drawn (and re-logged to wandb) during the run every this many log steps; auto:
    # max(1000, max_steps / 10) steps' worth (training/cadence.py); always drawn at the end
    figures_every: Any = AUTO

    def __post_init__(self) -> None:
        for name in ("every_n_steps", "attention_every"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(
                    f"callbacks.telemetry.{name}={value!r} is not accepted; give an integer >= 1"
                )
        check_interval("callbacks.telemetry.figures_every", self.figures_every, unit="log steps")


@dataclass
class SpikesConfig:
    """Loss-spike forensics (training/callbacks/spikes.py): loss against its EMA, in σ."""

    enabled: bool = True
    threshold: float = 6.0  # a spike: loss > EMA + threshold·σ
    ema_decay: float = 0.95  # ~20-step memory
    warmup_steps: int = 50  # steps folded into the EMA before any detection
    on_spike: str = "record"  # record | skip (skip also drops the step's update)
    max_records: int = 20  # spikes/step_<N>.json files at most (all are counted)
    # spike steps in a row at most; the next one above the bound is the loss's new level: its update
    # is applied (also under on_spike=skip) and the EMA restarts there, with one warning
    max_consecutive: int = 5

    def __post_init__(self) -> None:
        _number("callbacks.spikes.threshold", self.threshold, "> 0 (in σ above the EMA)", strict=True)
        value = self.ema_decay
        if not (isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1):
            raise ValueError(f"callbacks.spikes.ema_decay={value!r} is not accepted; give a number in (0, 1)")
        for name in ("warmup_steps", "max_records"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"callbacks.spikes.{name}={v!r} is not accepted; give an integer >= 0")
        v = self.max_consecutive
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"callbacks.spikes.max_consecutive={v!r} is not accepted; give an integer >= 1")
        if self.on_spike not in SPIKE_POLICIES:
            raise ValueError(
                f"callbacks.spikes.on_spike={self.on_spike!r} is not accepted; choose one of "
                f"{', '.join(SPIKE_POLICIES)}"
            )


@dataclass
class TasksConfig:
    """Downstream tasks scored at validations (training/callbacks/tasks.py, docs/evaluation.md).

    Names are checked against the built-in tasks and the files on disk when the run starts
    (gptlab.training.callbacks.tasks.check_names); here only their form."""

    names: list[str] = field(default_factory=lambda: ["val_continuation"])  # built-in names or .jsonl files
    # at the first validation at or after each multiple (None: every one); the final validation always.
    # auto: max(1000, ceil(max_steps / 10)): a run of <= 1,000 steps scores once, at its end
    # (gptlab.training.cadence; docs/performance.md, "Short runs")
    every_n_steps: Any = "auto"
    batch_size: int = 16  # requests (context + one choice) per forward

    def __post_init__(self) -> None:
        if not all(isinstance(n, str) and n.strip() for n in self.names):
            raise ValueError(
                f"callbacks.tasks.names={list(self.names)!r} is not accepted; give a list of task names "
                "(built-in names or .jsonl file paths), e.g. [val_continuation]"
            )
        check_interval("callbacks.tasks.every_n_steps", self.every_n_steps, allow_null=True)
        value = self.batch_size
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"callbacks.tasks.batch_size={value!r} is not accepted; give an integer >= 1")


@dataclass
class CallbacksConfig:
    """Callbacks the run wires in."""

    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    spikes: SpikesConfig = field(default_factory=SpikesConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    checkpoint_every_n_steps: int | None = None  # None: every validation
    progress_refresh_rate: int = 10  # fewer refreshes = fewer host syncs
    on_nonfinite: str = "stop"  # stop | skip


@dataclass
class SampleConfig:
    """The short generated sample at the end of training."""

    prompt: str | None = None  # None: the start of a validation document (fits any dataset)
    max_new_tokens: int = 200
    temperature: float = 0.8
    top_k: int | None = 50
    top_p: float | None = None


@dataclass
class BranchConfig:
    """Where a decay branch starts (with branch_from=<trunk run dir>): the trunk's branch point."""

    at: int | None = None  # a step of the trunk's optim.branch_points (its checkpoint's step)


@dataclass
class TrainConfig:
    """Root schema of conf/train.yaml."""

    model: GPTConfig = field(default_factory=GPTConfig)
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    experiment: Any = None  # the name of the experiment preset, set by conf/experiment/*.yaml
    seed: int = 1337
    ckpt_path: str | None = None  # resume from this Lightning checkpoint
    # torch.compile the blocks, final norm and loss; null: on when the accelerator is a GPU
    # (gptlab.training.gpu_defaults.resolve_compile)
    compile: bool | None = None
    # a decay branch (docs/optim.md): the trunk's run dir; branch.at its step (max_steps = at + decay)
    branch_from: str | None = None
    branch: BranchConfig = field(default_factory=BranchConfig)

    def __post_init__(self) -> None:
        """Choices that are fine alone but not together, refused before start-up in one line."""
        if self.branch_from is None:
            check_wsd(self.optim, self.trainer.max_steps)
        if self.optim.name == "muon":
            muon_refusals(self.model.parametrization, self.trainer.strategy)


def muon_refusals(parametrization: str, strategy: str) -> None:
    """optim=muon runs on one process or under DDP (every rank holds whole gradients), standard
    parametrization only."""
    if strategy == "fsdp":
        raise ValueError(
            "optim.name=muon cannot be combined with trainer.strategy=fsdp: Muon's Newton–Schulz step needs "
            "each whole matrix and FSDP2 holds row shards (DTensor); use trainer.strategy=ddp or auto"
        )
    if parametrization != "sp":
        raise ValueError(
            f"optim.name=muon cannot be combined with model.parametrization={parametrization}: μP's LR "
            "and ε multipliers are AdamW's rules (Muon's shape rule is optim.muon_adjust_lr); use "
            "model.parametrization=sp"
        )


@dataclass
class BenchOptions:
    """What scripts/bench.py runs: `bench.<field>=<value>` on its command line (not part of a
    training run's tree: the benchmark composes this schema beside conf/train.yaml)."""

    steps: int = 10  # timed optimizer steps per run (a multiple of the log interval)
    warmup: int = 3  # untimed steps before them (allocator, caches, torch.compile)
    repeats: int = 3  # rounds; each round runs every variant once, in rotated order
    variants: tuple[str, ...] = BENCH_VARIANTS
    loader_batches: int = 200  # batches read from the train DataLoader alone
    tokenize: bool = True  # time tokenizing the configured corpus, cold then cached
    matmul_size: int = 2048  # n of the n×n @ n×n fp32 matmul that measures a CPU's peak
    matmul_repeats: int = 5
    threads: int = 0  # torch.set_num_threads for the whole benchmark; 0: torch's default
    json: str | None = None  # also write the raw results here

    def __post_init__(self) -> None:
        self.variants = tuple(self.variants)  # OmegaConf hands a list back
        self.check()

    def check(self) -> None:
        """One clear error per bad option (run again by the benchmark: fields are assignable)."""
        if not isinstance(self.threads, int) or self.threads < 0:
            raise ValueError(f"bench.threads={self.threads!r} must be an integer >= 0 (0: torch's default)")
        for name in ("steps", "warmup", "repeats", "loader_batches", "matmul_size", "matmul_repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"bench.{name}={value!r} must be an integer >= 1")
        unknown = [v for v in self.variants if v not in BENCH_VARIANTS]
        if unknown or not self.variants:
            raise ValueError(
                f"bench.variants={','.join(self.variants)!r} is not accepted; choose from "
                f"{', '.join(BENCH_VARIANTS)} (comma-separated)"
            )


def register_configs() -> None:
    """Register the schema so conf/train.yaml can put it first in its defaults list."""
    from gptlab.launch_id import register_resolver

    register_resolver()  # ${launch_id:...} in conf/hydra/default.yaml
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="bench_schema", node=BenchOptions)

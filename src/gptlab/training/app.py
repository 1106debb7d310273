"""The application: compose → validate → prepare data → (start ranks) → instantiate → fit → report."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.fabric.utilities.rank_zero import rank_zero_only
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from gptlab.config import TrainConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.data.spec import tokenizer_spec
from gptlab.errors import USER_ERRORS, exit_with, one_line
from gptlab.model import GPTConfig
from gptlab.training.callbacks.final_validation import FinalValidation
from gptlab.training.callbacks.log_step import LogStepIsOptimizerStep
from gptlab.training.callbacks.nonfinite import EXIT_NONFINITE, NonFiniteError, NonFiniteMonitor
from gptlab.training.callbacks.preemption import EXIT_PREEMPTED, PreemptionCheckpoint
from gptlab.training.callbacks.progress import LossProgressBar
from gptlab.training.callbacks.rng import RNGStateCheckpoint
from gptlab.training.callbacks.summary import RunSummary, write_json_atomic
from gptlab.training.callbacks.throughput import LogStepThroughput
from gptlab.training.checkpoint_io import AtomicCheckpointIO
from gptlab.training.launch import LocalWorkers, externally_launched
from gptlab.training.loggers import ablation_fields, build_loggers, finish_wandb
from gptlab.training.module import GPTLightningModule
from gptlab.training.strategies import build_strategy

log = logging.getLogger("gptlab")


def validate(cfg: DictConfig) -> TrainConfig:
    """Turn the composed DictConfig into typed dataclasses; GPTConfig validates itself."""
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def resolve_devices(cfg: TrainConfig) -> tuple[str, int]:
    """The accelerator and the number of local devices, with one clear error for impossible asks."""
    t = cfg.trainer
    has_gpu = torch.cuda.is_available()
    accelerator = t.accelerator if t.accelerator != "auto" else ("gpu" if has_gpu else "cpu")
    if accelerator not in ("cpu", "gpu", "cuda"):
        raise ValueError(f"trainer.accelerator={t.accelerator!r} is not accepted; choose auto, cpu or gpu")
    if accelerator in ("gpu", "cuda") and not has_gpu:
        raise ValueError("trainer.accelerator=gpu but this machine has no GPU; use trainer.accelerator=cpu")
    available = torch.cuda.device_count() if accelerator != "cpu" else (os.cpu_count() or 1)
    if t.devices == "auto" or t.devices == -1:
        devices = available if accelerator != "cpu" else 1
    elif isinstance(t.devices, int) and not isinstance(t.devices, bool) and t.devices > 0:
        devices = t.devices
    else:
        raise ValueError(f"trainer.devices={t.devices!r} is not accepted; give a positive integer or auto")
    if devices > available:
        what = "GPUs" if accelerator != "cpu" else "CPU cores"
        hint = "" if accelerator != "cpu" or t.accelerator != "auto" else " (no GPU found)"
        raise ValueError(
            f"trainer.devices={devices} but this machine has {available} {what}{hint}; "
            f"accepted: 1..{available}"
        )
    if t.accelerator == "auto" and not has_gpu and devices > 1:
        raise ValueError(
            f"trainer.devices={devices} asks for several devices but no GPU was found; to run "
            f"{devices} CPU processes say so: trainer.accelerator=cpu trainer.devices={devices}"
        )
    return ("cpu" if accelerator == "cpu" else "gpu"), devices


def resolve_precision(cfg: TrainConfig, accelerator: str) -> str:
    if cfg.trainer.precision != "auto":
        return cfg.trainer.precision
    if accelerator == "gpu" and torch.cuda.is_bf16_supported():
        return "bf16-mixed"
    return "32-true"


def model_config(cfg: TrainConfig, vocab_size: int, tokenizer: Any = None) -> GPTConfig:
    """The model config with the vocabulary grown to the tokenizer's (never shrunk).

    With model.init_from, the checkpoint's architecture instead (only block_size and dropout come
    from model.*); its vocabulary is never resized, so it must hold the tokenizer's ids.
    """
    model = cfg.model
    if model.init_from:
        from gptlab.data.spec import same_tokenizer
        from gptlab.data.tokenizer_files import hf_tokenizer_spec
        from gptlab.export import init_config

        model = init_config(model.init_from, model, vocab_size)  # reads config.json only
        shipped = Path(model.init_from) / "tokenizer.json"
        if tokenizer is not None and shipped.is_file():
            if not same_tokenizer(hf_tokenizer_spec(model.init_from), tokenizer_spec(tokenizer)):
                log.warning(
                    "model.init_from=%s ships a tokenizer.json that differs from the data's "
                    "tokenizer (%s): its embeddings will see ids they were not trained on; "
                    "use data.tokenizer=pretrained data.tokenizer_path=%s",
                    model.init_from,
                    tokenizer.name,
                    model.init_from,
                )
        log.info("model: the architecture of %s (%s)", model.init_from, model)
        return model
    if model.vocab_size < vocab_size:
        log.info("model.vocab_size %d → %d to fit the tokenizer", model.vocab_size, vocab_size)
        model = dataclasses.replace(model, vocab_size=vocab_size)
    return model


def run_name(cfg: TrainConfig) -> str:
    if cfg.logger.name:
        return cfg.logger.name
    try:
        return HydraConfig.get().job.override_dirname or "default"
    except ValueError:
        return "default"


def job_overrides() -> list[str]:
    """This job's command-line and sweep overrides, as Hydra recorded them (empty outside Hydra)."""
    try:
        return [str(o) for o in HydraConfig.get().overrides.task]
    except ValueError:
        return []


def swept_keys() -> list[str]:
    """The fields a multirun varies: the sweeper's params (an experiment's grid) plus the sweep
    overrides of its command line (kept in multirun.yaml); the job's override keys when neither
    is known (a sweeper that writes no multirun.yaml, e.g. optuna with only command-line params)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra_cfg = HydraConfig.get()
    keys = [str(k) for k in (hydra_cfg.sweeper.get("params") or {})]
    if hydra_cfg.sweeper.get("arm"):  # the ablation sweeper: its grid is arm × LR × seed
        keys = [str(hydra_cfg.sweeper.arm), "optim.lr", "seed", *keys]
    master = Path(hydra_cfg.sweep.dir) / "multirun.yaml"
    if master.is_file():
        task = OmegaConf.load(master).hydra.overrides.task
        parsed = OverridesParser.create().parse_overrides([str(o) for o in task])
        keys += [o.key_or_group for o in parsed if o.is_sweep_override()]
    if not keys:
        excluded = set(hydra_cfg.job.config.override_dirname.exclude_keys) | {"experiment"}
        keys = [o.split("=", 1)[0].lstrip("+~") for o in job_overrides()]
        keys = [k for k in keys if k not in excluded]
    return list(dict.fromkeys(keys))


def sweep_arm_key() -> str | None:
    """The ablation sweeper's arm key (e.g. model/ffn) in a multirun of one, else None."""
    try:
        arm = HydraConfig.get().sweeper.get("arm")
    except ValueError:
        return None
    return str(arm) if arm else None


def job_tags(cfg: TrainConfig) -> list[str]:
    """logger.tags plus, in a multirun, the experiment's name and the ablated fields, so a
    sweep's runs can be filtered by what they vary."""
    tags = list(cfg.logger.tags)
    try:
        multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:
        return tags
    if not multirun:
        return tags
    if cfg.experiment:
        tags.append(str(cfg.experiment))
    tags += swept_keys()
    return list(dict.fromkeys(tags))  # unique, in order


def build_callbacks(cfg: TrainConfig, run_dir: Path, summary: RunSummary) -> list[L.Callback]:
    every = cfg.callbacks.telemetry.every_n_steps or cfg.trainer.log_every_n_steps
    callbacks: list[L.Callback] = [
        LogStepIsOptimizerStep(),  # first: a resumed run logs each step at its own index
        summary,
        # before ModelCheckpoint: a bad step stops the run before a checkpoint is written after it
        NonFiniteMonitor(cfg.callbacks.on_nonfinite, every=cfg.trainer.log_every_n_steps),
        LogStepThroughput(every=cfg.trainer.log_every_n_steps),
        FinalValidation(),  # before ModelCheckpoint's own hooks run on that validation
        ModelCheckpoint(
            dirpath=run_dir / "checkpoints",
            filename="best",
            monitor="val/loss",
            mode="min",
            save_top_k=1,
            save_last=True,
            every_n_train_steps=cfg.callbacks.checkpoint_every_n_steps,
            enable_version_counter=False,
        ),
        RNGStateCheckpoint(),  # exact resume: dropout draws continue where the checkpoint was
        PreemptionCheckpoint(run_dir / "checkpoints"),  # SIGTERM: save last.ckpt, then exit
    ]
    if cfg.trainer.enable_progress_bar:
        callbacks.append(LossProgressBar(refresh_rate=cfg.callbacks.progress_refresh_rate))
    if cfg.callbacks.telemetry.enabled:
        from gptlab.training.callbacks.telemetry import LayerTelemetry

        t = cfg.callbacks.telemetry
        callbacks.append(
            LayerTelemetry(
                every=every,
                act_rms=t.act_rms,
                attention=t.attention,
                attention_every=t.attention_every,
                figures=t.figures,
                figures_every=t.figures_every,
                run_dir=run_dir,
            )
        )
    if cfg.callbacks.spikes.enabled:  # after telemetry: a spike record reads what it logged
        from gptlab.training.callbacks.spikes import SpikeWatch

        s = cfg.callbacks.spikes
        callbacks.append(
            SpikeWatch(
                run_dir,
                s.threshold,
                s.ema_decay,
                s.warmup_steps,
                s.on_spike,
                s.max_records,
                s.max_consecutive,
            )
        )
    return callbacks


def build_trainer(
    cfg: TrainConfig,
    accelerator: str,
    devices: int,
    run_dir: Path,
    loggers: list[Any],
    callbacks: list[L.Callback],
) -> L.Trainer:
    """The Trainer as `train` runs it (also used by gptlab.bench, so both time the same)."""
    return L.Trainer(
        accelerator=accelerator,
        devices=devices,
        num_nodes=cfg.trainer.num_nodes,
        strategy=build_strategy(cfg.trainer, devices),
        precision=resolve_precision(cfg, accelerator),
        max_steps=cfg.trainer.max_steps,
        val_check_interval=cfg.trainer.val_check_interval,
        check_val_every_n_epoch=None,
        limit_val_batches=1.0,  # every batch of the val loader: data.val_windows sizes validation
        log_every_n_steps=cfg.trainer.log_every_n_steps,
        accumulate_grad_batches=cfg.trainer.accumulate_grad_batches,
        deterministic=cfg.trainer.deterministic,
        use_distributed_sampler=False,  # the DataModule shards the stream itself
        enable_progress_bar=cfg.trainer.enable_progress_bar,
        enable_model_summary=False,
        logger=loggers or False,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        default_root_dir=str(run_dir),
    )


def train(cfg: TrainConfig, raw: DictConfig, run_dir: Path) -> dict[str, Any]:
    """One training job in this process (and, for several local devices, its worker processes)."""
    accelerator, devices = resolve_devices(cfg)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    datamodule.prepare()  # before starting ranks: they find the token file cached
    model_cfg = model_config(cfg, datamodule.vocab_size, datamodule.tokenizer)

    workers = None
    if devices > 1 and not externally_launched():
        if cfg.trainer.num_nodes > 1:
            raise ValueError(
                "trainer.num_nodes>1 needs an external launcher (srun or torchrun); see docs/multinode.md"
            )
        overrides = list(HydraConfig.get().overrides.task)
        workers = LocalWorkers(devices, str(run_dir), overrides)
    try:
        module = GPTLightningModule(
            model=dataclasses.asdict(model_cfg),
            optim=dataclasses.asdict(cfg.optim),
            bytes_per_token=datamodule.bytes_per_token,
            compile=cfg.compile,
            fsdp=dataclasses.asdict(cfg.trainer.fsdp) if cfg.trainer.strategy == "fsdp" else None,
            tokenizer=tokenizer_spec(datamodule.tokenizer),
        )
        if model_cfg.init_from:
            from gptlab.export import init_from_hf

            init_from_hf(module.model, model_cfg.init_from)
        rank = rank_zero_only.rank  # Lightning's global rank, from RANK / LOCAL_RANK / SLURM_PROCID
        logger_cfg = dataclasses.replace(cfg.logger, tags=job_tags(cfg))
        run_config = OmegaConf.to_container(raw, resolve=True)
        run_config.update(ablation_fields(cfg.optim.lr, cfg.seed, job_overrides(), sweep_arm_key()))
        loggers = build_loggers(
            logger_cfg, run_dir, run_name(cfg), run_config, rank, resume=cfg.ckpt_path is not None
        )
        summary = RunSummary(
            run_dir,
            extra={
                "num_params": module.model.num_params(),
                "vocab_size": model_cfg.vocab_size,  # ln(V): the report's loss at init
                "run_name": run_name(cfg),
                "overrides": job_overrides(),
                "group": logger_cfg.group,
                "tags": logger_cfg.tags,
            },
        )
        trainer = build_trainer(
            cfg, accelerator, devices, run_dir, loggers, build_callbacks(cfg, run_dir, summary)
        )
        try:
            # weights_only=True for every strategy's loader (FSDP's sharded one too), not torch's default
            trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path, weights_only=True)
        except BaseException as err:  # never leave a half-done run looking like a result
            if isinstance(err, SIGTERMException):
                summary.write(trainer, "preempted", resume_from=str(run_dir / "checkpoints" / "last.ckpt"))
            else:  # a non-finite stop is a result of its LR, recorded as diverged
                diverged = {"diverged": True} if isinstance(err, NonFiniteError) else {}
                summary.write(trainer, "failed", error=one_line(err), **diverged)
            finish_wandb(loggers)
            raise
        sample = generate_sample(cfg, module, datamodule)
        result = summary.write(trainer, "finished", sample=sample)
        if trainer.global_rank == 0:
            log.info("sample:\n%s", sample)
            log.info(
                "final val loss %s, best %s; outputs in %s",
                result["final_val_loss"],
                result["best_val_loss"],
                run_dir,
            )
        finish_wandb(loggers)
        if workers is not None:
            workers.join()
        return result
    except BaseException:
        if workers is not None:
            workers.kill()
        raise
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        if workers is not None:
            LocalWorkers.clear_env()


def generate_sample(cfg: TrainConfig, module: GPTLightningModule, datamodule: TokenDataModule) -> str:
    """A short sample from the trained model (every rank computes it: FSDP needs all of them)."""
    from gptlab.generation import sample_tokens

    s = cfg.sample
    if s.max_new_tokens <= 0:
        return ""
    tok = datamodule.tokenizer
    # sample.prompt when given, else the start of a validation document: a sample that fits the data
    prompt = list(tok.encode(s.prompt)) if s.prompt else datamodule.sample_prompt()
    gen = torch.Generator(device=module.device).manual_seed(cfg.seed)
    ids = list(sample_tokens(module.model, prompt, s.max_new_tokens, s.temperature, s.top_k, s.top_p, gen))
    return tok.decode(prompt + ids)


def run_job(raw: DictConfig) -> float:
    """Hydra's task function; returns the best validation loss (what a sweeper minimises)."""
    # Lightning adds its own console handler; let its records go through Hydra's (console + file) once
    logging.getLogger("lightning.pytorch").handlers.clear()
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    write_status(run_dir, {"status": "running"})  # a run killed outright never reads as finished
    try:
        cfg = validate(raw)
        result = train(cfg, raw, run_dir)
        best = result.get("best_val_loss")
        return float(best) if best is not None else math.nan
    except USER_ERRORS as err:
        failed = {"status": "failed", "error": one_line(err), "overrides": job_overrides()}
        write_status(run_dir, failed, only_over_running=False)
        if not multirun:
            exit_with(err)
        log.error(one_line(err))
        return math.nan
    except NonFiniteError as err:  # train() wrote metrics.json (status failed)
        if not multirun:
            exit_with(err, EXIT_NONFINITE)
        log.error(one_line(err))
        return math.nan
    except SIGTERMException:  # train() wrote metrics.json (status preempted) and last.ckpt
        write_status(run_dir, {"status": "preempted"})  # SIGTERM while packing: only "running" so far
        log.warning("stopped by SIGTERM: metrics.json status 'preempted', exit code %d", EXIT_PREEMPTED)
        raise SystemExit(EXIT_PREEMPTED if rank_zero_only.rank == 0 else 0) from None
    except Exception as err:
        write_status(run_dir, {"status": "failed", "error": one_line(err)})
        raise


def write_status(run_dir: Path, status: dict[str, Any], only_over_running: bool = True) -> None:
    """Write metrics.json from rank zero; by default only where no richer record exists yet."""
    if rank_zero_only.rank != 0:
        return
    path = RunSummary(run_dir).path
    if only_over_running and status["status"] != "running" and path.exists():
        try:
            if json.loads(path.read_text()).get("status") != "running":
                return
        except (OSError, ValueError):
            pass
    write_json_atomic(path, status)

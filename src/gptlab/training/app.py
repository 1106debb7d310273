"""The application: compose → validate → prepare data → (start ranks) → instantiate → fit → report.

The Trainer and its callbacks are built in gptlab.training.trainer, the job's name, overrides and
tags read from Hydra in gptlab.training.job_identity; this module runs the steps in order and
records how the run ended (metrics.json, the exit code)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.fabric.utilities.rank_zero import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from gptlab.config import TrainConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.data.documents import check_documents, document_spec
from gptlab.data.spec import tokenizer_spec
from gptlab.errors import USER_ERRORS, exit_with, one_line
from gptlab.model import GPTConfig
from gptlab.training.branches import BranchPointCheckpoints, prepare_branch, resolve_points, write_record
from gptlab.training.callbacks.nonfinite import EXIT_NONFINITE, NonFiniteError
from gptlab.training.callbacks.preemption import EXIT_PREEMPTED
from gptlab.training.callbacks.summary import RunSummary
from gptlab.training.callbacks.tasks import task_lines
from gptlab.training.gpu_defaults import enable_tf32, resolve_compile
from gptlab.training.job_identity import job_overrides, job_tags, run_name, sweep_arm_key
from gptlab.training.launch import LocalWorkers, externally_launched
from gptlab.training.loggers import ablation_fields, build_loggers, finish_wandb, log_lineage
from gptlab.training.module import GPTLightningModule
from gptlab.training.run_record import refuse, validate, write_json_atomic
from gptlab.training.trainer import build_callbacks, build_trainer, resolve_devices, task_callbacks

log = logging.getLogger("gptlab")


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


def train(cfg: TrainConfig, raw: DictConfig, run_dir: Path) -> dict[str, Any]:
    """One training job in this process (and, for several local devices, its worker processes)."""
    composed = OmegaConf.to_container(raw, resolve=True)
    cfg, branch = prepare_branch(cfg, composed)  # a branch's refusals: before anything is written
    if branch:  # its records (wandb config, wsd.json) say what runs: the trunk's WSD, at + d steps
        composed["optim"].update(schedule="wsd", branch_points=[])
        composed["trainer"]["max_steps"] = cfg.trainer.max_steps
    accelerator, devices = resolve_devices(cfg)
    compile_model = resolve_compile(cfg.compile, accelerator)
    enable_tf32(accelerator)
    tasks = task_callbacks(cfg)  # names checked, task files read: a bad one fails before the data is prepared
    check_documents(cfg.data)  # before the data is prepared
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    datamodule.prepare()  # before starting ranks: they find the token file cached
    model_cfg = model_config(cfg, datamodule.vocab_size, datamodule.tokenizer)
    tok = datamodule.tokenizer
    documents = document_spec(cfg.data, getattr(tok, "eos_id", None), getattr(tok, "name", "the tokenizer"))

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
            compile=compile_model,
            fsdp=dataclasses.asdict(cfg.trainer.fsdp) if cfg.trainer.strategy == "fsdp" else None,
            tokenizer=tokenizer_spec(datamodule.tokenizer),
            documents=documents,
        )
        if model_cfg.init_from:
            from gptlab.export import init_from_hf

            init_from_hf(module.model, model_cfg.init_from)
        rank = rank_zero_only.rank  # Lightning's global rank, from RANK / LOCAL_RANK / SLURM_PROCID
        points = resolve_points(cfg, devices * cfg.trainer.num_nodes)
        # a trunk and its branches share a wandb group: the trunk's logger.group, else its name
        group = branch["group"] if branch else cfg.logger.group or (run_name(cfg) if points else None)
        logger_cfg = dataclasses.replace(cfg.logger, tags=job_tags(cfg), group=group)
        run_config = dict(composed)
        run_config.update(ablation_fields(cfg.optim.lr, cfg.seed, job_overrides(), sweep_arm_key()))
        lineage = {"branch": branch} if branch else {"branch_points": points} if points else {}
        run_config.update(lineage)
        if cfg.optim.schedule == "wsd" and rank == 0:
            write_record(run_dir, composed, run_name(cfg), group, points)
        loggers = build_loggers(
            logger_cfg, run_dir, run_name(cfg), run_config, rank, resume=cfg.ckpt_path is not None
        )
        log_lineage(loggers, lineage)
        summary = RunSummary(
            run_dir,
            extra={
                "num_params": module.model.num_params(),
                "vocab_size": model_cfg.vocab_size,  # ln(V): the report's loss at init
                "run_name": run_name(cfg),
                "overrides": job_overrides(),
                "group": logger_cfg.group,
                "tags": logger_cfg.tags,
                **lineage,
            },
        )
        callbacks = build_callbacks(cfg, run_dir, summary, tasks)
        if points:
            callbacks.append(BranchPointCheckpoints(run_dir, [p["step"] for p in points]))
        trainer = build_trainer(cfg, accelerator, devices, run_dir, loggers, callbacks)
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
        sample, sample_error = safe_sample(cfg, module, datamodule)
        result = summary.write(trainer, "finished", sample=sample, **sample_error)
        if trainer.global_rank == 0:
            log.info("sample:\n%s", sample)
            log.info(
                "final val loss %s, best %s; outputs in %s",
                result["final_val_loss"],
                result["best_val_loss"],
                run_dir,
            )
            for line in task_lines(result.get("tasks") or {}):
                log.info("%s", line)
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


def safe_sample(
    cfg: TrainConfig, module: GPTLightningModule, datamodule: TokenDataModule
) -> tuple[str, dict[str, str]]:
    """The end-of-run sample, and {"sample_error": ...} when it failed: a run that trained is a
    result, so a failing sample is a warning (and a field of metrics.json), never a failed run."""
    try:
        return generate_sample(cfg, module, datamodule), {}
    except Exception as err:  # whatever the sample hit, the trained run stands
        reason = one_line(err).removeprefix("error: ")
        log.warning("the end-of-run sample failed (the run itself finished): %s", reason)
        return "", {"sample_error": reason}


def generate_sample(cfg: TrainConfig, module: GPTLightningModule, datamodule: TokenDataModule) -> str:
    """A short sample from the trained model (every rank computes it: FSDP needs all of them),
    drawn only from ids the tokenizer can decode (generation.sample_tokens' `decodable`)."""
    from gptlab.generation import sample_tokens, warn_undecodable

    s = cfg.sample
    if s.max_new_tokens <= 0:
        return ""
    tok = datamodule.tokenizer
    # sample.prompt when given, else the start of a validation document: a sample that fits the data
    prompt = list(tok.encode(s.prompt)) if s.prompt else datamodule.sample_prompt()
    gen = torch.Generator(device=module.device).manual_seed(cfg.seed)
    settings = (s.max_new_tokens, s.temperature, s.top_k, s.top_p)
    warn_undecodable(module.model.cfg.vocab_size, tok.vocab_size)
    # eager: every new length would be another graph of the compiled blocks (compile on a GPU)
    with torch.compiler.set_stance("force_eager"):
        ids = list(sample_tokens(module.model, prompt, *settings, gen, decodable=tok.vocab_size))
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
    except USER_ERRORS as err:  # refused after start-up (data, tasks, checkpoints): as train.py's check does
        return refuse(err, run_dir, multirun)
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

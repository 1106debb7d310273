"""Train a GPT: `python train.py [model=<preset>] [group=option ...] [key=value ...]` (Hydra)."""

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again (~1 CPU s a run)
    import hydra
    from omegaconf import DictConfig

    from gptlab.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    from gptlab.training.run_record import checked

    if checked(cfg) is None:  # refused before Lightning is imported (a sweep's job: NaN, the sweep goes on)
        return float("nan")
    with imports_unscanned():  # Lightning's, as torch's above
        from gptlab.training.early_imports import import_before_lightning

        import_before_lightning(cfg)  # wandb's launch models cost 1 CPU s less before Lightning's modules
        from gptlab.dashboards.cli import write_at_run_end
        from gptlab.training.app import run_job

    best = run_job(cfg)
    write_at_run_end(cfg)  # the run's wandb view (docs/dashboards.md); a sweep writes its own
    return best


if __name__ == "__main__":
    main()

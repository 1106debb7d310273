"""Train a GPT: `python train.py [model=<preset>] [group=option ...] [key=value ...]` (Hydra)."""

import hydra
from omegaconf import DictConfig

from gptlab.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    from gptlab.training.app import run_job

    return run_job(cfg)


if __name__ == "__main__":
    main()

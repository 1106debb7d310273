"""A Hydra app that records what the slots launcher gave its job (GPUs, port, threads, when it ran),
so the GPU split can be checked in real processes on a machine without GPUs: no torch is imported,
the job only reads its environment."""

import json
import os
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    start = time.time()
    met = None
    if int(cfg.barrier):  # wait (up to 60 s) until `barrier` jobs have started: proof they ran at once
        started = Path(HydraConfig.get().sweep.dir) / "started"
        started.mkdir(exist_ok=True)
        (started / str(HydraConfig.get().job.num)).touch()
        deadline = time.time() + 60
        while len(list(started.iterdir())) < int(cfg.barrier) and time.time() < deadline:
            time.sleep(0.05)
        met = len(list(started.iterdir())) >= int(cfg.barrier)
    time.sleep(float(cfg.sleep))
    seen = {
        "met": met,
        "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "port": os.environ.get("GPTLAB_MASTER_PORT"),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "pid": os.getpid(),
        "start": start,
        "end": time.time(),
        "num": HydraConfig.get().job.num,
    }
    (Path(HydraConfig.get().runtime.output_dir) / "seen.json").write_text(json.dumps(seen))
    if int(cfg.x) == int(cfg.crash_at):
        raise RuntimeError(f"job x={cfg.x} crashed on purpose")
    return float(cfg.x)


if __name__ == "__main__":
    main()

"""Statistics at initialization on real tokens: residual-stream variance per depth-scaling scheme
against the seeds' prediction, and per-block gradient norms by norm placement (Xiong et al. 2020).

usage: python scripts/init_report.py [model=<preset>] [Hydra overrides ...]
                                     [out=<dir>] [seeds=3] [batch=8]
Default out: outputs/init_report/<preset>. data.max_bytes defaults to 1000000 here.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path

OURS = ("out", "seeds", "batch")


def _positive_int(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{key}={value!r} must be a positive integer")
    return n


def main(argv: list[str] | None = None) -> int:
    """Compose the config as train.py would, load a few windows of its data, write the report."""
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from gptlab.analysis.init_stats import init_report, real_tokens
    from gptlab.config import register_configs
    from gptlab.errors import USER_ERRORS, one_line

    ours = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.split("=", 1)[0] in OURS and "=" in a}
    overrides = [a for a in args if a.split("=", 1)[0] not in OURS]
    if not any(o.startswith("data.max_bytes=") for o in overrides):
        overrides.append("data.max_bytes=1000000")
    try:
        seeds = _positive_int("seeds", ours.get("seeds", "3"))
        batch = _positive_int("batch", ours.get("batch", "8"))
        register_configs()
        conf = Path(__file__).resolve().parents[1] / "conf"
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            raw = compose(config_name="train", overrides=overrides, return_hydra_config=True)
        preset = str(raw.hydra.runtime.choices.get("model", "model"))
        with open_dict(raw):
            del raw["hydra"]
        cfg = OmegaConf.to_object(raw)
        tokens, vocab = real_tokens(cfg, batch)
        model = cfg.model
        if model.vocab_size < vocab:
            model = dataclasses.replace(model, vocab_size=vocab)
        out = Path(ours.get("out", f"outputs/init_report/{preset}"))
        report = init_report(model, tokens, out, seeds=tuple(range(seeds)), title=" ".join(args) or preset)
    except USER_ERRORS as err:
        print(one_line(err), file=sys.stderr)
        return 2
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

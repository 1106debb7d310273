"""The benchmark's command line: `bench.<field>=<value>` options apart from Hydra overrides.

The options' schema is `gptlab.config.BenchOptions` (registered with Hydra's ConfigStore beside the
training schema); this module reads the command-line grammar the benchmark has always taken
(`bench.variants=bare,lightning`, a comma list Hydra would read as a sweep) into typed values and
composes the schema with them, so a bad value fails in one line that names the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gptlab.compose import compose_config, compose_schema
from gptlab.config import BENCH_VARIANTS, BenchOptions, TrainConfig

BARE, LIGHTNING = BENCH_VARIANTS[:2]
# the telemetry variants, by how often their telemetry logs (the number after the slash)
TELEMETRY_EVERY = {v: int(v.rsplit("/", 1)[1]) for v in BENCH_VARIANTS[2:]}
VARIANTS = BENCH_VARIANTS
PRECISIONS = ("32-true", "bf16-mixed")


def _value(key: str, value: str) -> Any:
    """The typed value of one `bench.<key>=<value>` (the schema then checks its range)."""
    if key == "variants":
        return [v.strip() for v in value.split(",") if v.strip()]
    if key == "json":
        return value
    if key == "tokenize":
        if value.lower() not in ("true", "false"):
            raise ValueError(f"bench.tokenize={value!r} is not accepted; use true or false")
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"bench.{key}={value!r} must be an integer") from None


def parse_args(argv: Sequence[str]) -> tuple[BenchOptions, list[str]]:
    """`bench.<field>=<value>` go to BenchOptions; everything else is a Hydra override."""
    names = [f.name for f in dataclasses.fields(BenchOptions)]
    values: dict[str, Any] = {}
    overrides = []
    for arg in argv:
        if not arg.startswith("bench."):
            overrides.append(arg)
            continue
        key, sep, value = arg[len("bench.") :].partition("=")
        if not sep or key not in names:
            raise ValueError(
                f"argument {arg!r} is not accepted; bench options are bench.<field>=<value> with "
                f"field one of {', '.join(names)}"
            )
        values[key] = _value(key, value)
    return compose_schema("bench_schema", values), overrides


def compose(overrides: Sequence[str], conf_dir: Path | None = None) -> TrainConfig:
    """conf/train.yaml composed with the overrides and validated, as train.py does (logger=csv
    unless a logger override is given: wandb's service process would compete for the CPU)."""
    overrides = list(overrides)
    if not any(o.lstrip("+~").startswith("logger") for o in overrides):
        overrides.insert(0, "logger=csv")
    return compose_config(overrides, conf_dir=conf_dir)

"""README's axis table and config tree name only what conf/ and the config dataclasses hold, and
every ablation group under conf/model/ is in both (a newcomer reads the table first)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from gptlab.compose import compose_config
from gptlab.config import OptimConfig
from gptlab.model import GPTConfig

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
README = (REPO / "README.md").read_text()


def axis_rows() -> list[tuple[str, str, str]]:
    """(axis, options cell, config group cell) of the table under the opening paragraph."""
    table = README.split("| axis | options | config group |")[1].split("\n\n")[0]
    rows = [line.split(" | ") for line in table.strip().splitlines()[1:]]
    return [(r[0].strip("| "), r[1], r[2].strip("| `")) for r in rows]


def test_every_group_and_option_of_the_axis_table_exists() -> None:
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    for axis, options, group in axis_rows():
        names = re.findall(r"`([^`]+)`", options)
        if group == "field":  # `model.<field>=a|b|c`: the field exists and takes each value
            field, _, values = names[0].partition("=")
            name = field.removeprefix("model.")
            assert name in fields, axis
            for value in values.split("|"):
                assert getattr(compose_config([f"{field}={value}"]).model, name) == value
            continue
        assert (CONF / group).is_dir(), (axis, group)
        presets = {p.stem for p in (CONF / group).glob("*.yaml")}
        listed = {n for n in names if re.fullmatch(r"[a-z][a-z0-9_]*", n)}
        assert presets <= listed | {"size"}, (axis, presets - listed)  # every preset is listed
        for name in names:
            if re.fullmatch(r"[a-z][a-z0-9_]*", name):  # a preset of the group, or an experiment named
                assert name in presets or (CONF / "experiment" / f"{name}.yaml").is_file(), (axis, name)
            elif m := re.fullmatch(r"model\.(\w+)", name):
                assert m.group(1) in fields, (axis, name)


def test_axis_table_covers_every_model_group_and_the_optimizer() -> None:
    groups = {g for _, _, g in axis_rows()}
    model_groups = {f"model/{p.name}" for p in (CONF / "model").iterdir() if p.is_dir()} - {"model/size"}
    assert model_groups | {"optim"} <= groups, model_groups - groups
    tree = next(line for line in README.splitlines() if line.startswith("conf/model/"))
    listed = set(re.search(r"model/\{([^}]+)\}", tree).group(1).split(","))
    assert listed == {p.name for p in (CONF / "model").iterdir() if p.is_dir()}


def test_the_optimizer_row_states_each_presets_lr() -> None:
    (row,) = [options for axis, options, _ in axis_rows() if axis == "optimizer"]
    for name in ("adamw", "muon"):
        lr = compose_config([f"optim={name}"]).optim.lr
        stated = re.search(rf"`{name}` \([^)]*lr ([0-9.e-]+)", row)
        assert stated and float(stated.group(1)) == lr, (name, lr, row)
    assert {f.name for f in dataclasses.fields(OptimConfig)} >= {"lr", "name"}

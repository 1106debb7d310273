"""Every metric a run logs is named in docs/architecture.md's metric table (issue 25, item 13).

The oracle is the run's own CSV log: a tiny run with z-loss, clipping and every telemetry family on
(the attention family is due on the first telemetry step); every column it writes, block indices
read as `{i:02d}`, must be a name in the table's first column.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.training.rel_harness import REPO, csv_rows, train_here


def documented() -> set[str]:
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Metric names", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([^`]+)`", first))
    return names


def test_every_logged_metric_is_in_the_table(tmp_path: Path, cache: Path) -> None:
    train_here(tmp_path, cache, "trainer.max_steps=3", "trainer.val_check_interval=3", "optim.z_loss=1e-4")
    logged = {k for row in csv_rows(tmp_path) for k, v in row.items() if v} - {"step", "epoch"}
    assert {"train/z_loss", "update_rms/block_00", "attn_entropy/block_01", "logits/log_z_mean"} <= logged
    names = {
        re.sub(r"^task/[^/]+/", "task/{name}/", re.sub(r"block_\d{2}", "block_{i:02d}", k)) for k in logged
    }
    missing = sorted(names - documented())
    assert not missing, f"logged but not in docs/architecture.md's metric table: {missing}"

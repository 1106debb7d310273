"""What a short run imports (issue 48 item 5, docs/performance.md "Short runs"): `datasets` costs ~0.5
CPU s to import, pyarrow ~0.06, and they are needed only to pack a corpus, so a run whose tokens are
cached imports none of them; wandb's launch models cost ~1 CPU s less imported before Lightning
(gptlab.training.early_imports), so a run with the wandb logger imports them first; the sweeper's
modules (gptlab.ablation, ~10 CPU ms) only where a sweep's view reads its record.
Checked in a fresh interpreter, which imports what train.py's path imports and prepares cached tokens of
the default source (the stdlib, listed by data.resolve on every run) and of a text file (the streaming
packer's source)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
from tests.conftest import REPO

CHILD = """
import json, sys
from types import SimpleNamespace as NS
from gptlab.training.early_imports import WANDB_LAUNCH_INPUTS, import_before_lightning
early = []  # train.py's order: wandb's launch models before Lightning, and only for a wandb logger
for wandb, mode in ((False, "offline"), (True, "disabled"), (True, "offline")):
    import_before_lightning(NS(logger=NS(wandb=wandb, mode=mode)))
    early.append([m in sys.modules for m in (WANDB_LAUNCH_INPUTS, "lightning")])
print(json.dumps(early))
import gptlab.training.app, gptlab.dashboards.cli  # what train.py's main imports
from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
for spec in json.loads(sys.argv[1]):
    prepare_tokens(DataConfig(**spec))
print(json.dumps(sorted(m for m in ("datasets", "pandas", "pyarrow", "gptlab.ablation") if m in sys.modules)))
"""


def test_a_run_on_cached_tokens_imports_no_datasets_nor_pyarrow_nor_the_sweeper(tmp_path: Path) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(400)))
    specs = [
        {"cache_dir": str(tmp_path / "cache"), "max_bytes": 50_000},  # pystdlib, the default source
        {"source": "text", "path": str(text), "doc_separator": "\n\n", "cache_dir": str(tmp_path / "cache")},
    ]
    for spec in specs:  # packed here: the child finds them cached
        prepare_tokens(DataConfig(**spec))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(specs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    *_, early, imported = proc.stdout.strip().splitlines()
    assert json.loads(imported) == []
    # csv only, wandb disabled: nothing imported; wandb on: its launch models, Lightning not yet
    assert json.loads(early) == [[False, False], [False, False], [True, False]]

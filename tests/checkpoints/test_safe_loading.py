"""Every torch.load in the project passes weights_only=True (files we did not write cannot run code)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _project_files() -> list[Path]:
    skip = {".venv", ".git", "outputs", "multirun", ".cache", "__pycache__", "node_modules"}
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in skip]
        found += [Path(root) / f for f in files if f.endswith(".py")]
    return found


# Raw unpickling allowed, once per file, for files a process of the same sweep wrote a moment before
# (as hydra-submitit-launcher does): a slot's job file (the sweep process → its worker) and the job's
# outcome (worker → sweep), in <sweep dir>/.slots, a directory only this user can enter (0700).
OWN_PICKLES = {"src/gptlab/launcher/worker.py": 1, "src/gptlab/launcher/pool.py": 1}


def test_every_torch_load_uses_weights_only() -> None:
    calls, fits, unsafe = 0, 0, []
    own: dict[str, int] = {}
    for path in _project_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "load"
                and getattr(func.value, "id", "") == "torch"
            ):
                calls += 1
                flags = {k.arg: k.value for k in node.keywords}
                value = flags.get("weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    unsafe.append(f"{path.relative_to(REPO)}:{node.lineno}")
            keywords = {k.arg: k.value for k in node.keywords}
            in_tests = path.relative_to(REPO).parts[0] == "tests"  # tests resume their own files
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "fit"
                and "ckpt_path" in keywords
                and not in_tests
            ):
                fits += 1  # Lightning's resume: its strategies' loaders get weights_only from here
                value = keywords.get("weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    unsafe.append(f"{path.relative_to(REPO)}:{node.lineno} (fit without weights_only=True)")
            if (
                isinstance(func, ast.Attribute)
                and func.attr in ("load", "loads")
                and getattr(func.value, "id", "") in ("pickle", "dill", "cloudpickle")
            ):
                rel = str(path.relative_to(REPO))
                own[rel] = own.get(rel, 0) + 1
                if own[rel] <= OWN_PICKLES.get(rel, 0):
                    continue
                unsafe.append(f"{path.relative_to(REPO)}:{node.lineno} ({func.value.id}.{func.attr})")
    assert calls > 0 and fits > 0  # the scan does see the project's calls
    assert not unsafe, f"torch.load without weights_only=True (or raw pickle) at: {unsafe}"
    assert {k: own.get(k, 0) for k in OWN_PICKLES} == OWN_PICKLES  # the allowance is still needed

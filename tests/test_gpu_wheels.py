"""`make gpu-wheels` carries exactly what the lent GPU image lacks: a clean venv of the image's
packages (those KINDS.md lists, linked from this venv: torch and lightning among them) plus the
wheels alone imports every module the GPU check runs and runs its first sections (hydra composes,
datasets prepares the corpus). A missing wheel fails here, not on the device.

The wheels are fetched for CPython 3.12 (the image) and 3.11 (this machine): the test checks the two
sets name the same packages at the same versions, then installs the 3.11 set."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from dev.gpu_wheels import IMAGE, MISSING, download  # noqa: E402

# every module the check imports, lazily ones included (sections import inside their functions)
MODULES = (
    "gptlab.bench.gpu_check.cli",
    "gptlab.bench.gpu_check.sections",
    "gptlab.bench.bare_loop",
    "gptlab.bench.lightning_loop",
    "gptlab.bench.options",
    "gptlab.data.datamodule",
    "gptlab.planning.options",
    "gptlab.planning.plan",
    "gptlab.training.app",
    "gptlab.training.trainer",
    "gptlab.training.callbacks.telemetry",
    "gptlab.training.loggers",
    "torch.profiler",
    "torch.distributed.fsdp",
)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pinned(wheels: list[Path]) -> set[tuple[str, str]]:
    return {(_norm(w.name.split("-")[0]), w.name.split("-")[1]) for w in wheels}


def _image_closure() -> set[str]:
    """The image's names plus what their versions in this venv require (this venv is newer: its
    transformers 5.25 wants kernels and huggingface-hub 2.4 wants httpx2, the image's 5.17 and 1.33
    do not). Only the image's own packages pull names in: the wheels' needs (datasets → dill,
    multiprocess, fsspec, pyarrow, ...) must be met by the image's list and the wheels alone."""
    from packaging.requirements import Requirement

    names, todo = set(), [_norm(n) for n in IMAGE]
    while todo:
        name = todo.pop()
        if name in names or name in {_norm(m) for m in MISSING}:
            continue
        names.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(_norm(r.name))
    return names


def _link_image(site: Path) -> None:
    """Link the image's distributions (as installed in this venv) into `site`, nothing else."""
    wanted = _image_closure()
    for dist in md.distributions():
        if _norm(dist.metadata["Name"]) not in wanted or not dist.files:
            continue
        tops = {f.parts[0] for f in dist.files if not f.parts[0].startswith("..") and f.parts[0] != "bin"}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (site / top).exists() and not top.endswith(".pth"):
                (site / top).symlink_to(src)


@pytest.mark.slow
def test_wheels_plus_image_packages_run_the_check(tmp_path: Path) -> None:
    w312 = download(tmp_path / "w312", "3.12")
    w311 = download(tmp_path / "w311", "3.11")
    assert _pinned(w312) == _pinned(w311) == {(_norm(n), md.version(n)) for n in MISSING}
    assert sum(w.stat().st_size for w in w312) < 8 * 2**20  # carried with the tree, under 64 MiB

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False)
    python = env_dir / "bin" / "python"
    # the image's packages in the venv's own site-packages, as the image has them; the wheels on
    # PYTHONPATH, as scripts/gpu_check.sh installs them (--target /tmp/gptlab/site-packages). dill
    # pickles a module BY VALUE unless its file is under sys.prefix or in a path holding
    # "site-packages": with the image's packages in a plain folder on PYTHONPATH, datasets'
    # fingerprint pickled pyarrow's pure-Python modules by value and failed on MonthDayNano
    # (docs/pitfalls.md)
    image = next((env_dir / "lib").glob("python3*/site-packages"))
    wheels = tmp_path / "wheels" / "site-packages"  # a name dill reads as installed (by reference)
    _link_image(image)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    subprocess.run([*pip, "--target", str(wheels), *map(str, w311)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = os.pathsep.join([str(wheels), str(ROOT / "src")])
    # one interpreter (torch, Lightning and transformers imported once, not twice): first every
    # module of MODULES, then the check's first sections as `python -m gptlab.bench.gpu_check` runs
    # them (runpy, __main__), from the repository root as on the device
    check = [
        "--dry-run",
        "--only",
        "env,sdpa,gpt2_bare_eager",
        "--budget",
        "200",
        "--out",
        str(tmp_path / "out"),
    ]
    code = (
        "import importlib, runpy, sys\n"
        "n = sys.argv.index('--')\n"
        "for m in sys.argv[1:n]: importlib.import_module(m)\n"
        "print('imported', flush=True)\n"
        "sys.argv = ['gpu_check', *sys.argv[n + 1:]]\n"
        "runpy.run_module('gptlab.bench.gpu_check', run_name='__main__', alter_sys=True)\n"
    )
    argv = [python, "-c", code, *MODULES, "--", *check]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0 and done.stdout.startswith("imported"), done.stderr[-3000:]
    table = (tmp_path / "out" / "gpu_check.md").read_text()
    assert "| env | status | ok |" in table, table + done.stderr[-3000:]
    assert "| sdpa | status | ok |" in table, table
    assert "| gpt2_bare_eager | status | ok |" in table, table
    # and wandb is not in that venv at all: the check ran without it

"""Bad inputs give one clear line (exit 2), never a traceback; a failed run never reads as finished.

One row per line of docs/bad-inputs.md. Most rows run in this process through the same code the CLI
runs (compose → validate → app.train), and compare `one_line(err)`, what the CLI prints. A few
subprocess runs check the CLI contract itself: exit code, a single stderr line, metrics.json.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException, OverrideParseException

from gptlab.errors import USER_ERRORS, one_line
from tests.training.rel_harness import REPO, TINY, train_here

QUICK = ["trainer.max_steps=2", "trainer.val_check_interval=2"]


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bad data and checkpoint files."""
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.txt").write_bytes(b"")
    (d / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (d / "latin1.txt").write_bytes(("Grüße aus Köln, ça va? " * 200).encode("latin-1"))
    (d / "short.txt").write_text("tiny corpus\n")
    (d / "notackpt.ckpt").write_text("this is not a checkpoint\n")
    (d / "range.jsonl").write_text('{"context": "1 +", "choices": [" 1", " 2"], "answer": 2}\n')
    (d / "gen.yaml").write_text(
        f"task: gen\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {d / 'range.jsonl'}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: '{{context}}'\ndoc_to_target: ' 1'\n"
    )
    import argparse

    import torch

    torch.save({"state_dict": {}, "args": argparse.Namespace(lr=1.0)}, d / "pickled.ckpt")
    torch.save({"weights": torch.zeros(3)}, d / "plain.pt")
    return d


def error_of(run_dir: Path, cache: Path, *overrides: str) -> str:
    """The line the CLI would print for these overrides (the run must fail with a user error)."""
    try:
        train_here(run_dir, cache, *QUICK, *overrides)
    except USER_ERRORS as err:
        return one_line(err)
    raise AssertionError(f"{overrides} did not fail")


# (row id, overrides, the whole error line as a regex; {bad} and {ckpt} are filled in)
ROWS = [
    (
        "n_embd_n_head",
        ["model.n_embd=30", "model.n_head=4"],
        r"error: model\.n_embd=30 is not divisible by model\.n_head=4; n_embd must be a multiple of n_head",
    ),
    (
        "unknown_tokenizer",
        ["data.tokenizer=wordpiece"],
        r"error: data\.tokenizer='wordpiece' is not accepted; choose one of byte, bpe, pretrained, tiktoken",
    ),
    (
        "bad_placement",
        ["model.norm_placement=middle"],
        r"error: model\.norm_placement='middle' is not accepted; choose one of pre, post, sandwich, deepnorm",
    ),
    ("dropout", ["model.dropout=1.5"], r"error: model\.dropout=1\.5 must be in \[0, 1\)"),
    (
        "activation_checkpointing",
        ["model.activation_checkpointing=attention"],
        r"error: model\.activation_checkpointing='attention' is not accepted; choose one of none, full, "
        r"selective",
    ),
    (
        "fsdp_activation_checkpointing",
        ["trainer=fsdp", "trainer.fsdp.activation_checkpointing=true"],
        r"error: trainer\.fsdp\.activation_checkpointing=True is no longer accepted; use "
        r"model\.activation_checkpointing=none\|full\|selective \(every strategy\)",
    ),
    (
        "async_save_without_fsdp",
        ["trainer.fsdp.async_save=true"],
        r"error: trainer\.fsdp\.async_save=true needs trainer\.strategy=fsdp, not 'auto': only FSDP2's "
        r"sharded checkpoint is written asynchronously; use trainer=fsdp or drop it",
    ),
    (
        "bad_nonfinite_policy",
        ["callbacks.on_nonfinite=ignore"],
        r"error: callbacks\.on_nonfinite='ignore' is not accepted; choose one of stop, skip",
    ),
    (
        "grad_clip_negative",
        ["optim.grad_clip=-1"],
        r"error: optim\.grad_clip=-1(\.0)? is not accepted; give a finite number >= 0 "
        r"\(0 turns clipping off\)",
    ),
    (
        "grad_clip_nan",
        ["optim.grad_clip=nan"],
        r"error: optim\.grad_clip=nan is not accepted; give a finite number >= 0 \(0 turns clipping off\)",
    ),
    (
        "grad_clip_inf",
        ["optim.grad_clip=inf"],
        r"error: optim\.grad_clip=inf is not accepted; give a finite number >= 0 \(0 turns clipping off\)",
    ),
    (
        "bad_spike_policy",
        ["callbacks.spikes.on_spike=ignore"],
        r"error: callbacks\.spikes\.on_spike='ignore' is not accepted; choose one of record, skip",
    ),
    (
        "spike_threshold_negative",
        ["callbacks.spikes.threshold=-1"],
        r"error: callbacks\.spikes\.threshold=-1(\.0)? is not accepted; give a finite number > 0 "
        r"\(in σ above the EMA\)",
    ),
    (
        "spike_row_unbounded",
        ["callbacks.spikes.max_consecutive=0"],
        r"error: callbacks\.spikes\.max_consecutive=0 is not accepted; give an integer >= 1",
    ),
    (
        "z_loss_negative",
        ["optim.z_loss=-1e-4"],
        r"error: optim\.z_loss=-0\.0001 is not accepted; give a finite number >= 0 "
        r"\(0 turns it off; PaLM used 1e-4\)",
    ),
    (
        "z_loss_nan",
        ["optim.z_loss=nan"],
        r"error: optim\.z_loss=nan is not accepted; give a finite number >= 0 "
        r"\(0 turns it off; PaLM used 1e-4\)",
    ),
    (
        "negative_lr",
        ["optim.lr=-1"],
        r"error: optim\.lr=-1(\.0)? is not accepted; give a finite number >= 0",
    ),
    (
        "max_steps_unbounded",
        ["trainer.max_steps=-1"],
        r"error: trainer\.max_steps=-1 is not accepted; give the number of optimizer steps, an integer "
        r">= 1 \(the LR schedule decays over it\)",
    ),
    (
        "bad_schedule",
        ["optim.schedule=exp"],
        r"error: optim\.schedule='exp' is not accepted; choose one of cosine, linear, constant, wsd",
    ),
    (
        "missing_path",
        ["data.source=text", "data.path={bad}/nope/*.txt"],
        r"error: data\.path='{bad}/nope/\*\.txt': no files match pattern .*; accepted: files, directories or "
        r"globs, comma-separated",
    ),
    (
        "empty_file",
        ["data.source=text", "data.path={bad}/empty.txt"],
        r"error: data\.source=text: the documents hold no text \(0 tokens; path={bad}/empty\.txt\); "
        r"accepted: non-empty UTF-8 text",
    ),
    (
        "binary_file",
        ["data.source=text", "data.path={bad}/binary.bin"],
        r"error: data\.path: {bad}/binary\.bin looks binary \(NUL byte at offset 0\); "
        r"accepted: UTF-8 text files",
    ),
    (
        "non_utf8",
        ["data.source=text", "data.path={bad}/latin1.txt"],
        r"error: data\.path: {bad}/latin1\.txt is not UTF-8 \(byte offset ~\d+: invalid .*\); "
        r"accepted: UTF-8 text files",
    ),
    (
        "short_corpus",
        ["data.source=text", "data.path={bad}/short.txt"],
        r"error: data: the train split has \d+ tokens, fewer than block_size\+1=33; .*",
    ),
    (
        "val_windows_beyond_split",
        ["data.val_windows=100000"],
        r"error: data\.val_windows=100000 but the val split has only (\d+) windows of block_size=32 tokens; "
        r"accepted: 0 \(all \1\) to \1",
    ),
    (
        "val_windows_negative",
        ["data.val_windows=-1"],
        r"error: data\.val_windows=-1 must be >= 0 \(the number of val windows to score; 0: every window "
        r"of the val split\)",
    ),
    (
        "ckpt_wrong_shape",
        ["model.n_embd=64", "model.n_head=4", "ckpt_path={ckpt}"],
        r"error: ckpt_path='{ckpt}' was trained with another model: "
        r"model\.n_embd=32 in the checkpoint but 64 now; model\.n_head=2 in the checkpoint but 4 now; "
        r"resume with the model\.\* settings .*",
    ),
    (
        "ckpt_not_a_ckpt",
        ["ckpt_path={bad}/notackpt.ckpt"],
        r"error: ckpt_path='{bad}/notackpt\.ckpt' is not a checkpoint: torch\.save files are zip archives "
        r"\(or legacy pickles\), this file starts with b'this'",
    ),
    (
        "ckpt_pickled_objects",
        ["ckpt_path={bad}/pickled.ckpt"],
        r"error: ckpt_path='{bad}/pickled\.ckpt' cannot be loaded safely: it holds Python objects that "
        r"weights_only=True refuses to load \(.*argparse\.Namespace.*\)",
    ),
    (
        "ckpt_plain_dict",
        ["ckpt_path={bad}/plain.pt"],
        r"error: ckpt_path='{bad}/plain\.pt' is not a Lightning checkpoint of train\.py .*keys found: "
        r"\['weights'\].*",
    ),
    (
        "ckpt_missing",
        ["ckpt_path={bad}/missing.ckpt"],
        r"error: ckpt_path='{bad}/missing\.ckpt' does not exist",
    ),
    (
        "tasks_unknown",
        ["callbacks.tasks.names=[hellaswag]"],
        r"error: callbacks\.tasks\.names: 'hellaswag' is neither a task file nor a built-in task; accepted: "
        r"a \.jsonl file path \(HellaSwag or \{context, choices, answer\}\) or an lm-eval \.yaml "
        r"\(docs/evaluation\.md\); built-in: val_continuation",
    ),
    (
        "tasks_duplicate",
        ["callbacks.tasks.names=[val_continuation,val_continuation]"],
        r"error: callbacks\.tasks\.names: 'val_continuation' and 'val_continuation' both log as "
        r"task/val_continuation/\*; accepted: tasks with different names \(a file's name without \.jsonl\)",
    ),
    (
        "tasks_every_zero",
        ["callbacks.tasks.every_n_steps=0"],
        r"error: callbacks\.tasks\.every_n_steps=0 is not accepted; give an integer >= 1 \(optimizer "
        r"steps\), or auto \(scales with trainer\.max_steps\), or null \(at every validation\)",
    ),
    (
        "val_check_interval_zero",
        ["trainer.val_check_interval=0"],
        r"error: trainer\.val_check_interval=0 is not accepted; give an integer >= 1 \(optimizer steps\), "
        r"or auto \(scales with trainer\.max_steps\)$",
    ),
    (
        "tasks_bad_file",
        ["callbacks.tasks.names=[{bad}/range.jsonl]"],
        r"error: task='{bad}/range\.jsonl' line 1: answer=2 is out of range; accepted: 0\.\.1",
    ),
    (  # the message names the program that refuses it (train.py's loop), not evaluate.py
        "tasks_generate_until",
        ["callbacks.tasks.names=[{bad}/gen.yaml]"],
        r"error: task='{bad}/gen\.yaml': output_type=generate_until is not scored by train\.py "
        r"\(callbacks\.tasks\); accepted: multiple_choice \(scripts/run_lm_eval\.py scores generate_until "
        r"tasks; docs/evaluation\.md\)",
    ),
    (
        "devices_too_many",
        ["trainer.devices=4096"],
        r"error: trainer\.devices=4096 but this machine has \d+ CPU cores; accepted: 1\.\.\d+",
    ),
    (
        "devices_zero",
        ["trainer.devices=0"],
        r"error: trainer\.devices=0 is not accepted; give a positive integer or auto",
    ),
    (
        "gpu_absent",
        ["trainer.accelerator=gpu"],
        r"error: trainer\.accelerator=gpu but this machine has no GPU; use trainer\.accelerator=cpu",
    ),
]


@pytest.mark.parametrize("row,overrides,expected", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_gives_one_clear_line(
    row: str, overrides: list[str], expected: str, bad: Path, trained: Path, cache: Path, tmp_path: Path
) -> None:
    if row == "gpu_absent":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")  # the row is about machines without one
    ckpt = str(trained / "checkpoints" / "last.ckpt")
    filled = [o.format(bad=bad, ckpt=ckpt) for o in overrides]
    line = error_of(tmp_path / "run", cache, *filled)
    pattern = expected.replace("{bad}", re.escape(str(bad))).replace("{ckpt}", re.escape(ckpt))
    assert re.fullmatch(pattern, line), line


@pytest.mark.parametrize(
    "override,exception,says",
    [
        ("model.n_layr=3", ConfigCompositionException, "Key 'n_layr' not in 'GPTConfig'"),
        (
            "model.n_layer=abc",
            ConfigCompositionException,
            "Value 'abc' of type 'str' could not be converted to Integer",
        ),
        ("model=gpt5", ConfigCompositionException, "Could not find 'model/gpt5'"),
        ("modle=gpt2", ConfigCompositionException, "Key 'modle' not in 'TrainConfig'"),
        ("trainer.max_steps", OverrideParseException, "missing EQUAL"),
    ],
)
def test_hydra_rejects_bad_keys_types_presets_at_compose(override: str, exception: type, says: str) -> None:
    from tests.training.rel_harness import compose_cfg

    with pytest.raises(exception) as info:
        compose_cfg(override)
    text = str(info.value) + str(info.value.__cause__ or "")
    assert says in text


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """A repo script in a bare environment, importing the gptlab this process tests: its src/ first on
    PYTHONPATH (as run_script's inherited environment does), so that under `make mutants`, whose scratch
    copy is reached only through PYTHONPATH, the script runs the mutated tree, not the installed one."""
    import gptlab

    tested = str(Path(gptlab.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [tested, os.environ.get("PYTHONPATH", "")]))
    env = {"WANDB_MODE": "disabled", "PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.mark.slow
def test_cli_truncated_checkpoint_exits_2_with_one_line_and_failed_status(
    trained: Path, cache: Path, tmp_path: Path
) -> None:
    data = (trained / "checkpoints" / "last.ckpt").read_bytes()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(data[: len(data) // 3])
    run = tmp_path / "run"
    proc = _run(
        "train.py", *TINY, *QUICK, f"data.cache_dir={cache}", f"hydra.run.dir={run}", f"ckpt_path={truncated}"
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert "is truncated or corrupted: its zip archive has no central directory" in errors[0]
    status = json.loads((run / "metrics.json").read_text())
    assert status["status"] == "failed" and status["error"] == errors[0]


@pytest.mark.slow
def test_cli_generate_on_a_non_checkpoint_exits_2_with_one_line(bad: Path) -> None:
    proc = _run("generate.py", f"ckpt_path={bad / 'notackpt.ckpt'}", timeout=180)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: ckpt_path='{bad / 'notackpt.ckpt'}' is not a checkpoint: torch.save files are zip "
        "archives (or legacy pickles), this file starts with b'this'"
    ]


@pytest.mark.slow
def test_cli_unknown_key_is_hydras_error_exit_1_and_no_run_record(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _run("train.py", "model.n_layr=3", f"hydra.run.dir={run}", timeout=180)
    assert proc.returncode == 1
    assert "Key 'n_layr' not in 'GPTConfig'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (run / "metrics.json").exists()


@pytest.mark.slow
def test_cli_sweep_of_bad_corpora_marks_every_job_failed(bad: Path, cache: Path, tmp_path: Path) -> None:
    """One process, four bad data files: each job fails alone, says why, and the sweep exits 2."""
    names = ["empty.txt", "binary.bin", "latin1.txt", "short.txt"]
    sweep = tmp_path / "sweep"
    proc = _run(
        "train.py",
        "-m",
        *TINY,
        *QUICK,
        f"data.cache_dir={cache}",
        f"hydra.sweep.dir={sweep}",
        "data.source=text",
        "data.path=" + ",".join(str(bad / n) for n in names),
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "4 job(s) of the sweep failed" in proc.stderr
    expected = ["the documents hold no text", "looks binary", "is not UTF-8", "fewer than block_size+1"]
    for job, says in enumerate(expected):
        status = json.loads((sweep / str(job) / "metrics.json").read_text())
        assert status["status"] == "failed" and says in status["error"], (job, status)

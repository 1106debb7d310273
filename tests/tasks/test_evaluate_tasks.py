"""evaluate.py task=...: the printed table, the three checkpoint forms, batch sizes and cut contexts.

Expected numbers come from plain torch.log_softmax over each context + continuation (bytes), not
from gptlab.evaluation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from gptlab.checkpoints import load_checkpoint, load_gpt
from tests.interop.helpers import load_cli

EVALUATE = load_cli("evaluate.py")
EXPORT = load_cli("scripts/export.py")
COLUMNS = ["task", "acc", "acc_norm", "items", "chance", "bpb", "cut"]
PLAIN = [
    {"context": "def add(a, b):\n   ", "choices": [" return a + b", " pass", " yield"], "answer": 0},
    {
        "context": "import os\nfor name in",
        "choices": [" sorted(os.listdir('.')):", " range(3):"],
        "answer": 1,
    },
    {"context": "class Stack:\n    def", "choices": [" push(self, item):", " pop(self):", " x"], "answer": 2},
    {"context": "print(", "choices": ["'Grüße')", "'hi')"], "answer": 0},
]
HELLASWAG = [
    {
        "activity_label": "Coding",
        "ctx_a": "A man opens a file.",
        "ctx_b": "he",
        "endings": ["types def.", "leaves.", "reads [step] it."],
        "label": "0",
    },
    {"ctx": "x" * 90 + " She closes the", "endings": ["laptop.", "door and walks off."], "label": 1},
]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def printed(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, str]]:
    """evaluate.py in-process; {task: {column: value}} from its table."""
    capsys.readouterr()
    assert EVALUATE.main(list(args)) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(k for k, line in enumerate(lines) if line.split() == COLUMNS)
    rows = [line.split() for line in lines[header + 1 :] if len(line.split()) == len(COLUMNS)]
    return {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in rows}


def direct(model: torch.nn.Module, context: str, continuation: str, block: int = 64) -> float:
    """Σ log p(continuation bytes | context), the context's trailing whitespace moved to the
    continuation and the sequence cut to its last block+1 bytes."""
    head = context.rstrip()
    ids = list((context + continuation).encode())
    n_cont = len(ids) - len(head.encode())
    ids = ids[-(block + 1) :]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids[:-1]])).double(), dim=-1)[0]
    return sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - n_cont, len(ids)))


def expected(model: torch.nn.Module, items: list[tuple[str, str, list[str], int]]) -> dict[str, float]:
    """acc, acc_norm (per byte of the choice, the delimiter not counted) and bpb of
    (context, delimiter, choices, label) items."""
    acc = acc_norm = 0
    bits = 0.0
    n_bytes = 0
    for context, delimiter, choices, label in items:
        lls = [direct(model, context, delimiter + c) for c in choices]
        norm = [ll / len(c.encode()) for ll, c in zip(lls, choices, strict=True)]
        acc += max(range(len(lls)), key=lls.__getitem__) == label
        acc_norm += max(range(len(lls)), key=norm.__getitem__) == label
        bits -= lls[label] / math.log(2)
        n_bytes += len((delimiter + choices[label]).encode()) + len(context) - len(context.rstrip())
    return {"acc": acc / len(items), "acc_norm": acc_norm / len(items), "bpb": bits / n_bytes}


@pytest.fixture(scope="module")
def forms(byte_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three checkpoint forms evaluate.py accepts, all of the same weights."""
    root = tmp_path_factory.mktemp("forms")
    model, spec = load_checkpoint(byte_ckpt)
    consolidated = root / "consolidated.pt"
    torch.save(
        {"model_config": model.cfg.to_dict(), "state_dict": model.state_dict(), "tokenizer": spec},
        consolidated,
    )
    assert EXPORT.main([f"ckpt_path={byte_ckpt}", f"out_dir={root / 'hf'}"]) == 0
    return {"lightning": byte_ckpt, "consolidated": consolidated, "hf": root / "hf"}


def test_printed_numbers_equal_plain_torch_for_every_checkpoint_form(
    capsys, forms: dict[str, Path], tmp_path: Path
) -> None:
    plain = write(tmp_path / "plain.jsonl", PLAIN)
    model = load_gpt(forms["lightning"])
    # plain choices are scored verbatim: a leading space is part of the choice, normalised with it
    want = expected(model, [(r["context"], "", r["choices"], r["answer"]) for r in PLAIN])
    tables = {form: printed(capsys, f"ckpt_path={path}", f"task={plain}") for form, path in forms.items()}
    row = tables["lightning"][str(plain)]
    assert float(row["acc"]) == pytest.approx(want["acc"], abs=5e-5)
    assert float(row["acc_norm"]) == pytest.approx(want["acc_norm"], abs=5e-5)
    assert float(row["bpb"]) == pytest.approx(want["bpb"], abs=5e-5)
    assert (row["items"], row["chance"], row["cut"]) == (
        "4",
        f"{(1 / 3 + 1 / 2 + 1 / 3 + 1 / 2) / 4:.4f}",
        "0",
    )
    assert tables["consolidated"] == tables["lightning"]
    assert tables["hf"] == tables["lightning"]


def test_hellaswag_file_batch_sizes_and_the_cut_context(capsys, byte_ckpt: Path, tmp_path: Path) -> None:
    hs = write(tmp_path / "hs.jsonl", HELLASWAG)
    plain = write(tmp_path / "plain.jsonl", PLAIN)
    runs = [
        printed(capsys, f"ckpt_path={byte_ckpt}", f"task={hs},{plain}", f"batch_size={b}") for b in (1, 3, 16)
    ]
    assert runs[1] == runs[0] and runs[2] == runs[0]
    row = runs[0][str(hs)]
    assert (row["items"], row["cut"]) == ("2", "1")  # the 90-x context does not fit block_size=64
    model = load_gpt(byte_ckpt)
    items = [
        ("Coding: A man opens a file. He", " ", ["types def.", "leaves.", "reads it."], 0),
        ("x" * 90 + " She closes the", " ", ["laptop.", "door and walks off."], 1),
    ]
    want = expected(model, items)
    assert (float(row["acc"]), float(row["acc_norm"])) == (
        pytest.approx(want["acc"]),
        pytest.approx(want["acc_norm"]),
    )
    assert float(row["bpb"]) == pytest.approx(want["bpb"], abs=5e-5)


def test_the_cut_is_said_on_stderr_and_in_the_footer(capsys, byte_ckpt: Path, tmp_path: Path, caplog) -> None:
    hs = write(tmp_path / "hs.jsonl", HELLASWAG)
    capsys.readouterr()
    with caplog.at_level("WARNING", logger="gptlab.evaluate"):
        assert EVALUATE.main([f"ckpt_path={byte_ckpt}", f"task={hs}"]) == 0
    out = capsys.readouterr().out
    assert "cut from the left to fit block_size=64" in out
    assert any("1 of 2 items had their context cut from the left" in r.getMessage() for r in caplog.records)

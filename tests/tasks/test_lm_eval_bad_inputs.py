"""docs/bad-inputs.md, "lm-eval task YAMLs and the lm-eval bridge": one stderr line, exit 2, nothing
written, through evaluate.py's and scripts/run_lm_eval.py's main (the same exit_with the CLIs use).

"lm-eval not installed" is simulated by a None entry in sys.modules, which makes `import lm_eval`
raise ModuleNotFoundError as a missing package does (the test environment has lm-eval installed).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from lm_eval.api.registry import get_model

from gptlab.evaluation.lm_eval_model import register
from gptlab.evaluation.lm_eval_tasks import OUTPUT_TYPES
from tests.interop.helpers import load_cli

EVALUATE = load_cli("evaluate.py")
LM_EVAL = load_cli("scripts/run_lm_eval.py")
ROW = {"question": "2 + 2 =", "options": ["3", "4", "5"], "gold": 1, "text": "maybe"}
MC = "task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
MC += 'output_type: multiple_choice\ndoc_to_text: "{{{{question}}}}"\ndoc_to_choice: options\n'
ACCEPTED = (
    r"accepted: an lm-eval task YAML with output_type: multiple_choice and one context per document "
    r"\(docs/evaluation\.md\)"
)
INSTALL = r"accepted: pip install 'gptlab\[eval\]' \(lm-eval>=0\.4\.13,<0\.5\)"
FILES = {
    "gen.yaml": MC.replace("multiple_choice", "generate_until") + "doc_to_target: gold\n",
    "odd.yaml": MC.replace("multiple_choice", "choices") + "doc_to_target: gold\n",
    "nodata.yaml": MC.replace("{data}", "{d}/missing.jsonl") + "doc_to_target: gold\n",
    "group.yaml": "group: two\ntask:\n  - a\n  - b\n",
    "range.yaml": MC.replace("{data}", "{d}/two.jsonl") + "doc_to_target: gold\n",
    "text.yaml": MC + "doc_to_target: text\n",
    "broken.yaml": "task: [unclosed\n",
}
# (row, task= value ({d}: the bad files' dir), the whole stderr line as a regex)
ROWS = [
    (
        "not multiple_choice",
        "{d}/gen.yaml",
        r"error: task='{d}/gen.yaml': output_type=generate_until is not scored by evaluate\.py; accepted: "
        r"multiple_choice \(scripts/run_lm_eval\.py scores generate_until tasks; docs/evaluation\.md\)",
    ),
    (
        "output_type none of lm-eval's",
        "{d}/odd.yaml",
        r"error: task='{d}/odd.yaml': output_type=choices is not an lm-eval output type; accepted by "
        r"evaluate\.py: multiple_choice \(lm-eval's types: generate_until, loglikelihood, "
        r"loglikelihood_rolling, multiple_choice\)",
    ),
    (
        "data file missing",
        "{d}/nodata.yaml",
        r"error: task='{d}/nodata.yaml': dataset_kwargs\.data_files '{d}/missing\.jsonl' does not exist "
        r"\(a relative path is read from the working directory, as lm-eval reads it\); "
        r"accepted: an existing data file",
    ),
    (
        "a group",
        "{d}/group.yaml",
        r"error: task='{d}/group.yaml' is not a single task \(keys \['group', 'task'\]\); " + ACCEPTED,
    ),
    (  # lm-eval checks the first document only, and scores a later one as wrong with a warning
        "target out of range",
        "{d}/range.yaml",
        r"error: task='{d}/range.yaml' doc 1: doc_to_target=3 is out of range; accepted: 0\.\.2",
    ),
    (
        "target not a choice",
        "{d}/text.yaml",
        r"error: task='{d}/text.yaml' doc 0: doc_to_target gave 'maybe'; accepted: an index 0\.\.2 or the "
        r"text of one choice \(one right answer per document\)",
    ),
    ("YAML missing", "{d}/none.yaml", r"error: task='{d}/none.yaml' does not exist; " + ACCEPTED),
    ("not YAML", "{d}/broken.yaml", r"error: task='{d}/broken.yaml' is not a readable lm-eval YAML \(.+\)"),
]


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad_yaml")
    (d / "data.jsonl").write_text(json.dumps(ROW) + "\n")
    (d / "two.jsonl").write_text(json.dumps(ROW) + "\n" + json.dumps({**ROW, "gold": 3}) + "\n")
    for name, text in FILES.items():
        (d / name).write_text(text.format(name=Path(name).stem, data=d / "data.jsonl", d=d))
    return d


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def one_line_exit_2(main, argv: list[str], want: str, capsys) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and re.fullmatch(want, err[0]), err


@pytest.mark.parametrize(("row", "task", "want"), ROWS, ids=[r[0] for r in ROWS])
def test_bad_yaml_is_one_line_exit_2_nothing_written(
    row: str, task: str, want: str, bad: Path, byte_ckpt: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = tree(bad), tree(byte_ckpt.parent)
    d = str(bad)
    argv = [f"ckpt_path={byte_ckpt}", f"task={task.replace('{d}', d)}"]
    one_line_exit_2(EVALUATE.main, argv, want.replace("{d}", re.escape(d)), capsys)
    assert (tree(bad), tree(byte_ckpt.parent)) == before and tree(tmp_path) == []


def test_lm_eval_not_installed(bad: Path, byte_ckpt: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    task = bad / "text.yaml"
    want = rf"error: task='{re.escape(str(task))}' needs lm-eval, which is not installed; " + INSTALL
    one_line_exit_2(EVALUATE.main, [f"ckpt_path={byte_ckpt}", f"task={task}"], want, capsys)
    want = r"error: scripts/run_lm_eval\.py needs lm-eval, which is not installed; " + INSTALL
    one_line_exit_2(LM_EVAL.main, ["--model", "gptlab", "--tasks", str(task)], want, capsys)
    assert tree(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ("ckpt_path={ckpt},temperature=0", r"--model_args temperature not accepted by --model gptlab; "
         r"accepted: ckpt_path, batch_size, device"),
        ("ckpt_path={ckpt},batch_size=auto", r"batch_size='auto' is not accepted by --model gptlab; "
         r"accepted: a positive integer"),
        ("batch_size=2", r"--model gptlab needs --model_args ckpt_path=<\.ckpt \| consolidated \| HF dir>"),
    ],
    ids=["unknown model arg", "auto batch size", "no ckpt_path"],
)  # fmt: skip
def test_bad_model_args_name_the_argument(args: str, want: str, byte_ckpt: Path) -> None:
    """As lm-eval's CLI builds the model: the registry's class from the --model_args string."""
    register()
    with pytest.raises(ValueError, match=f"^{want}$"):
        get_model("gptlab").create_from_arg_string(args.format(ckpt=byte_ckpt))


def test_output_types_are_lm_evals_and_the_bridge_names_what_it_accepts(
    bad: Path, byte_ckpt: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """The types the messages list are lm-eval's own; the bridge, which scores all four, refuses
    another in one line naming the file and what --model gptlab accepts (not evaluate.py's list)."""
    from lm_eval.api.task import ALL_OUTPUT_TYPES

    from gptlab.evaluation.lm_eval_model import GptlabLM

    assert sorted(OUTPUT_TYPES) == sorted(ALL_OUTPUT_TYPES)
    # every request type the four output types send (multiple_choice sends loglikelihood)
    for request_type in ("generate_until", "loglikelihood", "loglikelihood_rolling"):
        assert request_type in vars(GptlabLM)
    monkeypatch.chdir(tmp_path)
    task = bad / "odd.yaml"
    want = (
        rf"error: --tasks {re.escape(str(task))}: output_type=choices is not an lm-eval output type; "
        r"accepted by --model gptlab: generate_until, loglikelihood, loglikelihood_rolling, multiple_choice"
    )
    argv = ["--model", "gptlab", "--model_args", f"ckpt_path={byte_ckpt}", "--tasks", str(task)]
    one_line_exit_2(LM_EVAL.main, [*argv, "--device", "cpu"], want, capsys)
    assert tree(tmp_path) == []

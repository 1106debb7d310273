"""lm-eval-harness task YAMLs read into `Item`s by lm-eval's own task machinery.

The YAML is built by lm-eval (TaskManager: `include:`, `!function`, jinja templates, few-shot
contexts, `process_docs`), then each document's requests, as lm-eval would send them to a model,
become one Item: the shared context, the choices after `target_delimiter`, and doc_to_target's
index. So `evaluate.py task=x.yaml` scores what `lm_eval --tasks x.yaml` scores. Only
`output_type: multiple_choice` with one context per document is accepted; lm-eval's other output
types run through scripts/run_lm_eval.py, and a value that is none of lm-eval's is said to be so.
lm-eval is an optional dependency (`pip install 'gptlab[eval]'`), imported only when a YAML task is
read.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gptlab.evaluation.formats import Item, checked

YAML_SUFFIXES = (".yaml", ".yml")
INSTALL = "pip install 'gptlab[eval]' (lm-eval>=0.4.13,<0.5)"
ACCEPTED = (
    "accepted: an lm-eval task YAML with output_type: multiple_choice and one context per document "
    "(docs/evaluation.md)"
)
# lm-eval 0.4.13's output types (lm_eval.api.task.ALL_OUTPUT_TYPES): the bridge scores them all,
# evaluate.py and the training loop multiple_choice only
OUTPUT_TYPES = ("generate_until", "loglikelihood", "loglikelihood_rolling", "multiple_choice")
EVALUATE = "evaluate.py"
FEWSHOT_SEED = 1234  # lm-eval's default fewshot_random_seed (lm_eval.defaults.DEFAULT_OTHER_SEED)
GLOB = set("*?[")


def import_lm_eval(what: str) -> Any:
    """lm_eval, or a one-line error saying how to install it."""
    try:
        import lm_eval.tasks
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] != "lm_eval":
            raise  # lm-eval is there but one of its own dependencies is not: its message says which
        raise ValueError(f"{what} needs lm-eval, which is not installed; accepted: {INSTALL}") from None
    return lm_eval


def _data_files(config: dict[str, Any]) -> list[str]:
    """The local files of dataset_kwargs.data_files (a path, a list, or a split -> path(s) map)."""
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    values = files.values() if isinstance(files, dict) else [files]
    out: list[str] = []
    for v in values:
        out += [v] if isinstance(v, str) else [f for f in (v or []) if isinstance(f, str)]
    return out


def output_type_error(output_type: Any, where: str, tool: str) -> str:
    """What `tool` (which scores multiple_choice only) says of another output_type: where an lm-eval
    type goes (the bridge scores all four), or that the value is none of lm-eval's."""
    if output_type in OUTPUT_TYPES:
        return (
            f"{where}: output_type={output_type} is not scored by {tool}; accepted: multiple_choice "
            f"(scripts/run_lm_eval.py scores {output_type} tasks; docs/evaluation.md)"
        )
    return (
        f"{where}: output_type={output_type} is not an lm-eval output type; accepted by {tool}: "
        f"multiple_choice (lm-eval's types: {', '.join(OUTPUT_TYPES)})"
    )


def _check_config(config: dict[str, Any], where: str, tool: str) -> None:
    """One task, multiple_choice, its local data files present: said before lm-eval loads anything."""
    if "group" in config or "task" not in config:
        raise ValueError(f"{where} is not a single task (keys {sorted(config)[:8]}); {ACCEPTED}")
    output_type = config.get("output_type", "generate_until")  # lm-eval's TaskConfig default
    if output_type != "multiple_choice":
        raise ValueError(output_type_error(output_type, where, tool))
    for name in _data_files(config):
        if not GLOB & set(name) and not Path(name).expanduser().exists():
            raise FileNotFoundError(
                f"{where}: dataset_kwargs.data_files {name!r} does not exist (a relative path is read "
                f"from the working directory, as lm-eval reads it); accepted: an existing data file"
            )


def check_bridge_output_types(names: list[str]) -> None:
    """Each local task YAML of `--tasks` of an lm-eval output type, which the bridge scores all of;
    another value is said in one line naming the file (lm-eval's own error names neither the file
    nor the model). Files lm-eval cannot read are left to lm-eval's messages."""
    from lm_eval.tasks._yaml_loader import load_yaml

    for name in names:
        if not name.endswith(YAML_SUFFIXES) or not Path(name).is_file():
            continue
        try:
            config = load_yaml(Path(name), resolve_func=False)
        except Exception:  # noqa: BLE001  lm-eval says what is wrong with it when it reads it
            continue
        if not isinstance(config, dict) or "task" not in config:
            continue
        output_type = config.get("output_type", "generate_until")  # lm-eval's TaskConfig default
        if output_type not in OUTPUT_TYPES:
            raise ValueError(
                f"--tasks {name}: output_type={output_type} is not an lm-eval output type; accepted by "
                f"--model gptlab: {', '.join(OUTPUT_TYPES)}"
            )


def _label(target: Any, choices: list[str], where: str) -> int:
    """doc_to_target as an index into the choices: an int, or the text of one choice."""
    if isinstance(target, str) and target in choices:
        return choices.index(target)
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValueError(
            f"{where}: doc_to_target gave {target!r}; accepted: an index 0..{len(choices) - 1} or the "
            "text of one choice (one right answer per document)"
        )
    if not 0 <= target < len(choices):
        raise ValueError(f"{where}: doc_to_target={target} is out of range; accepted: 0..{len(choices) - 1}")
    return target


class DefaultNotes(logging.Filter):
    """Drops lm-eval's notes that a metric's aggregation or higher_is_better falls back to its
    default (two per metric of a metric_list, at every read): evaluate.py and the training loop
    compute their own acc, acc_norm and bpb and use neither."""

    NOTES = ("is defined, but aggregation is not", "is defined, but higher_is_better is not")

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(note in record.getMessage() for note in self.NOTES)


@contextlib.contextmanager
def without_default_notes() -> Iterator[None]:
    """lm-eval's task logger without DefaultNotes' messages, for the block."""
    logger, drop = logging.getLogger("lm_eval.api.task"), DefaultNotes()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _build(path: Path, where: str, tool: str) -> Any:
    """The lm-eval task of the YAML file, its requests built as lm-eval's evaluator builds them."""
    lm_eval = import_lm_eval(where)
    from lm_eval.tasks._yaml_loader import load_yaml  # what lm-eval's CLI reads --tasks x.yaml with

    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    try:
        config = load_yaml(path, resolve_func=False)
    except Exception as e:  # yaml, include and shape errors: lm-eval raises several kinds
        raise ValueError(f"{where} is not a readable lm-eval YAML ({' '.join(str(e).split())})") from e
    _check_config(config, where, tool)
    try:  # datasets' and lm-eval's progress bars silenced: a bad document is then one line
        with contextlib.redirect_stderr(io.StringIO()), without_default_notes():
            loaded = lm_eval.tasks.TaskManager(include_defaults=False).load(str(path))
            (task,) = loaded["tasks"].values()
            task.set_fewshot_seed(seed=FEWSHOT_SEED)
            task.build_all_requests(rank=0, world_size=1)
    except Exception as e:  # the dataset, templates, few-shot: errors from lm-eval and datasets
        raise ValueError(f"{where}: lm-eval could not build the task ({type(e).__name__}: {e})") from e
    if task.multiple_input:
        raise ValueError(f"{where} puts its choices in the context (multiple inputs); {ACCEPTED}")
    return task


def read_yaml_task(path: str | Path, tool: str = EVALUATE) -> list[Item]:
    """One Item per document of the task's evaluation split, in lm-eval's document order; `tool`
    (the program reading it) is named in the errors that depend on what it scores."""
    path = Path(path)
    where = f"task={str(path)!r}"
    if path.is_dir():
        raise ValueError(f"{where} is a directory; {ACCEPTED}")
    if not path.is_file():
        raise FileNotFoundError(f"{where} does not exist; {ACCEPTED}")
    task = _build(path, where, tool)
    delimiter = task.config.target_delimiter
    by_doc: dict[int, list[Any]] = defaultdict(list)
    for instance in task.instances:
        by_doc[instance.doc_id].append(instance)
    items = []
    for doc_id in sorted(by_doc):
        doc = by_doc[doc_id][0].doc
        at = f"{where} doc {doc_id}"
        choices = list(task.doc_to_choice(doc))
        # acc_mutual_info appends (empty context, choice) requests after the choices': not ours
        requests = sorted(by_doc[doc_id], key=lambda r: r.idx)[: len(choices)]
        context = requests[0].args[0]
        if [r.args[:2] for r in requests] != [(context, delimiter + c) for c in choices]:
            raise ValueError(f"{at}: lm-eval's requests are not (context, delimiter + choice); {ACCEPTED}")
        if len(choices) < 2:
            raise ValueError(f"{at}: doc_to_choice gave {choices!r}; accepted: 2 or more choices")
        label = _label(task.doc_to_target(doc), choices, at)
        items.append(checked(Item(context, tuple(choices), label, delimiter), at))
    return items

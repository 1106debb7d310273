"""Downstream multiple-choice tasks: read a task file, score a checkpoint's choices, report accuracy.

formats reads HellaSwag's jsonl and a plain {"context", "choices", "answer"} jsonl into `Item`s;
scoring computes each choice's log-likelihood given its context in padded batches; run ties them to
evaluate.py's `task=` argument. lm_eval_tasks reads lm-eval-harness task YAMLs through lm-eval, and
lm_eval_model is gptlab as an lm-eval model (scripts/run_lm_eval.py); both import lm-eval, an
optional dependency, only when used. docs/evaluation.md describes the metrics.
"""

from gptlab.evaluation.formats import Item, read_task
from gptlab.evaluation.scoring import TaskResult, choice_loglikelihoods, summarize

__all__ = ["Item", "TaskResult", "choice_loglikelihoods", "read_task", "summarize"]

"""gptlab as an lm-eval-harness model: `--model gptlab --model_args ckpt_path=...`.

`register()` adds the model to lm-eval's registry (lm-eval 0.4.13 finds no models through package
entry points, so scripts/run_lm_eval.py registers it before handing its arguments to lm-eval's CLI).
The three request types:
  * loglikelihood: split, encoded, cut and batched by gptlab.evaluation.scoring, the code
    evaluate.py's task= runs, so both give the same numbers; is_greedy as lm-eval defines it.
  * loglikelihood_rolling: the document's tokens in lm-eval's rolling windows of block_size
    (lm_eval.utils.get_rolling_token_windows, each token predicted once, the first after the EOS
    token), summed.
  * generate_until: gptlab.generation.sample_tokens (greedy unless do_sample), stopping at EOS, at
    max_gen_toks or once an `until` string appears, the text cut before it.
This module imports lm-eval at the top: import it only where lm-eval is wanted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import torch
from lm_eval.api.model import LM
from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm import tqdm

from gptlab.checkpoints import load_model
from gptlab.evaluation.scoring import encode_request, fit_block, score_requests
from gptlab.generation import sample_tokens

NAME = "gptlab"
DEFAULT_BATCH = 16
MAX_GEN_TOKS = 256  # lm-eval's default when a task sets none (HFLM.max_gen_toks)
SAMPLING_KEYS = ("temperature", "top_k", "top_p")
log = logging.getLogger(__name__)


def _batch_size(value: int | str) -> int:
    """A positive int (lm-eval passes --batch_size as given: 8, "8", or "auto")."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"batch_size={value!r} is not accepted by --model gptlab; accepted: a positive integer"
        )
    return value


def _device(name: str | None) -> torch.device:
    """The device asked for; lm-eval's CLI asks for cuda:0 by default, which on a machine without a
    GPU means the CPU (as lm-eval's HF model does)."""
    if name is None or (name.startswith("cuda") and not torch.cuda.is_available()):
        if name is not None:
            log.warning("device=%s but no GPU is available: running on the CPU", name)
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class GptlabLM(LM):
    """A gptlab checkpoint (Lightning .ckpt, consolidated file or exported HF dir) for lm-eval."""

    def __init__(
        self,
        ckpt_path: str | None = None,
        batch_size: int | str = DEFAULT_BATCH,
        device: str | None = None,
        max_batch_size: int | None = None,  # lm-eval's CLI passes it; there is no auto batch size here
        **unknown: Any,
    ) -> None:
        super().__init__()
        if unknown:
            raise ValueError(
                f"--model_args {', '.join(sorted(unknown))} not accepted by --model gptlab; accepted: "
                "ckpt_path, batch_size, device"
            )
        if not ckpt_path:
            raise ValueError("--model gptlab needs --model_args ckpt_path=<.ckpt | consolidated | HF dir>")
        self.batch_size = _batch_size(batch_size)
        self._device = _device(device)
        self.model, self.tokenizer = load_model(str(ckpt_path), str(self._device))
        self.model.eval()
        self.block = int(self.model.cfg.block_size)
        self.eos = self.tokenizer.eos_id

    def _prefix(self, what: str) -> int:
        """The token a request with no context is conditioned on: the tokenizer's EOS, as lm-eval's HF
        model uses its EOS when the tokenizer has no BOS (gptlab's tokenizers have none)."""
        if self.eos is None:
            raise ValueError(f"{what} needs an EOS token to start from; this checkpoint's tokenizer has none")
        return int(self.eos)

    @staticmethod
    def where(request: Any) -> str:
        """A request located as evaluate.py locates a choice: its task, document and choice."""
        task = getattr(request, "task_name", None)
        doc = getattr(request, "doc_id", None)
        return f"task {task!r} doc {doc} choice {getattr(request, 'idx', 0)}"

    def _encode(self, request: Any) -> tuple[list[int], int]:
        """(tokens, n_cont) as lm-eval's TemplateLM.loglikelihood makes them (an empty context is
        the prefix token, or the continuation's first token when that is the prefix), by the code
        evaluate.py's task= runs."""
        context, continuation = request.args[:2]
        return encode_request(self.tokenizer, context, continuation, f"{self.where(request)}: ")

    def _score(self, encoded: list[tuple[list[int], int]], what: str) -> list[tuple[float, bool]]:
        """(log-likelihood, is_greedy) per request, each cut from the left to block_size + 1 tokens."""
        fitted = []
        cut = 0
        for k, (tokens, n_cont) in enumerate(encoded):
            tokens, was_cut = fit_block(tokens, n_cont, self.block, f"{what} request {k}")
            fitted.append((tokens, n_cont))
            cut += was_cut
        if cut:
            log.warning("%d %s requests had their context cut from the left to fit block_size", cut, what)
        return score_requests(self.model, fitted, self.batch_size, self._device)

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """(log p(continuation | context), whether greedy decoding gives the continuation) each."""
        out = self._score([self._encode(r) for r in requests], "loglikelihood")
        for request, result in zip(requests, out, strict=True):
            self.cache_hook.add_partial("loglikelihood", request.args, result)
        return out

    def rolling_windows(self, text: str) -> list[tuple[list[int], int]]:
        """(tokens, n_scored) per window: lm-eval's disjoint rolling windows of block_size tokens."""
        tokens = [int(t) for t in self.tokenizer.encode(text)]
        prefix = self._prefix("loglikelihood_rolling") if tokens else 0
        windows = get_rolling_token_windows(tokens, prefix, self.block, context_len=1)
        return [(ctx + pred, len(pred)) for ctx, pred in map(make_disjoint_window, windows)]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """log p(document), every token predicted once, with as much context as block_size allows."""
        per_doc = [self.rolling_windows(r.args[0]) for r in requests]
        scores = iter(self._score([w for doc in per_doc for w in doc], "loglikelihood_rolling"))
        out = [sum(next(scores)[0] for _ in doc) for doc in per_doc]
        for request, result in zip(requests, out, strict=True):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, result)
        return out

    def _tokens(self, prompt: list[int], max_new: int, kwargs: dict[str, Any]) -> Iterator[int]:
        """New tokens from gptlab.generation: greedy, or sampled with the task's settings."""
        temperature = float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample") else 0.0
        return sample_tokens(
            self.model, prompt, max_new, temperature, kwargs.get("top_k"), kwargs.get("top_p")
        )

    def generate(self, context: str, gen_kwargs: dict[str, Any]) -> str:
        """One generate_until request: the text until EOS, max_gen_toks or an `until` string."""
        kwargs = dict(normalize_gen_kwargs(gen_kwargs, MAX_GEN_TOKS))
        until = handle_stop_sequences(kwargs.pop("until", None), eos=None)
        max_new = int(kwargs.pop("max_gen_toks"))
        unknown = set(kwargs) - {"do_sample", *SAMPLING_KEYS}
        if unknown:
            raise ValueError(
                f"generation_kwargs {sorted(unknown)} not accepted by --model gptlab; accepted: until, "
                f"max_gen_toks, do_sample, {', '.join(SAMPLING_KEYS)}"
            )
        if not 0 < max_new < self.block:
            raise ValueError(
                f"max_gen_toks={max_new} is not accepted; accepted: 1..{self.block - 1} "
                f"(block_size={self.block}, as lm-eval keeps room for the context)"
            )
        prompt = [int(t) for t in self.tokenizer.encode(context)][-(self.block - max_new) :]
        prompt = prompt or [self._prefix("generation from an empty context")]
        new: list[int] = []
        for token in self._tokens(prompt, max_new, kwargs):
            if token == self.eos:
                break
            new.append(token)
            if any(stop and stop in self.tokenizer.decode(new) for stop in until):
                break
        return postprocess_generated_text(self.tokenizer.decode(new), until, None)

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Each request's generated text, one request at a time."""
        out = []
        for request in tqdm(requests, desc="generate_until", disable=disable_tqdm or None, leave=False):
            out.append(self.generate(*request.args[:2]))
            self.cache_hook.add_partial("generate_until", request.args, out[-1])
        return out


def register() -> None:
    """Make `--model gptlab` known to lm-eval (idempotent)."""
    import lm_eval.models  # noqa: F401  lm-eval's own models first: get_model loads them only when
    from lm_eval.api.registry import model_registry  # its registry is empty

    if NAME not in model_registry:
        model_registry.register(NAME, target=GptlabLM)

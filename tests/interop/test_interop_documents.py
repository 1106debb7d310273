"""A data.document_mask=true run's checkpoint loads masked: evaluate.py reports the run's own val/loss,
and the consolidated (FSDP) file carries the mask too.

The oracle is the run's logged val/loss at its last step (metrics.json's final_val_loss), as in
test_interop_init_from.py; the run starts from an exported, perturbed model at a negligible learning
rate so masking changes the loss by far more than the tolerance (checked here, not assumed).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptlab.checkpoints import consolidate, load_checkpoint_file, load_gpt
from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
from gptlab.data.tokenizers.byte import BYTE_EOS
from gptlab.export import export_hf, gpt_from_hf
from gptlab.model import GPT
from gptlab.model.masks import Documents
from tests.interop.helpers import TINY, perturbed_gpt
from tests.interop.test_interop_init_from import BATCH, EVALUATE, VAL_WINDOWS, train


def corpus(path: Path) -> list[str]:
    """Short documents (~40 bytes) split at blank lines: about one end-of-text id a val window (the
    stdlib corpus has one in 5,000 val tokens, where the mask would change nothing)."""
    rng = random.Random(0)
    words = "the of a model loss token mask window attention layer head key query value".split()
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 10))) for _ in range(600)]
    path.write_text("\n\n".join(docs))
    return ["data.source=text", f"data.path={path}", "data.doc_separator='\\n\\n'"]


@pytest.fixture(scope="module")
def documents_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """(run dir, data overrides) of a two-step run with data.document_mask=true (train.py's config and
    app, in this process: tests/interop/test_interop_init_from.py's `train`)."""
    root = tmp_path_factory.mktemp("documents-run")
    data = [*corpus(root / "docs.txt"), f"data.cache_dir={root / 'cache'}"]
    hf = Path(export_hf(perturbed_gpt({"tie_embeddings": False}, seed=11, scale=0.1), root / "hf"))
    result = train(root / "run", root / "cache", f"model.init_from={hf}", "data.document_mask=true", *data)
    assert result["status"] == "finished", result
    return root / "run", data


def val_loss(model: GPT, data: list[str]) -> float:
    """Mean loss of `model` on every val window (block_size+1 tokens), read from the token file."""
    fields = dict(arg.removeprefix("data.").split("=", 1) for arg in data)
    fields["doc_separator"] = "\n\n"
    packed = prepare_tokens(DataConfig(**fields))
    bs = model.cfg.block_size
    tokens = torch.from_numpy(np.asarray(packed.tokens("val"), dtype=np.int64))
    assert (tokens == BYTE_EOS).sum() > len(tokens) / bs  # more than one document boundary a window
    windows = torch.stack([tokens[k * bs : (k + 1) * bs + 1] for k in range((len(tokens) - 1) // bs)])
    with torch.no_grad():
        logits = model.eval()(windows[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


def evaluate_loss(capsys: pytest.CaptureFixture[str], ckpt: Path, data: list[str]) -> float:
    capsys.readouterr()
    assert EVALUATE.main([f"ckpt_path={ckpt}", *data, f"batch_size={BATCH}", VAL_WINDOWS]) == 0
    return float(capsys.readouterr().out.split("\nloss")[1].split()[0])


@pytest.mark.slow
def test_evaluate_on_a_document_masked_checkpoint_gives_the_runs_val_loss(
    documents_run: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    run_dir, data = documents_run
    final = json.loads((run_dir / "metrics.json").read_text())["final_val_loss"]
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    model = load_gpt(ckpt)
    assert model.documents == Documents(eot=BYTE_EOS, positions="restart")
    unmasked = GPT(model.cfg)
    unmasked.load_state_dict(model.state_dict())
    assert val_loss(model, data) == pytest.approx(final, abs=1e-5)
    assert abs(val_loss(unmasked, data) - final) > 1e-3  # the mask matters at this tolerance's scale
    assert evaluate_loss(capsys, ckpt, data) == pytest.approx(final, abs=1e-5)


def test_a_consolidated_fsdp_directory_keeps_the_documents(tmp_path: Path) -> None:
    """An FSDP last.ckpt/ (DCP shards + Lightning's meta.pt, written here in one process as
    ModelParallelStrategy lays it out) consolidates into a file whose model masks documents."""
    import torch.distributed.checkpoint as dcp

    model = perturbed_gpt()
    record = {"eot": BYTE_EOS, "positions": "continue"}
    directory = tmp_path / "last.ckpt"
    dcp.save(
        {"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}, checkpoint_id=directory
    )
    hparams = {"model": model.cfg.to_dict(), "tokenizer": None, "documents": record}
    torch.save({"hyper_parameters": hparams, "global_step": 2}, directory / "meta.pt")
    out = consolidate(directory, tmp_path / "model.pt")
    assert load_checkpoint_file(out)["documents"] == record
    loaded = load_gpt(out)
    assert loaded.documents == Documents(**record)
    idx = torch.randint(0, TINY["vocab_size"], (2, 64), generator=torch.Generator().manual_seed(1))
    idx[:, 20] = BYTE_EOS
    model.documents = Documents(**record)
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx), model(idx), rtol=0, atol=0)


def test_a_malformed_documents_record_is_named(tmp_path: Path) -> None:
    model = perturbed_gpt()
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    hparams = {"model": model.cfg.to_dict(), "documents": {"eot": "255"}}
    torch.save({"state_dict": state, "hyper_parameters": hparams}, tmp_path / "x.ckpt")
    with pytest.raises(ValueError, match=r"hyper_parameters\['documents'\]=\{'eot': '255'\} is not"):
        load_gpt(tmp_path / "x.ckpt")


def test_gpt_from_hf_has_no_documents(tmp_path: Path) -> None:
    """A HF directory never records a document mask (the export refuses one): loaded unmasked."""
    hf = export_hf(perturbed_gpt(), tmp_path / "hf")
    assert gpt_from_hf(hf).documents is None

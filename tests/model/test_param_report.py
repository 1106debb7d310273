"""The parameter report's table and its command-line override parsing."""

from __future__ import annotations

import re

import pytest

from gptlab.analysis import params
from gptlab.model import GPTConfig


def test_format_report_is_an_aligned_table_with_separators_and_percentages():
    cfg = GPTConfig(vocab_size=128_000, n_embd=2048, n_head=16, n_layer=19, ffn_multiple_of=256)
    text = params.format_report(params.param_report(cfg))
    assert "262,144,000" in text and "1,500,592,128" in text
    saves = next(line for line in text.splitlines() if line.startswith("tying saves"))
    assert "17.5%" in saves
    # the counts column is right-aligned under its header
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("component"))
    col = lines[head].index("parameters") + len("parameters")
    body = [line for line in lines[head + 1 :] if not line.startswith("---")]
    assert len(body) == 11
    for line in body:
        assert line[col - 1].isdigit() and line[col] == " ", line
        assert re.search(r"\d{1,3}(,\d{3})*$", line[:col].split()[-1]), line


def test_fallback_overrides_parse_hydra_literals(tmp_path):
    cfg = params._config_from_overrides(
        tmp_path,
        ["model.n_layer=3", "model.init_std=1/sqrt(d)", "model.ffn_hidden=null", "model.bias=true"],
    )
    assert (cfg.n_layer, cfg.init_std, cfg.ffn_hidden, cfg.bias) == (3, "1/sqrt(d)", None, True)


def test_fallback_reads_a_flat_preset_and_refuses_other_groups(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "wide.yaml").write_text("defaults: []\nn_embd: 256\nn_head: 8\n")
    cfg = params._config_from_overrides(tmp_path, ["model=wide", "model.n_layer=2"])
    assert (cfg.n_embd, cfg.n_head, cfg.n_layer) == (256, 8, 2)
    with pytest.raises(FileNotFoundError, match="nope"):
        params._config_from_overrides(tmp_path, ["model=nope"])
    with pytest.raises(ValueError, match="optim.lr"):
        params._config_from_overrides(tmp_path, ["optim.lr=1"])
    with pytest.raises(ValueError, match="n_head"):
        params._config_from_overrides(tmp_path, ["model.n_head=3"])


def test_cli_counts_grouped_query_attention(capsys):
    """The documented override path: Llama 2 7B's shape with Llama 3's 8 key/value heads; per
    block q, out 4096² and k, v 4096·1024 (32 heads of 128, 8 of them for k and v)."""
    assert params.main(["model=llama_7b", "model/attention=gqa", "model.n_kv_head=8"]) == 0
    out = capsys.readouterr().out
    assert "n_head=32 n_kv_head=8 n_embd=4096" in out
    row = next(line for line in out.splitlines() if line.startswith("attention"))
    assert f"{32 * (2 * 4096**2 + 2 * 4096 * 1024):,}" in row


def test_cli_refuses_n_kv_head_that_does_not_divide_n_head(capsys):
    assert params.main(["model.n_kv_head=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.n_kv_head=3 is not accepted with model.n_head=4" in err

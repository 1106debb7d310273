"""qk_norm and z_loss as config axes: the Hydra group, the parameter report, FLOPs, HF export."""

from __future__ import annotations

import pytest

from gptlab.analysis.params import format_report, param_report
from gptlab.compose import compose_config
from gptlab.export.targets import check_exportable
from gptlab.model import GPT, GPTConfig


def test_hydra_group_and_field() -> None:
    assert compose_config([]).model.qk_norm is False
    assert compose_config(["model/qk_norm=on"]).model.qk_norm is True
    assert compose_config(["model=gpt2", "model/qk_norm=on"]).model.qk_norm is True
    assert compose_config(["model.qk_norm=true"]).model.qk_norm is True
    assert compose_config(["optim.z_loss=1e-4"]).optim.z_loss == 1e-4


def test_parameter_report_and_flops_count_the_qk_gains() -> None:
    plain, qk = (
        GPTConfig(n_layer=3, n_embd=64, n_head=4),
        GPTConfig(n_layer=3, n_embd=64, n_head=4, qk_norm=True),
    )
    extra = 3 * 2 * (64 // 4)  # one gain of d_head for q and one for k, per block
    a, b = param_report(plain), param_report(qk)
    assert b.counts["attention"] - a.counts["attention"] == extra
    assert b.total - a.total == extra
    assert "qk_norm=True" in format_report(b)
    assert GPT(qk).flops_per_token() - GPT(plain).flops_per_token() == 6 * extra


def test_hf_export_refuses_qk_norm_in_one_line() -> None:
    assert check_exportable(GPTConfig()) == "llama"
    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(qk_norm=True))
    assert str(err.value).startswith("model.qk_norm=True cannot be expressed by LlamaForCausalLM")
    assert "\n" not in str(err.value)

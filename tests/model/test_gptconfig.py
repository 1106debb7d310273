"""GPTConfig refuses bad values at construction, naming field, value and what is accepted."""

from __future__ import annotations

import pytest

from gptlab.model import GPTConfig

NAMES = [
    # (field, bad value, every accepted value that the message must list)
    ("norm", "batchnorm", ["rmsnorm", "layernorm"]),
    ("ffn", "swish", ["swiglu", "geglu", "reglu", "gelu", "gelu_tanh", "relu"]),
    ("norm_placement", "middle", ["pre", "post", "sandwich", "deepnorm"]),
    ("pos_emb", "alibi", ["rope", "learned"]),
    ("depth_scaled_init", "sqrt", ["none", "global", "per_layer"]),
]


@pytest.mark.parametrize("field,value,accepted", NAMES, ids=[n[0] for n in NAMES])
def test_unknown_name(field, value, accepted):
    with pytest.raises(ValueError) as err:
        GPTConfig(**{field: value})
    msg = str(err.value)
    assert f"model.{field}" in msg and repr(value) in msg, msg
    for name in accepted:
        assert name in msg, f"{name!r} missing from: {msg}"


SIZES = ["vocab_size", "block_size", "n_layer", "n_head", "n_embd", "ffn_multiple_of", "ffn_hidden"]


@pytest.mark.parametrize("field", SIZES)
@pytest.mark.parametrize("value", [0, -4, 2.5, True])
def test_non_positive_or_non_integer_sizes(field, value):
    with pytest.raises(ValueError) as err:
        GPTConfig(**{field: value})
    msg = str(err.value)
    assert f"model.{field}={value!r}" in msg and "positive integer" in msg, msg


def test_n_embd_not_divisible_by_n_head():
    with pytest.raises(ValueError) as err:
        GPTConfig(n_embd=100, n_head=3)
    msg = str(err.value)
    assert "model.n_embd=100" in msg and "model.n_head=3" in msg and "multiple of n_head" in msg


def test_odd_head_dim_with_rope():
    with pytest.raises(ValueError) as err:
        GPTConfig(n_embd=12, n_head=4, pos_emb="rope")  # head_dim 3
    msg = str(err.value)
    assert "model.pos_emb='rope'" in msg and "even head dimension" in msg and "=3" in msg, msg
    assert "pos_emb=learned" in msg  # the way out
    assert GPTConfig(n_embd=12, n_head=4, pos_emb="learned").head_dim == 3


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5, float("nan"), "0.1", True])
def test_dropout_outside_unit_interval(value):
    with pytest.raises(ValueError) as err:
        GPTConfig(dropout=value)
    msg = str(err.value)
    assert f"model.dropout={value!r}" in msg and "[0, 1)" in msg, msg


@pytest.mark.parametrize(
    "value", [0, -0.02, float("nan"), float("inf"), "0.02", "1/d", "1/sqrt(n)", None, True]
)
def test_bad_init_std(value):
    with pytest.raises(ValueError) as err:
        GPTConfig(init_std=value)
    msg = str(err.value)
    assert f"model.init_std={value!r}" in msg, msg
    assert "positive" in msg and "'1/sqrt(d)'" in msg, msg  # both accepted forms named


@pytest.mark.parametrize("field", ["norm_eps", "rope_theta"])
@pytest.mark.parametrize("value", [0, -1.0, float("nan")])
def test_non_positive_floats(field, value):
    with pytest.raises(ValueError) as err:
        GPTConfig(**{field: value})
    msg = str(err.value)
    assert f"model.{field}={value!r}" in msg and "positive" in msg, msg


def test_deepnorm_refuses_a_second_depth_scaling():
    with pytest.raises(ValueError) as err:
        GPTConfig(norm_placement="deepnorm", depth_scaled_init="global")
    msg = str(err.value)
    assert "model.depth_scaled_init='global'" in msg and "deepnorm" in msg
    assert "depth_scaled_init=none" in msg


def test_from_dict_names_unknown_keys():
    with pytest.raises(ValueError) as err:
        GPTConfig.from_dict({"n_layers": 4})
    assert "n_layers" in str(err.value) and "n_layer" in str(err.value)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"init_std": "1/sqrt(d)"},
        {"init_std": 0.01, "dropout": 0.0},
        {"dropout": 0.1, "ffn_hidden": 100},
        {"norm_placement": "deepnorm", "depth_scaled_init": "none"},
        {"n_embd": 96, "n_head": 3, "pos_emb": "rope"},  # head_dim 32
    ],
)
def test_valid_configs_are_accepted(kw):
    GPTConfig(**kw)

"""Hugging Face interop, both ways: a pre-norm GPT as LlamaForCausalLM or GPT2LMHeadModel, a
`model/ffn=moe` one as OlmoeForCausalLM, MixtralForCausalLM or Qwen3MoeForCausalLM, and back.

targets, moe_targets (which architecture) → llama, gpt2, olmoe, mixtral, qwen3_moe (names and
config.json of each; moe_rules: what the MoE ones share) → writer (export_hf),
reader (load_hf), init_from (model.init_from checks). Nothing here imports gptlab.checkpoints.
"""

from gptlab.export.init_from import init_config, init_from_hf
from gptlab.export.reader import gpt_from_hf, load_hf, load_hf_config
from gptlab.export.targets import check_exportable
from gptlab.export.writer import export_hf

__all__ = [
    "check_exportable",
    "export_hf",
    "gpt_from_hf",
    "init_config",
    "init_from_hf",
    "load_hf",
    "load_hf_config",
]

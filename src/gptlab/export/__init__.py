"""Hugging Face interop, both ways: a pre-norm GPT as LlamaForCausalLM or GPT2LMHeadModel, and back.

targets (which architecture) → llama, gpt2 (names and config.json of each) → writer (export_hf),
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

"""Export to and import from Hugging Face transformers (LlamaForCausalLM, GPT2LMHeadModel)."""

from gptlab.export.hf import (
    check_exportable,
    export_hf,
    gpt_from_hf,
    init_config,
    init_from_hf,
    load_gpt_from_lightning_ckpt,
    load_hf,
    load_hf_config,
)

__all__ = [
    "check_exportable",
    "export_hf",
    "gpt_from_hf",
    "init_config",
    "init_from_hf",
    "load_gpt_from_lightning_ckpt",
    "load_hf",
    "load_hf_config",
]

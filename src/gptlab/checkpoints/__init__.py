"""Checkpoints: one loader per format the project writes, and the safe reading they share.

safe_load (torch.load weights_only, one-line errors) → state (checked against the config) →
lightning, consolidated, hf_dir (one per format) → load (picks the format); distributed turns an
FSDP directory into the consolidated file. Imports run one way: checkpoints → export → data, model.
"""

from gptlab.checkpoints.distributed import consolidate
from gptlab.checkpoints.hf_dir import is_hf_dir
from gptlab.checkpoints.load import load_checkpoint, load_gpt, load_model, model_state_from_checkpoint
from gptlab.checkpoints.safe_load import CheckpointError, load_checkpoint_file

__all__ = [
    "CheckpointError",
    "consolidate",
    "is_hf_dir",
    "load_checkpoint",
    "load_checkpoint_file",
    "load_gpt",
    "load_model",
    "model_state_from_checkpoint",
]

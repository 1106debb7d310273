"""The configurable GPT: config, block, model and init recipe."""

from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

__all__ = ["GPT", "GPTConfig"]

"""gptlab: train and ablate GPT-style transformers."""

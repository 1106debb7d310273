"""gptlab's Hydra sweeper for ablations (`hydra/sweeper=ablation`); the logic is in gptlab.ablation."""

"""The wandb workspace a sweep or run is read in: what its config logs, and the view built on it."""

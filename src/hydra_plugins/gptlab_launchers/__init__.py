"""gptlab's Hydra launchers: `slots` (side by side on one node) and submitit arrays that resume."""

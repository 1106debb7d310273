"""Run the jobs of a sweep side by side on one node (the `slots` Hydra launcher's engine)."""

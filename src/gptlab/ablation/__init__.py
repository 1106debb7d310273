"""Ablation sweeps: the grid (grid.py), the sweep directory's state (sweep_dir.py), running the grid
in it (launch.py, called by the `hydra/sweeper: ablation` plugin) and its end (finish.py)."""

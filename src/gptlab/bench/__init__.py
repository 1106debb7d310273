"""Benchmarks whose logic is importable; scripts/ holds their thin entry points."""

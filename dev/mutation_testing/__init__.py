"""Mutation testing of the suite: does `make test` catch deliberate breakages of src/gptlab that
matter? `scripts/mutation_check.py` runs it; nothing here is imported by training."""

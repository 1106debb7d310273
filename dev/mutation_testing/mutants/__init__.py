"""The deliberate breakages `make mutants` tries, one module per area of src/gptlab/ (a mutant lives
with the code it breaks; the comments above each block say which issue or round added it)."""

from __future__ import annotations

from dev.mutation_testing.mutant import BASELINE, Mutant
from dev.mutation_testing.mutants import (
    analysis,
    callbacks,
    data,
    evaluation,
    launch,
    model,
    planning,
    training,
)

MUTANTS: list[Mutant] = [
    *model.MUTANTS,
    *callbacks.MUTANTS,
    *training.MUTANTS,
    *data.MUTANTS,
    *analysis.MUTANTS,
    *planning.MUTANTS,
    *evaluation.MUTANTS,
    *launch.MUTANTS,
]

__all__ = ["BASELINE", "MUTANTS", "Mutant"]

"""Batch label inference's settings; the presets in the spec (`attacks.split.bli`) say where each number comes
from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import AttackSettings, integer, number, option

__all__ = ["BatchLabelSettings"]


@dataclass(frozen=True, kw_only=True)
class BatchLabelSettings(AttackSettings):
    """Which rounds it attacks and how the gradient inversion model is fitted to each."""
    rounds: int = option(4, "training rounds attacked, the last ones of training (each one batch, inverted on its "
                         "own).", integer(low=1, high=100_000))
    iterations: int = option(400, "Adam steps fitting the dummy labels (and the other parties' dummy scores) to one "
                             "round's batch-level gradient.", integer(low=1, high=1_000_000))
    inversion_lr: float = option(0.05, "Adam learning rate of the dummies.", number(low=0, low_open=True, high=100))
    other_scores: bool = option(True, "fit dummy class scores of the parties it does not see beside the dummy labels "
                                "(--no-other-scores: it takes its own scores as the whole of the label party's input).",
                                flag="--other-scores/--no-other-scores")

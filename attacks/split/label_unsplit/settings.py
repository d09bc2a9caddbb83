"""UnSplit's label inference settings; the presets in the spec (`attacks.split.label_unsplit`) say where each
number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import EngineSettings, integer, number, option

__all__ = ["UnsplitLabelSettings"]


@dataclass(frozen=True, kw_only=True)
class UnsplitLabelSettings(EngineSettings):
    """The clone of the label party's output layer, fitted round by round to the gradients received."""
    iterations: int = option(20, "clone steps per training round (Adam on the gradient match).",
                             integer(low=0, high=10_000_000))
    clone_lr: float = option(1e-2, "Adam learning rate of the clone.", number(low=0, low_open=True, high=10))
    window: int = option(4, "rounds the clone is fitted on at each round: this one and the ones before it (1: this "
                         "round only).", integer(low=1, high=100_000))
    labelled: int = option(1, "samples of each class whose labels the attacker knows, to name the clone's "
                           "classes (the gradient alone fixes them up to a permutation).",
                           integer(low=1, high=100_000))

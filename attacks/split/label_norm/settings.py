"""The norm-scoring attack's settings; the presets in the spec (`attacks.split.label_norm`) say where each
number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import AttackSettings, integer, option

__all__ = ["NormSettings"]


@dataclass(frozen=True, kw_only=True)
class NormSettings(AttackSettings):
    """Which rounds of training the attack scores."""
    iterations: int = option(0, "training rounds scored, the last ones of training (0: every round, as Li et al. "
                             "average the leak AUC over training).", integer(low=0, high=10_000_000))

"""The direct label inference attack's settings; the presets in the spec (`attacks.split.label_direct`) say
where each number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import AttackSettings, integer, option

__all__ = ["DirectSettings"]


@dataclass(frozen=True, kw_only=True)
class DirectSettings(AttackSettings):
    """Which rounds of training the attack reads."""
    iterations: int = option(0, "training rounds read, the last ones of training (0: every round).",
                             integer(low=0, high=10_000_000))

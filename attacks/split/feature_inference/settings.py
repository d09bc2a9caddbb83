"""The feature inference attacks' settings; the presets in the specs (`attacks.split.feature_inference`) say where
each number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import AttackSettings, integer, number, option

__all__ = ["FeatureSettings", "EsaSettings", "GrnSettings"]


@dataclass(frozen=True, kw_only=True)
class FeatureSettings(AttackSettings):
    """What the attacking label party holds of the features, and which predictions it attacks."""
    held: int = option(1, "feature parties whose features the attacker holds: the first HELD of --parties (its own "
                       "features); it infers the others'.", integer(low=1, high=63))
    predictions: int = option(0, "prediction samples attacked, the first of the test split (0: all of them).",
                              integer(low=0, high=1_000_000))


@dataclass(frozen=True, kw_only=True)
class EsaSettings(FeatureSettings):
    """ESA solves in closed form."""
    iterations: int = option(1, "solves of the equations (closed form: one).", integer(low=1, high=1))


@dataclass(frozen=True, kw_only=True)
class GrnSettings(FeatureSettings):
    """The generator and its training."""
    iterations: int = option(2000, "Adam steps training the generator on every prediction sample at once.",
                             integer(low=1, high=10_000_000))
    generator_lr: float = option(1e-3, "Adam learning rate of the generator.", number(low=0, low_open=True, high=10))

"""The settings every gradient-replacement backdoor has; each attack's presets say where its numbers come from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.settings import AttackSettings
from vfl.options import integer, number, option

__all__ = ["BackdoorSettings", "DIGITS_BACKDOOR_VICTIM"]


@dataclass(frozen=True, kw_only=True)
class BackdoorSettings(AttackSettings):
    """Which label it plants, what it knows, how many samples it poisons and how."""
    iterations: int = option(0, "training rounds in which it poisons, the first ones of training (0: every round).",
                             integer(low=0, high=10_000_000))
    target: int = option(0, "the target class the trigger should call up (a class of the task).",
                         integer(low=0, high=999))
    known: int = option(10, "training samples of the target class whose labels the poisoning party knows (its "
                        "auxiliary knowledge).", integer(low=1, high=100_000))
    poisoned: int = option(100, "training samples it stamps the trigger on and whose gradients it replaces, drawn "
                           "at random from the samples it does not know.", integer(low=1, high=1_000_000))
    trigger_size: int = option(4, "the trigger: a square patch of this side in pixels (images), or this many last "
                               "features (tabular).", integer(low=1, high=1000))
    amplify: float = option(1.0, "the replaced gradient is the target sample's times this.",
                            number(low=0, low_open=True, high=1e6))
    same_round: bool = option(False, "take a target sample's gradient only from the same round (--any-round: else "
                              "the last one received).", flag="--same-round/--any-round")


DIGITS_BACKDOOR_VICTIM = {"top": "model", "task": "multiclass", "arch": "small-mlp", "cut_layer": 1, "epochs": 5}
"""The digits victim of both backdoors' `.digits` presets: the small MLP cut 1 for 5 epochs, cheap enough for
three seeds on a CPU and long enough to plant (the CNN cut 6 for 2 epochs planted nothing there)."""

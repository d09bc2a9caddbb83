"""Model completion's settings, passive and active; the presets in the spec (`attacks.split.label_completion`)
say where each number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import AttackSettings, integer, number, option

__all__ = ["CompletionSettings", "ActiveSettings"]


@dataclass(frozen=True, kw_only=True)
class CompletionSettings(AttackSettings):
    """Passive model completion: fine-tune the feature party's trained bottom model and a new head on the few
    samples whose labels it knows."""
    iterations: int = option(300, "fine-tuning steps (Adam, the labelled samples as one batch).",
                             integer(low=1, high=10_000_000))
    labelled: int = option(4, "samples of each class whose labels the attacker knows (Fu et al.: 40 labels on "
                           "CIFAR-10, 4 a class).", integer(low=1, high=100_000))
    finetune_lr: float = option(1e-3, "Adam learning rate of the fine-tuning.", number(low=0, low_open=True, high=10))
    hidden: int = option(64, "width of the head's hidden layer (0: a linear head).", integer(low=0, high=100_000))
    finetune: bool = option(True, "also fine-tune the bottom model (--freeze-bottom: the head only).",
                            flag="--freeze-bottom", negate=True)


@dataclass(frozen=True, kw_only=True)
class ActiveSettings(CompletionSettings):
    """Active model completion: the same, after training the bottom model with the malicious local optimiser."""
    gamma: float = option(1.0, "the malicious optimiser's scale-up rate: an update that keeps its sign is scaled by "
                          "1 + gamma * (this step / the last).", number(low=0, high=1e6))
    max_ratio: float = option(5.0, "the largest scale-up of an update (Fu et al.'s code: 5).",
                              number(low=1, high=1e6))
    momentum: float = option(0.9, "momentum of the malicious optimiser's SGD.", number(low=0, high=1, high_open=True))

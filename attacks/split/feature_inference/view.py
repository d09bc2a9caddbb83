"""What the attacking label party has after training (Luo et al.'s threat model): the trained joint model whole
(its own part and the passive parties', as the paper grants the adversary), its own features of each prediction
sample, and the class probabilities the deployed model returned for them. The passive parties' features of those
samples are what it infers."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attacks.kit import SplitlabError

__all__ = ["JointModel", "PredictionView", "require_view"]


class JointModel(nn.Module):
    """x (whole samples) -> the label party's logits, through every party's model and the label party's: the
    trained VFL model as one differentiable function (inference mode: no noise drawn)."""

    def __init__(self, client, server):
        super().__init__()
        self.parties = list(getattr(client, "clients", [client]))
        self.split = getattr(client, "_strips", lambda x: [x])
        self.join = getattr(getattr(client, "layout", None), "join", lambda parts: parts[0])
        self.top = server.model
        self.held = nn.ModuleList([p.model for p in self.parties] + [self.top])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for module in self.held:
            module.eval()
        parts = [p.activations(strip, training=False) for p, strip in zip(self.parties, self.split(x))]
        return self.top(self.join(parts))


@dataclass(frozen=True, eq=False)
class PredictionView:
    model: JointModel
    own: torch.Tensor
    """(N, *sample shape) the prediction samples with the attacker's columns filled in and the others zero."""
    own_columns: list[int]
    target_columns: list[int]
    """Columns (of a sample's last axis) the attacker holds, and those it infers."""
    probabilities: torch.Tensor
    """(N, K) the deployed model's answer for each prediction sample."""
    linear: bool
    """Whether the joint model is a logistic regression (each party one dense layer, scores summed)."""
    pixels: bool
    """Whether the features are pixels on [0, 1] (images) rather than standardised tabular columns."""

    def compose(self, target: torch.Tensor) -> torch.Tensor:
        """Whole samples: the attacker's columns, and `target` (N, ..., len(target_columns)) in the others."""
        x = self.own.clone()
        x[..., self.target_columns] = target.to(x)
        return x

    def targets_of(self, x: torch.Tensor) -> torch.Tensor:
        """(N, D) the target columns of whole samples, flattened: what is scored."""
        return x[..., self.target_columns].flatten(1)


def require_view(attack: str, view) -> PredictionView:
    if not isinstance(view, PredictionView):
        raise SplitlabError(f"{attack} takes a PredictionView (the label party's model and predictions), got "
                            f"{type(view).__name__}")
    return view

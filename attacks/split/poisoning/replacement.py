"""Gradient replacement: the poisoning feature party stamps its trigger on the samples it poisons and, where their
cut gradient comes back, backpropagates in its place the gradient of a sample it knows to be of the target class
(times `amplify`). The label party's model thus learns that the trigger's activations call for the target label,
though it never saw a wrong label. The gradient taken is a known target sample's in the same round, else (unless
`same_round`) the last one received. With `rounds` > 0 it poisons only in the first `rounds` rounds of training."""
from __future__ import annotations

import torch

from attacks.split.poisoning.trigger import Trigger

__all__ = ["GradientReplacement"]


class GradientReplacement:
    def __init__(self, poisoned: torch.Tensor, known: torch.Tensor, trigger: Trigger, amplify: float = 1.0,
                 same_round: bool = False, rounds: int = 0):
        self.poisoned, self.known = poisoned.cpu(), known.cpu()
        self.rounds, self.seen = rounds, 0
        self.trigger, self.amplify, self.same_round = trigger, amplify, same_round
        self.last: torch.Tensor | None = None
        self.replaced = 0
        """Gradients of poisoned samples replaced in training."""

    @property
    def active(self) -> bool:
        return self.rounds == 0 or self.seen <= self.rounds

    def inputs(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        self.seen += 1
        if not self.active:
            return x
        rows = torch.isin(ids, self.poisoned).to(x.device)
        if not bool(rows.any()):
            return x
        return torch.where(rows.view(-1, *[1] * (x.dim() - 1)), self.trigger.apply(x), x)

    def gradient(self, g: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        known = torch.nonzero(torch.isin(ids, self.known)).flatten()
        if len(known):
            self.last = g[known[-1]].detach().clone()
        source = g[known[-1]] if len(known) else (None if self.same_round else self.last)
        rows = torch.nonzero(torch.isin(ids, self.poisoned)).flatten()
        if source is None or not len(rows) or not self.active:
            return g
        out = g.clone()
        out[rows.to(g.device)] = self.amplify * source
        self.replaced += len(rows)
        return out

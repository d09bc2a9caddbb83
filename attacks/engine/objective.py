"""The objective of one trial: a simulator, a match against the observation, and named priors."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

Prior = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Objective:
    """terms(variables, target) = {"match": match(simulate(variables, context), observed), prior: value, ...}

    `target` is `{"observed": [...], "context": {...}}`: what the adversary saw and what it knows
    (model weights, labels). Blocks weight these terms into the loss they minimise.
    """
    simulator: Callable[[Mapping[str, Any], Mapping[str, Any]], list[torch.Tensor]]
    match: Callable[[list[torch.Tensor], list[torch.Tensor]], torch.Tensor]
    priors: Mapping[str, tuple[str, Prior]] = field(default_factory=dict)
    """term name -> (variable it acts on, prior function)."""

    def __call__(self, variables: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        simulated = self.simulator(variables, target.get("context", {}))
        terms = {"match": self.match(simulated, target["observed"])}
        for name, (variable, prior) in self.priors.items():
            terms[name] = prior(variables[variable])
        return terms

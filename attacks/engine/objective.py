"""The objective of one trial: a simulator, a match against the observation, and weighted priors."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

PriorFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Prior:
    """`weight * fn(variables[variable])`: a penalty term that carries its own weight, so a term and its
    weight cannot be declared apart (and one cannot be computed while its weight is forgotten)."""
    name: str
    variable: str
    fn: PriorFn
    weight: float

    def __post_init__(self) -> None:
        if self.name == "match":
            raise ValueError("'match' names the objective's match term; give the prior another name")
        if not math.isfinite(self.weight):
            raise ValueError(f"prior {self.name!r} needs a finite weight, got {self.weight!r}")


@dataclass(frozen=True)
class Objective:
    """terms(variables, target) = {"match": match(simulate(variables, context), observed), prior: value, ...}

    `target` is `{"observed": [...], "context": {...}}`: what the adversary saw and what it knows
    (model weights, labels). A block minimises `match + sum(prior.weight * prior)` over the terms it
    names (all of them by default).
    """
    simulator: Callable[[Mapping[str, Any], Mapping[str, Any]], list[torch.Tensor]]
    match: Callable[[list[torch.Tensor], list[torch.Tensor]], torch.Tensor]
    priors: tuple[Prior, ...] = ()

    def __post_init__(self) -> None:
        names = [p.name for p in self.priors]
        if len(set(names)) != len(names):
            raise ValueError(f"prior names must be unique, got {names}")

    @property
    def term_names(self) -> tuple[str, ...]:
        return ("match",) + tuple(p.name for p in self.priors)

    def weights(self, terms: tuple[str, ...] | None = None) -> dict[str, float]:
        """term -> weight for the terms a block minimises (None: every term); unknown names are an error."""
        unknown = sorted(set(terms or ()) - set(self.term_names))
        if unknown:
            raise ValueError(f"unknown objective term(s) {', '.join(map(repr, unknown))}; "
                             f"this objective has {', '.join(self.term_names)}")
        every = {"match": 1.0, **{p.name: p.weight for p in self.priors}}
        return every if terms is None else {k: w for k, w in every.items() if k in terms}

    def __call__(self, variables: Mapping[str, Any], target: Mapping[str, Any],
                 terms: tuple[str, ...] | None = None) -> dict[str, torch.Tensor]:
        """The named terms (None: all of them); a term left out is not computed, the simulator included."""
        out = {}
        if terms is None or "match" in terms:
            out["match"] = self.match(self.simulator(variables, target.get("context", {})), target["observed"])
        for prior in self.priors:
            if terms is None or prior.name in terms:
                out[prior.name] = prior.fn(variables[prior.variable])
        return out

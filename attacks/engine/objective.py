"""The objective of one trial: a simulator, a match against the observation, and weighted priors."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from attacks.engine.matches import subset_of

PriorFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Prior:
    """`weight * fn(variables[variable])`: a penalty term that carries its own weight, so a term and its
    weight cannot be declared apart (and one cannot be computed while its weight is forgotten)."""
    name: str
    variable: str
    fn: PriorFn
    weight: float
    on_simulation: bool = False
    """fn takes the simulator's recorded module outputs (`simulators.Simulated.outputs`, same forward pass as
    the match) instead of `variables[variable]`."""

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
                 terms: tuple[str, ...] | None = None, masks: list[torch.Tensor] | None = None
                 ) -> dict[str, torch.Tensor]:
        """The named terms (None: all of them); a term left out is not computed, the simulator included.

        `masks` (from `with_masks`) replace the match's element subset: the subset chosen at one point,
        reused at another (FedLeak's probe point, Alg. 1 line 8).
        """
        return self._terms(variables, target, terms, masks, select=False)[0]

    def _terms(self, variables, target, terms, masks, select: bool) -> tuple[dict[str, torch.Tensor], Any]:
        wanted = [p for p in self.priors if terms is None or p.name in terms]
        matching = terms is None or "match" in terms
        simulated = None
        if matching or any(p.on_simulation for p in wanted):
            simulated = self.simulator(variables, target.get("context", {}))
        out = {}
        if matching:
            if select:
                masks = subset_of(self.match)(simulated, target["observed"])
            out["match"] = self.match(simulated, target["observed"]) if masks is None \
                else self.match(simulated, target["observed"], masks=masks)
        for prior in wanted:
            out[prior.name] = prior.fn(simulated.outputs if prior.on_simulation else variables[prior.variable])
        return out, masks

    def with_masks(self, variables: Mapping[str, Any], target: Mapping[str, Any],
                   terms: tuple[str, ...] | None = None) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
        """The terms (which must include the match) and the element subset the match chose for them, so
        another evaluation can reuse it. Needs a match with a subset (`matches.subset_of`)."""
        if subset_of(self.match) is None or (terms is not None and "match" not in terms):
            raise ValueError("only a match over an element subset has masks to reuse")
        return self._terms(variables, target, terms, None, select=True)

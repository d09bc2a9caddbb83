"""Match: how far a simulated observation is from the observed one, for one trial.

Observations are sequences of tensors (one per layer for gradients, one tensor for activations).
Every match takes optional per-layer weights and an optional element subset (a mask per layer).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Iterable, Sequence

import torch

Tensors = Sequence[torch.Tensor]
Subset = Callable[[Tensors, Tensors], list[torch.Tensor]]
"""(simulated, observed) -> one 0/1 mask per layer selecting the elements to match."""


def per_layer_weights(weights: Sequence[float] | None, n: int) -> Sequence[float]:
    """One weight per layer of `n`: the given ones, checked against the count, or 1 for every layer."""
    if weights is None:
        return [1.0] * n
    if len(weights) != n:
        raise ValueError(f"{len(weights)} layer weights for {n} layers")
    return weights


def _masked(simulated: Tensors, observed: Tensors, subset: Subset | None,
            masks: Sequence[torch.Tensor] | None = None) -> tuple[list, list]:
    """Both sides times the subset's masks; `masks` given: those (a subset frozen at another point)."""
    if masks is None:
        if subset is None:
            return list(simulated), list(observed)
        masks = subset(simulated, observed)
    return [s * m for s, m in zip(simulated, masks)], [o * m for o, m in zip(observed, masks)]


def _elementwise(distance, simulated: Tensors, observed: Tensors, weights, subset, mean: bool,
                 masks=None) -> torch.Tensor:
    simulated, observed = _masked(simulated, observed, subset, masks)
    w = per_layer_weights(weights, len(simulated))
    reduce = torch.mean if mean else torch.sum
    return weighted_sum((wl, reduce(distance(s - o))) for wl, s, o in zip(w, simulated, observed))


def weighted_sum(pairs: Iterable[tuple[float, Any]]) -> Any:
    """sum_k w_k t_k over (w_k, t_k) pairs, left to right, for Python-number weights. A weight of 1 multiplies
    nothing and there is no leading 0 + as `sum` adds: fewer operations per evaluation, the same value. No
    pairs: 0, as `sum` gives."""
    total = None
    for w, term in pairs:
        term = term if w == 1.0 else w * term
        total = term if total is None else total + term
    return 0 if total is None else total


def total(terms: Iterable[Any]) -> Any:
    """sum(terms) without the leading 0 + (`weighted_sum` with every weight 1)."""
    return weighted_sum((1.0, t) for t in terms)


@dataclass(frozen=True)
class _Elementwise:
    """sum_l w_l * reduce(distance(s_l - o_l)) over the selected elements: the sum, or the element mean
    with `mean=True`. Subclasses name the distance."""
    weights: Sequence[float] | None = None
    subset: Subset | None = None
    mean: bool = False
    distance: ClassVar[Callable[[torch.Tensor], torch.Tensor]]

    def __call__(self, simulated: Tensors, observed: Tensors, masks: Sequence[torch.Tensor] | None = None
                 ) -> torch.Tensor:
        return _elementwise(type(self).distance, simulated, observed, self.weights, self.subset, self.mean, masks)


class SquaredL2(_Elementwise):
    """sum_l w_l * ||s_l - o_l||^2 (DLG's summed squared differences; `mean=True` averages elements)."""
    distance = staticmethod(torch.square)


class L1(_Elementwise):
    """sum_l w_l * ||s_l - o_l||_1 (or the element mean with `mean=True`)."""
    distance = staticmethod(torch.abs)


@dataclass(frozen=True)
class Cosine:
    """1 - <s, o> / (||s|| ||o||) over all selected layers jointly (Inverting Gradients' cost).

    Layer weights scale each layer's share of the inner product and of both norms.
    """
    weights: Sequence[float] | None = None
    subset: Subset | None = None

    def __post_init__(self) -> None:
        if self.weights is not None and min(self.weights) < 0:
            raise ValueError(f"cosine layer weights must be non-negative, got {list(self.weights)}")

    def __call__(self, simulated: Tensors, observed: Tensors, masks: Sequence[torch.Tensor] | None = None
                 ) -> torch.Tensor:
        simulated, observed = _masked(simulated, observed, self.subset, masks)
        s, o = _joined(simulated, self.weights), _joined(observed, self.weights)
        # elementwise products and sums: under vmap `@` turns into slow K=1 batched matmuls in the backward
        dot, norm_s, norm_o = (s * o).sum(), s.square().sum(), o.square().sum()
        return 1 - dot / (norm_s.sqrt() * norm_o.sqrt()).clamp_min(1e-30)


def _joined(tensors: Tensors, weights: Sequence[float] | None) -> torch.Tensor:
    """All layers as one vector, layer l scaled by sqrt(w_l): inner products over it are the
    w-weighted sums over layers, in a few large operations instead of several per layer."""
    flat = [t.reshape(-1) for t in tensors]
    if weights is not None:
        flat = [t * wl ** 0.5 for t, wl in zip(flat, per_layer_weights(weights, len(flat)))]
    return torch.cat(flat)


@dataclass(frozen=True)
class MeanSquared:
    """Mean squared error over all elements of all layers (UnSplit's activation match, nn.MSELoss)."""

    def __call__(self, simulated: Tensors, observed: Tensors) -> torch.Tensor:
        return total(((s - o) ** 2).sum() for s, o in zip(simulated, observed)) / sum(s.numel() for s in simulated)


@dataclass(frozen=True)
class Sum:
    """A weighted sum of matches, e.g. FedLeak's L1 + cosine.

    When every part selects the same element subset (FedLeak's top-R% mask for both distances), the
    subset is chosen and applied once and the parts compare the selected elements: the same values (a
    0/1 mask applied once or per part), without a second top-k over every layer.
    """
    parts: tuple[tuple[float, Callable[[Tensors, Tensors], torch.Tensor]], ...]

    @functools.cached_property
    def _shared(self) -> tuple[Subset | None, tuple]:
        subsets = [getattr(part, "subset", None) for _, part in self.parts]
        subset = subsets[0] if all(s == subsets[0] for s in subsets) else None
        if subset is None:
            return None, self.parts
        return subset, tuple((w, replace(part, subset=None)) for w, part in self.parts)

    def __call__(self, simulated: Tensors, observed: Tensors, masks: Sequence[torch.Tensor] | None = None
                 ) -> torch.Tensor:
        subset, parts = self._shared
        if subset is None and masks is not None:
            raise ValueError("a sum of matches with different subsets cannot take one frozen subset")
        if subset is not None:
            simulated, observed = _masked(simulated, observed, subset, masks)
        return weighted_sum((w, part(simulated, observed)) for w, part in parts)


def subset_of(match) -> Subset | None:
    """The element subset a match compares (one shared by every part of a `Sum`), or None: all elements."""
    if isinstance(match, Sum):
        return match._shared[0]
    return getattr(match, "subset", None)

"""Robust aggregation in data space (TGIAs-RO Algorithm 1, Step III): T points (T, ...) -> one point (...).

- `mean`: the plain average (the paper's ablation);
- `median`: coordinate-wise median, the average of the two middle values when T is even (the paper's
  default; Theorem 1 tolerates m < T/2 invalid points);
- `trimmed`: coordinate-wise trimmed mean, dropping the floor(beta T) largest and smallest values;
- `krum`: the input whose summed squared distance to its T - f - 2 nearest other inputs is smallest
  (Blanchard et al. 2017); it returns one of the inputs unchanged.
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["AGGREGATORS", "mean", "median", "trimmed_mean", "krum", "aggregator"]


def mean(points: torch.Tensor) -> torch.Tensor:
    return points.mean(0)


def median(points: torch.Tensor) -> torch.Tensor:
    t = points.shape[0]
    ordered = points.sort(0).values
    if t % 2:
        return ordered[t // 2]
    return (ordered[t // 2 - 1] + ordered[t // 2]) / 2


def trimmed_mean(points: torch.Tensor, beta: float) -> torch.Tensor:
    t = points.shape[0]
    k = int(beta * t)
    if not 0 <= beta < 0.5 or 2 * k >= t:
        raise ValueError(f"trimmed mean needs 0 <= beta < 0.5 leaving points, got beta {beta} for {t} points")
    if k == 0:                               # nothing to trim: the mean itself, without a sort
        return points.mean(0)
    return points.sort(0).values[k:t - k].mean(0)


def krum(points: torch.Tensor, f: int) -> torch.Tensor:
    """f is lowered to T - 3 when there are too few points for it; at T <= 2 every point scores alike
    (each has one neighbour at the same distance) and the first is returned."""
    t = points.shape[0]
    if t <= 2:
        return points[0]
    neighbours = t - min(f, t - 3) - 2
    flat = points.reshape(t, -1)
    distances = torch.cdist(flat.double(), flat.double()).square()
    nearest = distances.sort(1).values[:, 1:neighbours + 1]        # column 0 is the point itself
    return points.index_select(0, nearest.sum(1).argmin().reshape(1))[0]   # index_select: no host read


AGGREGATORS = ("mean", "median", "trimmed", "krum")


def aggregator(name: str, *, beta: float = 0.3, f: int = 3) -> Callable[[torch.Tensor], torch.Tensor]:
    """The named aggregator with its parameter filled in."""
    if name == "mean":
        return mean
    if name == "median":
        return median
    if name == "trimmed":
        return lambda points: trimmed_mean(points, beta)
    if name == "krum":
        return lambda points: krum(points, f)
    raise ValueError(f"unknown aggregator {name!r}; use {', '.join(AGGREGATORS)}")

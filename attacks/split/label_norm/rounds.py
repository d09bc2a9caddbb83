"""Norm scoring's per-round scales: each round's gradients come at a scale of their own, so the score and the
label rule compare a sample with the other samples of its round."""
from __future__ import annotations

import torch

__all__ = ["relative_to_round", "minmax_per_round"]


def relative_to_round(values: torch.Tensor, rounds: torch.Tensor) -> torch.Tensor:
    """value / the median of its round: on an imbalanced task a round's median is a negative example's, so a
    negative sits near 1 and a positive well above it, whatever scale the round's gradients have (a round with a
    median of 0: value / its largest). The ranking within a round, which Li et al.'s leak AUC reads, is unchanged."""
    order = torch.argsort(rounds, stable=True)
    counts = torch.unique_consecutive(rounds[order], return_counts=True)[1]
    parts = values[order].split(counts.tolist())
    medians = torch.stack([part.median() for part in parts])
    highs = torch.stack([part.max() for part in parts])
    # a round whose median is 0 (a defence that rounds most gradients to nothing, DCAE's bins) is put on the scale
    # of its largest value: dividing by 0 would send its scores past what a float32 score can hold
    scale = torch.where(medians > 0, medians, torch.where(highs > 0, highs, torch.ones_like(highs)))
    return values / scale.repeat_interleave(counts)[torch.argsort(order)]


def minmax_per_round(values: torch.Tensor, rounds: torch.Tensor) -> torch.Tensor:
    """`values` scaled to [0, 1] within each round (a round of equal values: 0.5)."""
    count = int(rounds.max()) + 1
    low = torch.full((count,), float("inf"), dtype=values.dtype).scatter_reduce(0, rounds, values, "amin")
    high = torch.full((count,), float("-inf"), dtype=values.dtype).scatter_reduce(0, rounds, values, "amax")
    span = (high - low)[rounds]
    return torch.where(span > 0, (values - low[rounds]) / span.clamp_min(torch.finfo(values.dtype).tiny),
                       torch.full_like(values, 0.5))

"""A label-inference attack's answer as the one result type (`attacks.result.Reconstruction`): one trial, no
images, the per-class scores of the samples it scored and the labels it infers from them."""
from __future__ import annotations

from typing import Any

import torch

from attacks.result import Reconstruction

__all__ = ["answer", "relative_to_round", "minmax_per_round"]


def answer(attack: str, preset: str, scores: torch.Tensor, *, labels: torch.Tensor | None = None,
           rounds: torch.Tensor | None = None, seconds: float, steps: int, rule: str, mode: str | None = None,
           history: dict[str, torch.Tensor] | None = None, extras: dict[str, Any] | None = None,
           artefacts: dict[str, Any] | None = None, loss: float = 0.0) -> Reconstruction:
    """`scores` (N, K): higher is more likely; the labels are their argmax unless given. `mode` None: the engine's
    report says how the trials ran (the attack's own loop where it ran the engine not at all)."""
    scores = scores.detach().float().cpu()
    labels = scores.argmax(1) if labels is None else labels.detach().cpu().long()
    finite = bool(torch.isfinite(scores).all())
    return Reconstruction(
        attack=attack, preset=preset, trials=None, loss=torch.tensor([loss if finite else float("inf")]),
        history=history or {}, diverged=torch.tensor([not finite]), seconds=seconds, steps=steps,
        labels=labels.unsqueeze(0), label_rule=rule, mode=mode, extras=extras or {}, artefacts=artefacts or {},
        label_scores=scores.unsqueeze(0), label_rounds=rounds)


def relative_to_round(values: torch.Tensor, rounds: torch.Tensor) -> torch.Tensor:
    """value / the median of its round: on an imbalanced task a round's median is a negative example's, so a
    negative sits near 1 and a positive well above it, whatever scale the round's gradients have. The ranking
    within a round, which Li et al.'s leak AUC reads, is unchanged."""
    order = torch.argsort(rounds, stable=True)
    counts = torch.unique_consecutive(rounds[order], return_counts=True)[1]
    medians = torch.stack([part.median() for part in values[order].split(counts.tolist())])
    tiny = torch.finfo(values.dtype).tiny
    return values / medians.clamp_min(tiny).repeat_interleave(counts)[torch.argsort(order)]


def minmax_per_round(values: torch.Tensor, rounds: torch.Tensor) -> torch.Tensor:
    """`values` scaled to [0, 1] within each round (a round of equal values: 0.5)."""
    count = int(rounds.max()) + 1
    low = torch.full((count,), float("inf"), dtype=values.dtype).scatter_reduce(0, rounds, values, "amin")
    high = torch.full((count,), float("-inf"), dtype=values.dtype).scatter_reduce(0, rounds, values, "amax")
    span = (high - low)[rounds]
    return torch.where(span > 0, (values - low[rounds]) / span.clamp_min(torch.finfo(values.dtype).tiny),
                       torch.full_like(values, 0.5))

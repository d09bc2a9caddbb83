"""A label-inference attack's answer as the one result type (`attacks.result.Reconstruction`): one trial, no
images, the per-class scores of the samples it scored and the labels it infers from them."""
from __future__ import annotations

from typing import Any

import torch

from attacks.result import Reconstruction

__all__ = ["answer", "relative_to_round", "two_means_threshold"]


def answer(attack: str, preset: str, scores: torch.Tensor, *, labels: torch.Tensor | None = None,
           rounds: torch.Tensor | None = None, seconds: float, steps: int, rule: str, mode: str = "the attack's own",
           history: dict[str, torch.Tensor] | None = None, extras: dict[str, Any] | None = None,
           artefacts: dict[str, Any] | None = None, loss: float = 0.0) -> Reconstruction:
    """`scores` (N, K): higher is more likely; the labels are their argmax unless given."""
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


def two_means_threshold(values: torch.Tensor) -> float:
    """The threshold that splits 1-D `values` into two groups of the largest between-group variance (Otsu's
    rule, exact over the sorted values)."""
    v = values.double().sort().values
    if len(v) < 2 or v[0] == v[-1]:
        return float("inf")
    n = torch.arange(1, len(v), dtype=v.dtype)
    low = v.cumsum(0)[:-1] / n
    high = (v.sum() - v.cumsum(0)[:-1]) / (len(v) - n)
    between = n * (len(v) - n) * (high - low).pow(2)
    split = int(between.argmax())
    return float((v[split] + v[split + 1]) / 2)

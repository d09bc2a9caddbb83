"""A label-inference attack's answer as the one result type (`attacks.result.Reconstruction`): one trial, no
images, the per-class scores of the samples it scored and the labels it infers from them."""
from __future__ import annotations

from typing import Any

import torch

from attacks.result import Reconstruction

__all__ = ["answer"]


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

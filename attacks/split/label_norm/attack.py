"""Norm scoring (Li et al., Label Leakage and Protection in Two-party Split Learning, ICLR 2022, Sec. 3.1).

The feature party of a binary task attacks the labels the label party holds. For example j the label party
returns the cut gradient of the cross-entropy loss,

    g_j = (p_j - y_j) grad_h z_j,

with p_j the predicted probability of the positive class and z_j the logit (two-class softmax: the logit
difference). On an imbalanced task the model gives most examples a low positive probability, so
|p_j - y_j| is near 1 for a positive example and near p_j, small, for a negative one, while grad_h z_j
varies little between examples: the gradient's norm ranks the positives first.

    score_j = ||g_j|| / median of its round's norms              (per round, the gradients received)
    label_j = 1 where ||g_j||, min-max scaled within its round, exceeds 1/2

Within a round the score ranks as the norm does, which is what Li et al. evaluate (leak AUC, within each
round); dividing by the round's median (a negative's norm on an imbalanced task) puts the rounds on one
scale for the pooled AUC. The label rule is VFLAIR's for norm scoring (Li et al. give the AUC only); it calls
the largest norms of a round without a positive positive. Nothing is optimised.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from attacks.kit import (QUIET, EngineOptions, LabelObservation, Needs, Reconstruction, label_answer, require_binary,
                         require_observed)
from attacks.split.label_norm.rounds import minmax_per_round, relative_to_round
from attacks.split.label_norm.settings import NormSettings

__all__ = ["NormScoring"]


@dataclass(frozen=True)
class NormScoring:
    settings: NormSettings = NormSettings(preset="label-norm.li")
    name = "label-norm"

    @property
    def needs(self) -> Needs:
        return Needs(rounds=self.settings.iterations)

    def check_victim(self, victim) -> None:
        require_binary(self.name, victim)

    def __call__(self, observation: LabelObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        require_observed(self.name, observation, "record")
        start = time.perf_counter()
        record = observation.record
        norms = torch.cat([g.flatten(1).double().norm(dim=1) for g in record.gradients])
        rounds = record.rounds
        relative = relative_to_round(norms, rounds)
        scores = torch.stack([-relative, relative], dim=1)
        labels = (minmax_per_round(norms, rounds) > 0.5).long()
        return label_answer(self.name, self.settings.preset, scores, labels=labels, rounds=rounds,
                            seconds=time.perf_counter() - start, steps=len(record.steps), rule="norm",
                            extras={"rounds_scored": len(record.steps)})

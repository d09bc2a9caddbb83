"""Direction scoring (Li et al., Label Leakage and Protection in Two-party Split Learning, ICLR 2022, Sec. 3.2).

The cut gradient of example j of a binary task is g_j = (p_j - y_j) grad_h z_j: the scalar p_j - y_j is
negative for a positive example and positive for a negative one, while grad_h z_j points nearly the same
way for the examples of a round (exactly the same way when the label party's model is linear). So two
examples' gradients point the same way when their labels agree and opposite ways when they differ. Knowing
the label of one positive example k in a round, the feature party scores every example of the round by

    score_j = cos(g_j, g_k)                                       (positive: the label of k)
    label_j = 1 where score_j > 0

Li et al. grant the attacker one known positive example per batch; a round without a positive example is
scored against the last known positive's gradient received before it (before the first, the first one's).
Nothing is optimised.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from attacks.kit import (QUIET, EngineOptions, LabelObservation, Needs, Reconstruction, SplitlabError, label_answer,
                         require_binary, require_observed)
from attacks.split.label_direction.settings import DirectionSettings

__all__ = ["DirectionScoring"]


@dataclass(frozen=True)
class DirectionScoring:
    settings: DirectionSettings = DirectionSettings(preset="label-direction.li")
    name = "label-direction"

    @property
    def needs(self) -> Needs:
        return Needs(rounds=self.settings.iterations, hints=True)

    def check_victim(self, victim) -> None:
        require_binary(self.name, victim)

    def __call__(self, observation: LabelObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        require_observed(self.name, observation, "record")
        if not observation.hints:
            raise SplitlabError(f"{self.name}: no scored round holds a sample whose label the attacker knows (no "
                                "positive sample in them); score more rounds (--iterations 0: all)")
        start = time.perf_counter()
        record, hints = observation.record, observation.hints
        first = min(hints)
        reference, cosines = None, []
        for r, g in enumerate(record.gradients):
            rows = g.flatten(1).double()
            if r in hints:
                reference = rows[hints[r][0]]
            elif reference is None:
                reference = record.gradients[first].flatten(1).double()[hints[first][0]]
            cosines.append(torch.nn.functional.cosine_similarity(rows, reference.unsqueeze(0), dim=1))
        cosine = torch.cat(cosines)
        scores = torch.stack([-cosine, cosine], dim=1)
        return label_answer(self.name, self.settings.preset, scores, labels=(cosine > 0).long(), rounds=record.rounds,
                            seconds=time.perf_counter() - start, steps=len(record.steps), rule="direction",
                            extras={"rounds_scored": len(record.steps), "rounds_with_a_known_positive": len(hints)})

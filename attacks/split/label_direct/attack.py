"""Direct label inference (Fu et al., Label Inference Attacks Against Vertical Federated Learning, USENIX
Security 2022, Sec. 4.3).

In vertical FL without model splitting the feature parties' models compute the class scores and the label
party only adds them up and takes the cross-entropy loss. The gradient it returns for example j is then the
loss's gradient with respect to the class scores themselves,

    g_j = (softmax(z_j) - onehot(y_j)) / B,

whose only negative entry is the true class's. The feature party reads each label off the sign:

    label_j = argmin_c g_jc,      score_jc = -g_jc

(exact whatever the model has learnt; a send-back defence that perturbs g is what can stop it). Nothing is
optimised. The attack needs the label party to hold no model (`--top none`): behind a top model the gradient
is taken with respect to the cut activations, whose entries are not the classes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from attacks.kit import (QUIET, EngineOptions, LabelObservation, Needs, Reconstruction, SplitlabError, label_answer,
                         require_observed, require_top)
from attacks.split.label_direct.settings import DirectSettings

__all__ = ["DirectInference"]


@dataclass(frozen=True)
class DirectInference:
    settings: DirectSettings = DirectSettings(preset="label-direct.fu")
    name = "label-direct"

    @property
    def needs(self) -> Needs:
        return Needs(rounds=self.settings.iterations)

    def check_victim(self, victim) -> None:
        require_top(self.name, victim, "none", "it reads the labels off the gradient of the class scores")

    def __call__(self, observation: LabelObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        require_observed(self.name, observation, "record")
        start = time.perf_counter()
        record = observation.record
        gradients = torch.cat([g.flatten(1) for g in record.gradients]).double()
        if gradients.shape[1] != observation.classes:
            raise SplitlabError(f"{self.name} needs one gradient entry per class ({observation.classes}), got "
                                f"{gradients.shape[1]}: the label party holds a model (use --top none)")
        return label_answer(self.name, self.settings.preset, -gradients, rounds=record.rounds,
                            seconds=time.perf_counter() - start, steps=len(record.steps), rule="sign",
                            extras={"rounds_scored": len(record.steps)})

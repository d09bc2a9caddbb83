"""Batch label inference (Liu, Zou, Kang et al., Batch Label Inference and Replacement Attacks in Black-Boxed
Vertical Federated Learning).

In black-boxed VFL the per-sample messages are encrypted and a passive party learns only the batch-level gradient
of its own model's parameters,

    grad_theta = sum_i J_i^T g_i,        g_i = dL/dH_i = (softmax(H_i + O_i) - y_i) / B,

with H_i its class scores for sample i, O_i the other parties' (unseen) and y_i the private one-hot label. The
lab's protocol sends g in the clear, so the attack first reduces what its party received to exactly that
batch-level gradient (its own weights of that round, its own inputs) and reads nothing else. Then it fits a
gradient inversion model, as DLG does for images but over labels: dummy labels softmax(Y') and dummy other
scores O', both free, so that the batch-level gradient they give matches the observed one,

    min_{Y', O'}  || grad_theta(softmax(Y'), O') - grad_theta ||^2 / || grad_theta ||^2        (Adam)

and reads each sample's label as argmax Y'. Every round is inverted on its own; the answer is the batch's labels.
The label party must hold no model (`--top none`): the passive party's outputs are the class scores the label
party aggregates, as in the paper.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from attacks.kit import (QUIET, EngineOptions, LabelObservation, Needs, Reconstruction, SplitlabError, label_answer,
                         require_observed, require_top, stream_seed)
from attacks.split.bli.settings import BatchLabelSettings

__all__ = ["BatchLabelInference", "batch_gradient", "invert_batch"]


def batch_gradient(model: torch.nn.Module, x: torch.Tensor, g: torch.Tensor) -> list[torch.Tensor]:
    """sum_i J_i^T g_i over the model's parameters: what the black-boxed party learns of a round."""
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        return list(torch.autograd.grad(model(x), params, grad_outputs=g))


def invert_batch(model: torch.nn.Module, x: torch.Tensor, observed: list[torch.Tensor], classes: int,
                 settings: BatchLabelSettings, generator: torch.Generator) -> tuple[torch.Tensor, list[float]]:
    """(the dummy label logits (B, K) after fitting, the loss per step)."""
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():
        scores = model(x)
    labels = (0.01 * torch.randn(len(x), classes, generator=generator, dtype=scores.dtype)).requires_grad_()
    others = torch.zeros_like(scores, requires_grad=settings.other_scores)
    dummies = [labels] + ([others] if settings.other_scores else [])
    optimizer = torch.optim.Adam(dummies, lr=settings.inversion_lr)
    norm = sum(float((o ** 2).sum()) for o in observed) or 1.0
    losses = []
    with torch.enable_grad():
        for _ in range(settings.iterations):
            optimizer.zero_grad(set_to_none=True)
            logits = model(x) + others
            loss = -(F.softmax(labels, 1) * F.log_softmax(logits, 1)).sum(1).mean()
            dummy = torch.autograd.grad(loss, params, create_graph=True)
            match = sum(((d - o) ** 2).sum() for d, o in zip(dummy, observed)) / norm
            match.backward()
            optimizer.step()
            losses.append(float(match.detach()))
    return labels.detach(), losses


@dataclass(frozen=True)
class BatchLabelInference:
    settings: BatchLabelSettings = BatchLabelSettings(preset="bli.liu")
    name = "bli"

    @property
    def needs(self) -> Needs:
        return Needs(rounds=self.settings.rounds, models=True)

    def check_victim(self, victim) -> None:
        require_top(self.name, victim, "none", "the passive party's model sends class scores the label party adds "
                                               "up, as in black-boxed VFL")

    def __call__(self, observation: LabelObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        require_observed(self.name, observation, "record", "models", "bottom", "train_inputs")
        start = time.perf_counter()
        record = observation.record
        model = copy.deepcopy(observation.bottom).cpu().double()
        generator = torch.Generator().manual_seed(stream_seed(seed, "bli dummies"))
        logits, history, losses = [], [], []
        for state, g, ids in zip(observation.models, record.gradients, record.samples):
            model.model.load_state_dict(state)
            model.model.double()
            x = observation.train_inputs[ids].cpu().double()
            if g.shape[1:] != (observation.classes,):
                raise SplitlabError(f"{self.name} needs class scores at the cut ({observation.classes} a sample), "
                                    f"got {tuple(g.shape[1:])}: use --top none")
            observed = batch_gradient(model, x, g.cpu().double())
            found, trace = invert_batch(model, x, observed, observation.classes, self.settings, generator)
            logits.append(found)
            history.extend(trace)
            losses.append(trace[-1])
        return label_answer(self.name, self.settings.preset, torch.cat(logits), rounds=record.rounds,
                      seconds=time.perf_counter() - start, steps=len(history), rule="gradient inversion",
                      mode="sequential", history={"loss": torch.tensor(history).view(-1, 1)}, loss=max(losses),
                      extras={"rounds_scored": len(record.steps), "batch_size": int(len(record.samples[0])),
                              "final_match": losses})

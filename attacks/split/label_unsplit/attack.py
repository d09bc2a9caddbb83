"""UnSplit's label inference (Erdogan, Kupcu, Cicek, WPES 2022, Sec. 5), against the U-shaped split where the
label party keeps only the output layer (`--top linear`): the attacker computes everything up to it, sends
its output a_j and receives the gradient of the label party's batch-mean cross-entropy,

    g_j = W^T (softmax(W a_j + b) - onehot(y_j)) / B.

It does not know W, b. It keeps a clone (W~, b~) of the output layer and, for every round as it comes,

    1. tries every label c:  g~_jc = W~^T (softmax(W~ a_j + b~) - onehot(c))
       and infers y~_j = argmin_c ||B g_j - g~_jc||^2                         (score_jc: minus that distance)
       (a clone class that no sample chooses is restarted at the worst-explained sample: the lab's remedy
       for a class that would otherwise never be fitted)
    2. fits the clone to the round's gradients under those labels (the engine, Adam, `iterations` steps):
       min_{W~, b~}  sum_j ||B g_j - W~^T (softmax(W~ a_j + b~) - onehot(y~_j))||^2
    3. infers the round's labels again with the fitted clone (the answer).

Gradients of an unknown W fix the classes only up to a permutation of its rows; the attacker names its
clone's classes by the few samples whose labels it knows (`labelled` a class): the permutation that agrees
with them most (Hungarian assignment) maps clone classes to labels.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from attacks.kit import (QUIET, Adam, Block, EngineOptions, LabelObservation, Needs, Objective, Reconstruction,
                         Schedule, SquaredL2, label_answer, require_observed, require_top, run, seeded, stream_seed)
from attacks.split.label_unsplit.settings import UnsplitLabelSettings

__all__ = ["UnsplitLabels", "CandidateGradient", "candidate_gradients"]


def candidate_gradients(weight: torch.Tensor, bias: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """(K, B, d): the summed cross-entropy's gradient with respect to a under each label c, for the output layer
    (weight (K, d), bias (K,))."""
    p = torch.softmax(a @ weight.T + bias, dim=1)                  # (B, K)
    classes = weight.shape[0]
    residual = p.unsqueeze(0) - torch.eye(classes, dtype=a.dtype, device=a.device).unsqueeze(1)   # (K, B, K)
    return residual @ weight


@dataclass(frozen=True)
class CandidateGradient:
    """The simulator: the output-layer clone's gradient with respect to a under the inferred labels."""

    def __call__(self, variables, context) -> list[torch.Tensor]:
        head = variables["head"]
        a, labels = context["a"], context["labels"]
        p = torch.softmax(a @ head["weight"].T + head["bias"], dim=1)
        residual = p - nn.functional.one_hot(labels, p.shape[1]).to(p.dtype)
        return [residual @ head["weight"]]


def _restart_unused(head: dict, a: torch.Tensor, g: torch.Tensor, distances: torch.Tensor,
                    labels: torch.Tensor) -> dict:
    """The clone with each class that no sample of the window chose restarted at the worst-explained sample:
    its row set so that the class's candidate gradient for that sample is the gradient received,
    W~_c = W~^T p~ - g (a class that wins no sample is never fitted, and would stay dead)."""
    unused = [c for c in range(distances.shape[1]) if not bool((labels == c).any())]
    if not unused:
        return head
    weight, bias = head["weight"][0].clone(), head["bias"][0]
    worst = distances.min(1).values.argsort(descending=True)
    for c, j in zip(unused, worst.tolist()):
        p = torch.softmax(a[j] @ weight.T + bias, dim=0)
        weight[c] = p @ weight - g[j]
    return {"weight": weight.unsqueeze(0), "bias": head["bias"]}


@dataclass(frozen=True)
class UnsplitLabels:
    settings: UnsplitLabelSettings = UnsplitLabelSettings(preset="label-unsplit.original")
    name = "label-unsplit"

    @property
    def needs(self) -> Needs:
        return Needs(sent=True, labelled=self.settings.labelled)

    def check_victim(self, victim) -> None:
        require_top(self.name, victim, "linear", "UnSplit's U-shaped split: the label party keeps the output layer")

    def _distances(self, head: dict, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """(B, K) squared distance of the received (sum-scaled) gradient to each label's candidate."""
        return (candidate_gradients(head["weight"][0], head["bias"][0], a) - g.unsqueeze(0)).pow(2).sum(-1).T

    def __call__(self, observation: LabelObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        require_observed(self.name, observation, "record", "sent", "labelled")
        s = self.settings
        start = time.perf_counter()
        record = observation.record
        a0 = record.sent[0].flatten(1)
        with seeded(stream_seed(seed, "unsplit output-layer clone")):
            layer = nn.Linear(a0.shape[1], observation.classes).to(device=a0.device, dtype=a0.dtype)
        head = {"weight": layer.weight.detach().unsqueeze(0), "bias": layer.bias.detach().unsqueeze(0)}
        objective = Objective(CandidateGradient(), SquaredL2())
        schedule = Schedule((Block(("head",), Adam(s.clone_lr), s.iterations),))
        scores, fits, window = [], [], []
        with engine.bar(len(record.steps), f"{engine.description} rounds") as bar:
            for sent, received in zip(record.sent, record.gradients):
                a = sent.flatten(1)
                g = received.flatten(1).to(a.dtype) * len(a)            # the label party averages over the batch
                window = (window + [(a, g)])[-s.window:]
                a_w, g_w = torch.cat([w[0] for w in window]), torch.cat([w[1] for w in window])
                distances = self._distances(head, a_w, g_w)
                labels = distances.argmin(1)
                head = _restart_unused(head, a_w, g_w, distances, labels)
                labels = self._distances(head, a_w, g_w).argmin(1)
                if s.iterations:
                    target = {"observed": [g_w], "context": {"a": a_w, "labels": labels}}
                    result = run(objective, {"head": head}, target, schedule, engine.within(), keep=())
                    head = {k: v.detach() for k, v in result.final["head"].items()}
                    fits.append(result.trace["match"][-1])
                scores.append(-self._distances(head, a, g))
                bar.advance()
        scores = torch.cat(scores).detach().cpu()
        mapping = self._name_classes(scores.argmax(1), observation)
        history = {"match": torch.cat(fits).view(-1, 1)} if fits else {}
        return label_answer(self.name, s.preset, scores[:, mapping], rounds=record.rounds,
                            seconds=time.perf_counter() - start, steps=s.iterations * len(record.steps),
                            rule="gradient matching", history=history,
                            extras={"rounds_scored": len(record.steps), "clone_classes_to_labels": mapping.tolist()})

    @staticmethod
    def _name_classes(inferred: torch.Tensor, observation: LabelObservation) -> torch.Tensor:
        """mapping[label] = the clone class named `label`: the assignment that agrees most with the labelled
        samples wherever they were scored."""
        ids, known = observation.labelled
        classes = observation.classes
        agreement = torch.zeros(classes, classes)
        position = {int(i): int(y) for i, y in zip(ids, known)}
        for row, sample in enumerate(observation.targets.tolist()):
            if sample in position:
                agreement[position[sample], inferred[row]] += 1
        labels, clone_classes = linear_sum_assignment(agreement.numpy(), maximize=True)
        mapping = torch.empty(classes, dtype=torch.long)
        mapping[torch.as_tensor(labels)] = torch.as_tensor(clone_classes)
        return mapping

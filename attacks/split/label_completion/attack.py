"""Model completion (Fu et al., Label Inference Attacks Against Vertical Federated Learning, USENIX Security
2022, Sec. 4.1-4.2).

After training, the feature party holds its bottom model f, which has learnt to compute what the label
party's top model needs to predict the labels. It completes f into a classifier with a head h of its own,
fitted on the few training samples whose labels it knows (its auxiliary knowledge, `labelled` per class):

    min_{h (, f)}  CE(h(f(x_l)), y_l)                              (Adam, the labelled samples as one batch)
    label_j = argmax h(f(x_j))      for every other training sample j (and, for evaluation, the test samples)

Passive (`label-completion`): f as the protocol trained it. Active (`label-active`): the party trained f with
the malicious local optimiser (`optimizer.MaliciousSGD`) instead of the protocol's, so more of the task sits
in f. The head is a dense layer of `hidden` units and ReLU before the output layer (or the output layer alone).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
from torch import nn

from attacks.kit import (QUIET, EngineOptions, LabelObservation, Needs, Reconstruction, label_answer, require_observed,
                         seeded, stream_seed)
from attacks.split.label_completion.optimizer import MaliciousSGD
from attacks.split.label_completion.settings import ActiveSettings, CompletionSettings

__all__ = ["ModelCompletion", "ActiveCompletion"]

_CHUNK = 1000


def _head(features: int, hidden: int, classes: int, seed: int) -> nn.Module:
    with seeded(stream_seed(seed, "completion head")):
        if hidden == 0:
            return nn.Linear(features, classes)
        return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


@torch.no_grad()
def _predict(model: nn.Module, inputs: torch.Tensor, device: torch.device) -> torch.Tensor:
    model.eval()
    return torch.cat([model(inputs[i:i + _CHUNK].to(device)).float().cpu() for i in range(0, len(inputs), _CHUNK)])


@dataclass(frozen=True)
class ModelCompletion:
    settings: CompletionSettings = CompletionSettings(preset="label-completion.fu")
    name = "label-completion"

    @property
    def needs(self) -> Needs:
        return Needs(gradients=False, bottom=True, labelled=self.settings.labelled)

    def check_victim(self, victim) -> None:
        pass                                            # any task, any top model

    def __call__(self, observation: LabelObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        require_observed(self.name, observation, "bottom", "train_inputs", "labelled")
        s = self.settings
        start = time.perf_counter()
        bottom = copy.deepcopy(observation.bottom)          # the party's own model; the protocol's copy stays
        device = next(bottom.parameters()).device
        ids, known = observation.labelled
        x, y = observation.train_inputs[ids].to(device), known.to(device)
        with torch.no_grad():
            features = bottom(x[:1]).flatten(1).shape[1]
        model = nn.Sequential(bottom, nn.Flatten(), _head(features, s.hidden, observation.classes, seed).to(device))
        params = list(model.parameters()) if s.finetune else list(model[2].parameters())
        for p in bottom.parameters():
            p.requires_grad_(s.finetune)
        optimizer = torch.optim.Adam(params, lr=s.finetune_lr)
        losses = torch.empty(s.iterations, device=device)              # kept on the device: no read per step
        model.train()
        with engine.bar(s.iterations, f"{engine.description} fine-tuning") as bar:
            for step in range(s.iterations):
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                losses[step] = loss.detach()
                bar.advance()
        losses = losses.cpu()
        logits = _predict(model, observation.train_inputs[observation.targets], device)
        artefacts = {"test_scores": _predict(model, observation.test_inputs, device)} \
            if observation.test_inputs is not None else {}
        return label_answer(self.name, s.preset, torch.log_softmax(logits, 1), seconds=time.perf_counter() - start,
                            steps=s.iterations, rule="completion", history={"loss": losses.view(-1, 1)},
                            loss=float(losses[-1]), artefacts=artefacts,
                            extras={"labelled_samples": len(ids), "final_fit_loss": float(losses[-1])})


@dataclass(frozen=True)
class ActiveCompletion(ModelCompletion):
    settings: ActiveSettings = ActiveSettings(preset="label-active.fu")
    name = "label-active"

    @property
    def local_optimizer(self):
        """The party's own optimiser during training: `optimizer(params, lr)`, the malicious one."""
        s = self.settings
        return lambda params, lr: MaliciousSGD(params, lr, momentum=s.momentum, gamma=s.gamma, max_ratio=s.max_ratio)


def completion_test_accuracy(reconstruction, metrics: dict, truth) -> dict:
    """The spec's `evaluate` hook: the completed model's accuracy on the test samples (Fu et al. report it)."""
    scores, labels = reconstruction.artefacts.get("test_scores"), truth.context.get("test_labels")
    if scores is None or labels is None:
        return {"test_label_accuracy": None}
    return {"test_label_accuracy": float((scores.argmax(1) == labels.cpu()).double().mean())}

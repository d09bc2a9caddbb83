"""The generative regression network (GRN; Luo, Wu, Xiao, Ooi. Feature Inference Attack on Model Predictions in
Vertical Federated Learning. ICDE 2021) against any differentiable joint model.

A generator G maps the attacker's own features of a sample and random noise to a guess of the passive party's
features. It is trained on every prediction sample at once so that the joint model, fed the attacker's features
and the guess, returns the predictions the attacker saw:

    min_G  mean_n || softmax(f(x_adv,n, G(x_adv,n, r_n))) - v_n ||^2                         (Adam)

The model f is fixed (the adversary holds it, the paper's assumption); only G learns. Its guess for sample n is
G(x_adv,n, r_n) after training. The generator is dense with ReLU, hidden widths 600, 200, 100; its output goes
through a sigmoid for pixels on [0, 1] and is left linear for standardised tabular columns; its output layer
starts at zero, so training starts from one guess for every sample (the standardised columns' mean).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from attacks.kit import QUIET, EngineOptions, Reconstruction, seeded, stream_seed
from attacks.split.feature_inference.settings import GrnSettings
from attacks.split.feature_inference.view import PredictionView, require_view

__all__ = ["GenerativeRegression", "HIDDEN"]

HIDDEN = (600, 200, 100)
"""The generator's hidden widths (the lab's reading of the paper's GRN; see the spec's deviations)."""


def generator(inputs: int, outputs: int, pixels: bool) -> nn.Sequential:
    widths = (inputs, *HIDDEN)
    layers: list[nn.Module] = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    last = nn.Linear(widths[-1], outputs)
    nn.init.zeros_(last.weight)                 # it starts from one guess for every sample: 0, the standardised mean
    nn.init.zeros_(last.bias)                   # (a standardised column's; 0.5 through the sigmoid for pixels)
    layers.append(last)
    if pixels:
        layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class GenerativeRegression:
    settings: GrnSettings = GrnSettings(preset="grn.luo")
    name = "grn"

    def __call__(self, view: PredictionView, *, seed: int = 0, engine: EngineOptions = QUIET) -> Reconstruction:
        view = require_view(self.name, view)
        start = time.perf_counter()
        model = copy.deepcopy(view.model)
        for p in model.parameters():
            p.requires_grad_(False)
        own = view.own[..., view.own_columns].flatten(1)
        shape = (*view.own.shape[1:-1], len(view.target_columns))
        unknown = int(torch.Size(shape).numel())
        g = torch.Generator().manual_seed(stream_seed(seed, "grn noise"))
        noise = torch.randn(len(own), unknown, generator=g)
        with seeded(stream_seed(seed, "grn generator")):
            net = generator(own.shape[1] + unknown, unknown, view.pixels)
        optimizer = torch.optim.Adam(net.parameters(), lr=self.settings.generator_lr)
        inputs = torch.cat([own, noise], 1)
        wanted = view.probabilities.float()
        losses = []
        with torch.enable_grad():
            for _ in range(self.settings.iterations):
                optimizer.zero_grad(set_to_none=True)
                guess = net(inputs).view(len(own), *shape)
                loss = ((F.softmax(model(view.compose(guess)), 1) - wanted) ** 2).sum(1).mean()
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
        with torch.no_grad():
            found = net(inputs)
        initial = torch.zeros_like(found) if not view.pixels else torch.full_like(found, 0.5)
        return Reconstruction(
            attack=self.name, preset=self.settings.preset, trials=found.unsqueeze(0), features=True,
            loss=torch.tensor([losses[-1]]), history={"loss": torch.tensor(losses).view(-1, 1)},
            diverged=torch.tensor([not torch.isfinite(found).all()]), seconds=time.perf_counter() - start,
            steps=len(losses), mode="sequential", initial=initial.unsqueeze(0))

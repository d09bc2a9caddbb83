"""MID, the mutual-information regularisation defence (Zou, Liu, Zhang et al., Mutual Information Regularization
for Vertical Federated Learning, arXiv 2301.01142): the label party passes the activations H it receives through a
variational information bottleneck before its top model and adds lambda * KL to its loss, so the gradient it sends
back carries less of its labels:

    (mu, s) = ReLU(W_e flat(H) + b_e) split in two halves;  std = softplus(s - 5)
    z = mu + std * eps, eps ~ N(0, I)  (training);  z = mu  (inference)
    H' = ReLU(W_2 ReLU(W_1 z + b_1) + b_2), shaped like H, into the top model
    loss = CE + lambda * mean_i sum_j -0.5 (1 + 2 log std - mu^2 - std^2)

with the encoder's width 2 d and the decoder's hidden width 5 d for d the activations' size times
`bottleneck_scale`, as VFLAIR's implementation of the paper has them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from vfl.defences.base import SeededNoise, seed_option
from vfl.defences.send_back import SendBackDefence
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation, Where
from vfl.errors import SplitlabError
from vfl.options import integer, number, option

__all__ = ["Bottleneck", "MID", "SPEC"]

ZOU = "Zou, Liu, Zhang, Wang, Zhang, Mutual Information Regularization for Vertical Federated Learning " \
      "(arXiv 2301.01142), as VFLAIR (FLAIR-THU/VFLAIR) implements it"

MAX_WIDTH = 2**16
"""The bottleneck's width d (activation size x scale): its decoder has 5 d^2 weights."""


class Bottleneck(nn.Module):
    def __init__(self, shape: tuple[int, ...], scale: int, seed: int):
        super().__init__()
        self.shape, size = tuple(shape), math.prod(shape)
        self.width = size * scale
        with torch.random.fork_rng(devices=[]):         # its weights from its own seed; the global stream untouched
            torch.manual_seed(seed)
            self.encoder = nn.Linear(size, 2 * self.width)
            self.decoder = nn.Sequential(nn.Linear(self.width, 5 * self.width), nn.ReLU(),
                                         nn.Linear(5 * self.width, size), nn.ReLU())
        self.noise = SeededNoise(1.0, seed)
        self.kl: torch.Tensor | None = None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        both = F.relu(self.encoder(h.flatten(1)))
        mu, spread = both[:, :self.width], both[:, self.width:]
        std = F.softplus(spread - 5)
        z = mu + std * self.noise.noise_like(mu) if self.training else mu
        self.kl = (-0.5 * (1 + 2 * std.log() - mu.pow(2) - std.pow(2))).sum(1).mean()
        return self.decoder(z).view(len(h), *self.shape)


class MID(SendBackDefence):
    name = "mid"

    def __init__(self, shape: tuple[int, ...], lam: float, scale: int = 1, seed: int = 0):
        self.lam = lam
        self.layer = Bottleneck(shape, scale, seed)
        self.kls: list[float] = []

    def penalty(self) -> torch.Tensor | None:
        kl = self.layer.kl
        self.layer.kl = None
        if kl is None:
            return None
        self.kls.append(float(kl.detach()))
        return self.lam * kl

    def report(self) -> dict[str, Any]:
        return {"mid_kl_mean": sum(self.kls) / len(self.kls) if self.kls else None,
                "mid_kl_last": self.kls[-1] if self.kls else None}


@dataclass(frozen=True, kw_only=True)
class MIDSettings(DefenceSettings):
    lam: float = option(help="Weight lambda of the KL term (0: the bottleneck without its regulariser).",
                        check=number(low=0, high=1e4))
    bottleneck_scale: int = option(1, "The bottleneck's width as a multiple of the activations' size.",
                                   integer(low=1, high=16))
    seed: int = seed_option("the bottleneck's weights and its sampling")


def _fits(s: MIDSettings, where: Where) -> None:
    if where.input_shape is not None and math.prod(where.input_shape) * s.bottleneck_scale > MAX_WIDTH:
        raise SplitlabError(f"mid's bottleneck would be {math.prod(where.input_shape) * s.bottleneck_scale} wide "
                            f"(activations x bottleneck_scale), more than {MAX_WIDTH}; cut later or lower the scale")


def _build(s: MIDSettings, where: Where) -> MID:
    if where.input_shape is None:
        raise SplitlabError("mid is built for the shape of the activations the label party receives")
    return MID(tuple(where.input_shape), s.lam, s.bottleneck_scale, s.seed)


SPEC = DefenceSpec(
    name="mid", point="label-layers", title="a variational information bottleneck on the activations the label party "
    "receives, lambda * KL added to its loss", paper=ZOU, settings=MIDSettings, build=_build, fits=_fits,
    needs=("label-model",), example="mid:lam=0.1",
    strengths=({"lam": 1e-4}, {"lam": 1e-2}, {"lam": 1.0}, {"lam": 100.0}, {"lam": 1e4}),
    deviations=(Deviation("inference", "VFLAIR samples z at inference too", "z = mu at inference (evaluation mode)",
                          "a deterministic prediction; training is as VFLAIR's"),
                Deviation("where", "one MID layer per passive party, at the active party", "one layer on the joined "
                          "activations of all feature parties", "the lab's label party receives them joined"),))

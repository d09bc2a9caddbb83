"""Gaussian noise on what crosses the cut at the feature party: the activations it sends, the gradient it
receives (before it backpropagates it). Each draws from a generator of its own (option `seed`)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vfl.defences.base import ClientDefence, SeededNoise, seed_option
from vfl.defences.spec import DefenceSettings, DefenceSpec
from vfl.options import number, option

__all__ = ["ActivationNoise", "GradientNoise", "ACTIVATION_NOISE", "RECEIVED_GRADIENT_NOISE"]

VFL_NOISE = "the lab's noise baseline on a cut-layer message (no single source paper)"


class ActivationNoise(SeededNoise, ClientDefence):
    """Gaussian noise N(0, sigma^2) added to the activations the client sends (training and inference)."""

    name = "activation-noise"

    def on_activations(self, h: torch.Tensor, training: bool) -> torch.Tensor:
        return h + self.noise_like(h)


class GradientNoise(SeededNoise, ClientDefence):
    """Gaussian noise on the cut-layer gradient the client receives before it backpropagates it."""

    name = "received-gradient-noise"

    def on_gradient(self, g: torch.Tensor) -> torch.Tensor:
        return g + self.noise_like(g)


@dataclass(frozen=True, kw_only=True)
class NoiseSettings(DefenceSettings):
    sigma: float = option(help="Standard deviation of the noise, in the message's own units.",
                          check=number(low=0))
    seed: int = seed_option("the noise")


ACTIVATION_NOISE = DefenceSpec(
    name="activation-noise", point="activations", title="Gaussian noise N(0, sigma^2) on the activations the feature "
    "party sends (training and inference)", paper=VFL_NOISE, settings=NoiseSettings,
    build=lambda s, where: ActivationNoise(s.sigma, s.seed), example="activation-noise:sigma=0.1",
    zero={"sigma": 0.0}, strengths=({"sigma": 0.01}, {"sigma": 0.1}, {"sigma": 1.0}))

RECEIVED_GRADIENT_NOISE = DefenceSpec(
    name="received-gradient-noise", point="received-gradient", title="Gaussian noise N(0, sigma^2) on the cut "
    "gradient the feature party receives, before it backpropagates it", paper=VFL_NOISE, settings=NoiseSettings,
    build=lambda s, where: GradientNoise(s.sigma, s.seed), example="received-gradient-noise:sigma=0.01",
    zero={"sigma": 0.0}, strengths=({"sigma": 0.001}, {"sigma": 0.01}, {"sigma": 0.1}))

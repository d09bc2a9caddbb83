"""Priors: penalties on the variables of one trial (image priors act on x shaped (B, C, H, W))."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn
from attacks.engine.simulators import call, recording


def tv_l1(x: torch.Tensor) -> torch.Tensor:
    """Anisotropic total variation, mean |dx| + mean |dy| (Inverting Gradients)."""
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


def tv_squared(x: torch.Tensor) -> torch.Tensor:
    """Squared total variation, mean dx^2 + mean dy^2: the form UnSplit's code uses
    (sums of squared neighbour differences, each normalised by its element count, over the batch)."""
    return (x[..., 1:, :] - x[..., :-1, :]).pow(2).mean() + (x[..., :, 1:] - x[..., :, :-1]).pow(2).mean()


def outside_box(x: torch.Tensor, bound: float) -> torch.Tensor:
    """mean(max(|x| - bound, 0)^2): zero inside [-bound, bound], the range a standardised feature keeps to
    (a prior for feature vectors, where TV's neighbouring pixels do not exist)."""
    return torch.relu(x.abs() - bound).pow(2).mean()


def l2(x: torch.Tensor) -> torch.Tensor:
    """mean(x^2), UnSplit's lambda_l2 term."""
    return x.pow(2).mean()


@dataclass(frozen=True)
class BNStatistics:
    """sum over BatchNorm layers of ||mean(z) - running_mean|| + ||var(z) - running_var|| (DeepInversion-style).

    Runs its own forward pass of `model` at `params` (eval-mode BN keeps the running statistics fixed).
    """
    model: nn.Module
    params: Mapping[str, torch.Tensor]
    first: float = 1.0
    """Weight of the first BatchNorm layer's term (DeepInversion and GradInversion weigh it 10)."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        with recording(self.model, (nn.BatchNorm1d, nn.BatchNorm2d), lambda m, i, out: (m, i[0])) as seen:
            call(self.model, self.params, x)
        if not seen:
            raise ValueError("BN statistics prior needs a model with BatchNorm layers")
        total = 0.0
        for k, (bn, z) in enumerate(seen):
            dims = [0] + list(range(2, z.dim()))
            term = torch.linalg.vector_norm(z.mean(dims) - bn.running_mean) \
                + torch.linalg.vector_norm(z.var(dims, unbiased=False) - bn.running_var)
            total = total + (self.first * term if k == 0 and self.first != 1.0 else term)
        return total

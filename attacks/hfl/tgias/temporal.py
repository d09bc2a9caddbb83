"""Temporal gradients in one trial: the same dummy batch's FedSGD gradient at T global weights w_1..w_T,
and their alpha-weighted match (TGIAs-RO Eq. 5).

The context's `params` are stacked along a leading T dimension (name -> (T, ...)); buffers and labels are
shared. `vectorised=True` evaluates the T gradients under one `vmap` (the engine's batched mode),
False one after another (its sequential mode); both give the same values.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from torch import nn
from torch.func import vmap

from attacks.kit import FedSGDGradient, per_layer_weights, weighted_sum

__all__ = ["TemporalFedSGDGradient", "TemporalSquaredL2"]


@dataclass(frozen=True)
class TemporalFedSGDGradient:
    """[g_l (T, ...)] per layer: grad_{w_t} CE(F(x; w_t), y) for every t."""
    model: nn.Module
    vectorised: bool = True

    def __call__(self, variables: Mapping[str, object], context: Mapping[str, object]) -> list[torch.Tensor]:
        single = FedSGDGradient(self.model)
        stacked = context["params"]
        if self.vectorised:
            return list(vmap(lambda p: tuple(single(variables, {**context, "params": p})))(stacked))
        temporal = next(iter(stacked.values())).shape[0]
        per_t = [single(variables, {**context, "params": {k: v[t] for k, v in stacked.items()}})
                 for t in range(temporal)]
        return [torch.stack(layer) for layer in zip(*per_t)]


@dataclass(frozen=True)
class TemporalSquaredL2:
    """sum_t alpha_t sum_l omega_l || s_l[t] - o_l[t] ||^2 (Eq. 5 with Eq. 4's layer-weighted f_t)."""
    alpha: Sequence[float]
    weights: Sequence[float] | None = None

    def __call__(self, simulated: Sequence[torch.Tensor], observed: Sequence[torch.Tensor]) -> torch.Tensor:
        weights = per_layer_weights(self.weights, len(simulated))
        alpha = _constant(tuple(self.alpha), simulated[0].dtype, simulated[0].device)
        per_t = weighted_sum((w, (s - o).square().flatten(1).sum(1)) for w, s, o in zip(weights, simulated, observed))
        return (alpha * per_t).sum()


@functools.lru_cache(maxsize=16)
def _constant(values: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The weights as a tensor, built once per dtype and device (not a host-to-device copy per evaluation)."""
    return torch.tensor(values, dtype=dtype, device=device)

"""The parts of the engine's vocabulary only FedLeak uses (Fan et al., USENIX Security 2025, Sec. 4).

- `GlobalTopMagnitude` / `TopMagnitude`: the element subset Lambda of partial gradient matching, the
  top-R% entries of the dummy gradient by magnitude (over the whole gradient, or per layer);
- `GradientBlend`: gradient regularisation, a step hook that blends the gradient at x with the one at a
  probe point x + k grad/||grad|| (Eqs. 12-13), on the same subset (Alg. 1 line 8);
- `ActivationL1` / `activation_l1`: the L1 of intermediate (ReLU) outputs (Sec. 4.4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn

from attacks.kit import Hook, Tensors, call, recording, total

__all__ = ["TopMagnitude", "GlobalTopMagnitude", "GradientBlend", "ActivationL1", "activation_l1"]


@dataclass(frozen=True)
class TopMagnitude:
    """Element subset: per layer, the `fraction` of entries with the largest |simulated| (FedLeak's Lambda).

    Recomputed at every evaluation from the dummy gradient, and not differentiated through.
    """
    fraction: float

    def __call__(self, simulated: Tensors, observed: Tensors) -> list[torch.Tensor]:
        masks = []
        for s in simulated:
            magnitude = s.detach().abs()
            n = magnitude.numel()
            k = max(1, int(round(self.fraction * n)))
            # the k-th largest |s|: kthvalue selects it (the same element top-k's last value is) in linear
            # time, 3-10x faster than top-k's partial sort at FedLeak's R = 50%, and under vmap too
            threshold = torch.kthvalue(magnitude.flatten(), n - k + 1).values
            masks.append((magnitude >= threshold).to(s.dtype))
        return masks


@dataclass(frozen=True)
class GlobalTopMagnitude:
    """Element subset: the ceil(`fraction` * n) entries with the largest |simulated| over the whole
    flattened gradient, all layers together (FedLeak's Lambda as Alg. 1 states it; `TopMagnitude` is the
    per-layer variant). Recomputed at every evaluation from the dummy gradient, not differentiated through.
    """
    fraction: float

    def __call__(self, simulated: Tensors, observed: Tensors) -> list[torch.Tensor]:
        magnitudes = [s.detach().abs() for s in simulated]
        flat = torch.cat([m.reshape(-1) for m in magnitudes])
        n = flat.numel()
        k = min(n, max(1, math.ceil(self.fraction * n)))
        threshold = torch.kthvalue(flat, n - k + 1).values      # linear-time selection, as in TopMagnitude
        return [(m >= threshold).to(s.dtype) for m, s in zip(magnitudes, simulated)]


@dataclass(frozen=True)
class GradientBlend(Hook):
    """FedLeak's gradient regularisation: d = (1 - w) grad D(x) + w grad D(x + k grad D/||grad D||).

    The probe point is taken per trial and per variable; `lookahead=True` probes along -grad instead
    (the paper's appendix example) rather than +grad (its equations). With `same_subset` (Alg. 1 line 8)
    a match over an element subset compares at the probe the elements it chose at x; without, it
    chooses them again at the probe.
    """
    weight: float = 0.7
    k: float = 0.01
    lookahead: bool = False
    same_subset: bool = True

    def on_grads(self, grads, params, grad_at):
        sign = -1.0 if self.lookahead else 1.0
        probes = []
        for p, g in zip(params, grads):
            norm = g.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *[1] * (g.dim() - 1))
            probes.append(p.detach() + sign * self.k * g / norm)
        probe_grads = grad_at(probes)
        return [(1 - self.weight) * g + self.weight * h for g, h in zip(grads, probe_grads)]


@dataclass(frozen=True)
class ActivationL1:
    """sum over the outputs of the given layer kinds of ||F_l(x)||_1 (FedLeak's activation sparsity term)."""
    model: nn.Module
    params: Mapping[str, torch.Tensor]
    kinds: tuple[type, ...] = (nn.ReLU,)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        with recording(self.model, self.kinds) as outputs:
            call(self.model, self.params, x)
        return activation_l1(outputs)


def activation_l1(outputs: list[torch.Tensor]) -> torch.Tensor:
    """sum_l ||F_l||_1 over recorded module outputs: `ActivationL1` without its own forward pass, for
    `Prior(..., on_simulation=True)` with a simulator that records them (`FedSGDGradient(record=...)`)."""
    return total(out.abs().sum() for out in outputs)

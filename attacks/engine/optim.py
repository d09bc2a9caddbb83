"""Optimisers and step hooks for the engine.

Optimiser specs are small frozen records with `build(params)`; the engine owns the loop. Adam and SGD
act element by element, so one optimiser over trial-stacked variables is exactly one optimiser per
trial. L-BFGS is not element-wise, hence `BatchedLBFGS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from attacks.engine.lbfgs import BatchedLBFGS

GradFn = Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]
"""Gradient of the block's per-trial loss at other values of the block's variables."""


@dataclass(frozen=True)
class Adam:
    lr: float
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    amsgrad: bool = False

    def build(self, params: Sequence[torch.Tensor]) -> torch.optim.Optimizer:
        # The fused kernel is several times faster than the default per-tensor loop on CPU and GPU.
        return torch.optim.Adam(params, lr=self.lr, betas=self.betas, eps=self.eps, amsgrad=self.amsgrad,
                                fused=True)


@dataclass(frozen=True)
class SGD:
    lr: float
    momentum: float = 0.0

    def build(self, params: Sequence[torch.Tensor]) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum)


@dataclass(frozen=True)
class LBFGS:
    """torch's L-BFGS defaults (no line search): up to `max_iter` inner iterations per step."""
    lr: float = 1.0
    max_iter: int = 20
    history_size: int = 100
    tolerance_grad: float = 1e-7
    tolerance_change: float = 1e-9

    def build(self, params: Sequence[torch.Tensor]) -> BatchedLBFGS:
        return BatchedLBFGS(params, lr=self.lr, max_iter=self.max_iter, history_size=self.history_size,
                            tolerance_grad=self.tolerance_grad, tolerance_change=self.tolerance_change)


OptimizerSpec = Adam | SGD | LBFGS


@dataclass(frozen=True)
class StepDecay:
    """Multiply the learning rate by `gamma` at the given fractions of the block's total steps
    (Inverting Gradients: x0.1 at 3/8, 5/8 and 7/8 of the run)."""
    fractions: tuple[float, ...] = (3 / 8, 5 / 8, 7 / 8)
    gamma: float = 0.1

    def build(self, optimizer: torch.optim.Optimizer, total_steps: int):
        milestones = [int(f * total_steps) for f in self.fractions]
        return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=self.gamma)


# --- hooks -----------------------------------------------------------------------------------------

class Hook:
    """Transforms gradients before the optimiser step and/or variables after it; identity by default."""
    same_subset = False
    """Whether `grad_at` should reuse the element subset the match chose at the current point."""

    def on_grads(self, grads: list[torch.Tensor], params: Sequence[torch.Tensor], grad_at: GradFn) -> list[torch.Tensor]:
        return grads

    def after_step(self, params: Sequence[torch.Tensor]) -> None:
        return None


@dataclass(frozen=True)
class SignedGradients(Hook):
    """Step along sign(gradient) (Inverting Gradients' signed Adam)."""

    def on_grads(self, grads, params, grad_at):
        return [g.sign() for g in grads]


@dataclass(frozen=True)
class BoxClamp(Hook):
    """Project the block's variables into [low, high] after every step (pixel box [0,1]); with `first`,
    only the block's first `first` variables (the images, not label logits updated beside them)."""
    low: float = 0.0
    high: float = 1.0
    first: int | None = None

    def after_step(self, params):
        with torch.no_grad():
            for p in params[:self.first]:
                p.clamp_(self.low, self.high)


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

"""Optimisers and step hooks for the engine.

Optimiser specs are small frozen records with `build(params)`; the engine owns the loop. Adam and SGD
act element by element, so one optimiser over trial-stacked variables is exactly one optimiser per
trial. L-BFGS is not element-wise, hence `BatchedLBFGS`.
"""
from __future__ import annotations

from collections import Counter
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

    def build(self, params: Sequence[torch.Tensor]) -> "FusedAdam":
        return FusedAdam(params, self)


class FusedAdam:
    """`torch.optim.Adam(fused=True)` over a fixed list of same-device, same-dtype tensors that all get a
    gradient every step, as the engine steps its variables: the same state and the same fused kernel call
    with the same arguments (bit for bit), without `Optimizer.step`'s per-call wrapping (profiler record,
    hook chains, grouping by device and dtype). That wrapping was about 40 us of a 470 us UnSplit step on
    the CPU (the kernel itself 6 us). The fused kernel is several times faster than torch's default
    per-tensor loop on CPU and GPU. `param_groups[0]["lr"]` is the learning rate, as `StepDecay` sets it."""

    def __init__(self, params: Sequence[torch.Tensor], spec: Adam):
        self.params, self.spec = list(params), spec
        if len({(p.device, p.dtype) for p in self.params}) > 1:
            raise ValueError("FusedAdam steps tensors of one device and dtype")
        self.param_groups = [{"lr": spec.lr}]
        zeros = lambda: [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avgs, self.exp_avg_sqs = zeros(), zeros()
        self.max_exp_avg_sqs = zeros() if spec.amsgrad else []
        # torch's fused Adam counts steps in float32 0-dim tensors on the parameters' device
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]

    @torch.no_grad()
    def step(self) -> None:
        torch._foreach_add_(self.steps, 1)
        torch._fused_adam_(self.params, [p.grad for p in self.params], self.exp_avgs, self.exp_avg_sqs,
                           self.max_exp_avg_sqs, self.steps, amsgrad=self.spec.amsgrad,
                           lr=self.param_groups[0]["lr"], beta1=self.spec.betas[0], beta2=self.spec.betas[1],
                           weight_decay=0.0, eps=self.spec.eps, maximize=False, grad_scale=None, found_inf=None)


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

    def build(self, optimizer, total_steps: int) -> "_Decay":
        return _Decay(optimizer, Counter(int(f * total_steps) for f in self.fractions), self.gamma)


class _Decay:
    """`torch.optim.lr_scheduler.MultiStepLR`'s schedule, the same learning rates bit for bit (at step n,
    lr * gamma ** (milestones at n), from step 0 at construction), on any optimiser with `param_groups`."""

    def __init__(self, optimizer, milestones: Counter, gamma: float):
        self.optimizer, self.milestones, self.gamma, self.n = optimizer, milestones, gamma, -1
        self.step()

    def step(self) -> None:
        self.n += 1
        if self.n in self.milestones:
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] * self.gamma ** self.milestones[self.n]


# --- hooks -----------------------------------------------------------------------------------------

class Hook:
    """Transforms gradients before the optimiser step and/or variables after it; identity by default."""
    same_subset = False
    """Whether `grad_at` should reuse the element subset the match chose at the current point."""
    all_trials = False
    """Whether it reads every trial at once (GradInversion's group consistency): the trials then run batched."""

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

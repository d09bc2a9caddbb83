"""The parts only GradInversion uses (Yin et al., CVPR 2021): a learning rate that warms up then anneals on a
cosine, Langevin noise after every step, and group consistency across restarts."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from attacks.kit import Hook

__all__ = ["CosineDecay", "Langevin", "GroupConsistency", "cosine_factor"]


def cosine_factor(step: int, total: int, warmup: int) -> float:
    """The learning rate's factor at step `step` (0-based) of `total`: linear warm-up over `warmup` steps, then a
    cosine from 1 down to 0 at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(total - warmup, 1)
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / span))


@dataclass(frozen=True)
class CosineDecay:
    """A block's step schedule (as `attacks.engine.StepDecay`): the learning rate times `cosine_factor`."""
    warmup: int = 50

    def build(self, optimizer, total_steps: int) -> "_Cosine":
        return _Cosine(optimizer, total_steps, self.warmup)


class _Cosine:
    def __init__(self, optimizer, total: int, warmup: int):
        self.optimizer, self.total, self.warmup, self.n = optimizer, total, warmup, -1
        self.base = [group["lr"] for group in optimizer.param_groups]
        self.step()

    def step(self) -> None:
        self.n += 1
        factor = cosine_factor(self.n, self.total, self.warmup)
        for group, base in zip(self.optimizer.param_groups, self.base):
            group["lr"] = base * factor


@dataclass(eq=False)
class Langevin(Hook):
    """After every step, x += scale * lr_t * N(0, 1) with lr_t the step's learning rate (the schedule above):
    GradInversion's Langevin updates. The noise is drawn on the CPU from its own seeded stream, so a seed gives
    the same draws on every device."""
    scale: float
    lr: float
    total: int
    warmup: int
    seed: int = 0
    step: int = field(default=0, init=False)
    draws: torch.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.draws = torch.Generator().manual_seed(self.seed)

    def after_step(self, params):
        size = self.scale * self.lr * cosine_factor(self.step, self.total, self.warmup)
        self.step += 1
        with torch.no_grad():
            x = params[0]
            # drawn into pinned memory for a GPU: a copy from pageable memory would wait for the GPU every step
            noise = torch.randn(x.shape, generator=self.draws, dtype=x.dtype, pin_memory=x.is_cuda)
            noise = noise.to(x.device, non_blocking=True)
            x.add_(noise, alpha=size)


@dataclass(frozen=True)
class GroupConsistency(Hook):
    """Adds weight * grad ||x_r - mean_r x_r||^2 to each restart's image gradient, the mean held fixed: the pull of
    GradInversion's group consistency toward the restarts' consensus (its registration of each image to the
    consensus is not done). It sees every restart at once, so the restarts run batched."""
    weight: float
    all_trials = True

    def on_grads(self, grads, params, grad_at):
        x = params[0].detach()
        return [grads[0] + 2 * self.weight * (x - x.mean(0, keepdim=True)), *grads[1:]]

"""Fu et al.'s malicious local optimiser (Sec. 4.2), as the lab writes it: SGD with momentum whose every update
element is scaled up while it keeps its direction, so the attacker's bottom model learns faster than its peers'
and the top model comes to lean on it (more of the task is then in the bottom model, for model completion).

    d_t = mu d_{t-1}' + grad_t                       (momentum, d' the unscaled direction)
    r_t = clip(1 + gamma d_t / d_{t-1}', 1, r_max)   (elementwise; 1 at the first step)
    theta <- theta - lr r_t d_t
"""
from __future__ import annotations

import torch

__all__ = ["MaliciousSGD"]


class MaliciousSGD(torch.optim.Optimizer):
    def __init__(self, params, lr: float, momentum: float = 0.9, gamma: float = 1.0, max_ratio: float = 5.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "gamma": gamma, "max_ratio": max_ratio})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                last = state.get("direction")
                direction = p.grad.clone() if last is None else last * group["momentum"] + p.grad
                ratio = torch.ones_like(direction) if last is None else \
                    (1 + group["gamma"] * direction / last.where(last.abs() > 1e-12, torch.full_like(last, 1e-12))
                     ).clamp(1.0, group["max_ratio"])
                state["direction"] = direction
                p.add_(ratio * direction, alpha=-group["lr"])

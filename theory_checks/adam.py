"""Adam as the paper writes it (JAST, Appendix A.4.2), beside torch's standard Adam.

The recursion, per coordinate, with g_k = grad L(W_k):

    m_0 = g_0,                          D_0^2 = g_0 * g_0
    m_k = b1 m_{k-1} + (1 - b1) g_k,    D_k^2 = b2 D_{k-1}^2 + (1 - b2) g_k * g_k     (k >= 1)
    W_{k+1} = W_k - lr D_k^{-1} m_k

No bias correction and no epsilon. Two readings are pinned down here:

- The paper indexes the moment update with grad L(W_k) on the right of m_{k+1}; read literally, the
  step from W_k would use only g_0..g_{k-1} (the first two steps both use g_0). We take m_k and D_k
  to include g_k, as the bias-corrected sums the paper writes just before (sum over i = 1..k) do.
  (The literal lagged reading does not settle with lr 0.6 on Example 1; it oscillates.)
- Without an epsilon a coordinate whose gradients have all been 0 has m = D = 0; its step is 0
  (the limit), not 0/0.

`paper_adam_init` / `paper_adam_update` / `paper_adam_direction` are pure functions;
`PaperAdam` applies them as a `torch.optim.Optimizer`, so the protocol's client can train with it,
and keeps m_k and D_k in its state for the Lemma 4-6 checks to read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from vfl.protocol import make_optimizer

PAPER_BETAS = (0.9, 0.999)


@dataclass(frozen=True)
class Moments:
    """m_k and D_k^2 of the paper's recursion."""
    m: torch.Tensor
    d2: torch.Tensor

    @property
    def d(self) -> torch.Tensor:
        """The diagonal of the preconditioner D_k."""
        return self.d2.sqrt()


def paper_adam_init(grad: torch.Tensor) -> Moments:
    """m_0 = g_0, D_0^2 = g_0 * g_0."""
    return Moments(grad.clone(), grad * grad)


def paper_adam_update(moments: Moments, grad: torch.Tensor, betas: tuple[float, float] = PAPER_BETAS) -> Moments:
    """m_k = b1 m_{k-1} + (1 - b1) g_k;  D_k^2 = b2 D_{k-1}^2 + (1 - b2) g_k^2."""
    b1, b2 = betas
    return Moments(b1 * moments.m + (1 - b1) * grad, b2 * moments.d2 + (1 - b2) * grad * grad)


def paper_adam_direction(moments: Moments) -> torch.Tensor:
    """D_k^{-1} m_k, with 0 where D_k = 0 (there m_k = 0 too)."""
    d = moments.d
    return torch.where(d > 0, moments.m / torch.where(d > 0, d, torch.ones_like(d)), torch.zeros_like(d))


class PaperAdam(torch.optim.Optimizer):
    """The paper's Adam recursion as an optimiser; `state[p]["moments"]` holds m_k and D_k^2 after step k."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, betas: tuple[float, float] = PAPER_BETAS):
        super().__init__(params, {"lr": lr, "betas": tuple(betas)})

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("PaperAdam does not take a closure")
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                previous = state.get("moments")
                moments = (paper_adam_init(p.grad) if previous is None
                           else paper_adam_update(previous, p.grad, group["betas"]))
                state["moments"] = moments
                p.sub_(group["lr"] * paper_adam_direction(moments))
        return None


OPTIMIZERS = ("sgd", "momentum", "adam", "adam-amsgrad", "paper-adam")


def build_optimizer(name: str, params: Iterable[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    """The protocol's optimisers (`vfl.protocol.make_optimizer`) plus `paper-adam`."""
    if name == "paper-adam":
        return PaperAdam(params, lr)
    return make_optimizer(name, params, lr)

"""AGIC's settings as the AWA paper runs it as a baseline (presets in `attacks.hfl.agic`)."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import ITERATIONS, RESTARTS, EngineSettings, option, trajectory_option

__all__ = ["AGICSettings"]


@dataclass(frozen=True, kw_only=True)
class AGICSettings(EngineSettings):
    """AGIC (Xu et al. 2022, arXiv 2204.13784) as the AWA paper runs it as a baseline.

        G(x, y) = one full-batch SGD step on the client's whole data at theta_0 (every mini-batch of every
                  epoch combined; the scale does not matter under a cosine)
        x* = argmin_x  1 - cos_w(G(x, y), u)

    Our choice for the weights, which the AWA paper does not give: the conv and fully-connected layers in
    forward order get weights rising linearly from 1 to `last_weight` (None: their count K, so layer k
    weighs k); BN layers weigh 1. Adam lr 0.1 and the iteration count as AWA (the paper compares at equal
    budget), labels known, no prior, x ~ U(0, 1) as AWA.
    """
    iterations: int = option(1_000, "Adam steps.", ITERATIONS)
    restarts: int = option(1, "independent restarts; the lowest-loss one is the answer.", RESTARTS)
    lr: float = 0.1
    last_weight: float | None = None
    initial: str = "uniform"
    """Dummy start: uniform (x ~ U(0, 1)) or normal (x ~ N(0, 1)), as AWA."""
    trajectory: int = trajectory_option()

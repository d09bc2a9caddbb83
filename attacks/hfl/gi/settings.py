"""GradInversion's settings, with where every number comes from (presets in `attacks.hfl.gi`)."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import ITERATIONS, RESTARTS, EngineSettings, SplitlabError, number, option

__all__ = ["GISettings"]


@dataclass(frozen=True, kw_only=True)
class GISettings(EngineSettings):
    """GradInversion (Yin, Mallya, Vahdat, Alvarez, Kautz, Molchanov, "See through Gradients: Image Batch
    Recovery via GradInversion", CVPR 2021):

        x* = argmin_x  scale * sum_l ||grad_l L(x, y) - g_l||^2 + a_tv TV(x) + a_l2 ||x||^2
                       + a_bn sum_l (||mu_l(x) - mu_l^BN|| + ||s^2_l(x) - s^2_l^BN||)      (the first BN layer x10)
                       + a_group sum_r ||x_r - mean_r x_r||^2                               (group consistency)

    labels by its rule (the B classes whose final-layer gradient rows have the most negative minima) unless
    the server knows them; Adam 0.1 warming up over 50 steps then annealed on a cosine; Langevin noise of
    scale * lr_t after every step; images boxed to [0, 1]; x ~ N(0, 1).

    Sources: the paper's weights (a_tv 1e-4, a_l2 1e-6, a_bn 0.1 with the first BN layer weighted 10, Langevin
    0.2) and 20,000 iterations, as breaching's `seethroughgradients` configuration records them (gradient
    match scaled 1e-4, warm-up 50, cosine decay; it lowers the Langevin scale to 0.01 and has no group term).
    The BN statistics are the global model's running statistics (the server has them; FedLeak does not say
    whether its GI baseline was given the client's).
    """
    iterations: int = option(20_000, "Adam steps.", ITERATIONS)
    restarts: int = option(1, "independent restarts (with --group-weight, the group whose consensus pulls them).",
                           RESTARTS)
    lr: float = 0.1
    warmup: int = 50
    scale: float = 1e-4
    """Weight of the squared-L2 gradient match."""
    tv: float = option(1e-4, "TV weight.", number(low=0))
    l2: float = 1e-6
    bn: float = option(0.1, "BatchNorm-statistics weight (0: off, for a model without BN).",
                       number(low=0))
    first_bn: float = 10.0
    langevin: float = option(0.2, "Langevin noise scale, times the learning rate (0: off).",
                             number(low=0, high=10))
    group_weight: float = option(0.0, "group consistency: pull of each restart toward their mean (0: off; needs "
                                 "--restarts > 1).", number(low=0))

    def check(self) -> None:
        if self.group_weight > 0 and self.restarts < 2:
            raise SplitlabError(f"--group-weight pulls the restarts toward their mean, so it needs --restarts 2 or "
                                f"more (got {self.restarts}); raise --restarts or drop --group-weight")

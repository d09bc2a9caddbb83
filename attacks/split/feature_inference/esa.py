"""The equality-solving attack (ESA; Luo, Wu, Xiao, Ooi. Feature Inference Attack on Model Predictions in Vertical
Federated Learning. ICDE 2021) on a logistic regression.

The joint model's logits are z = A x_t + c(x_adv): linear in the passive party's features x_t (A its weights,
c the attacker's part and every bias). The prediction v = softmax(z) gives the logit differences exactly,

    ln v_k - ln v_0 = z_k - z_0,       k = 1 .. K-1,

so x_t solves K - 1 linear equations (A_k - A_0) x_t = (ln v_k - ln v_0) - (c_k - c_0). With no more unknowns
than equations the solution is exact; with more, the attack takes the minimum-norm solution (the pseudo-inverse),
as the paper does. A and c are read off the joint model (which the adversary holds) by differentiation, which is
exact for a linear model.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from attacks.kit import EngineOptions, QUIET, Reconstruction, SplitlabError
from attacks.split.feature_inference.settings import EsaSettings
from attacks.split.feature_inference.view import PredictionView, require_view

__all__ = ["EqualitySolving"]


@dataclass(frozen=True)
class EqualitySolving:
    settings: EsaSettings = EsaSettings(preset="esa.luo")
    name = "esa"

    def check_victim(self, victim) -> None:
        """Refuse, before anything is trained, a model that is no logistic regression."""
        if victim.arch != "tabular-lr" or victim.aggregate != "sum":
            raise SplitlabError(f"esa solves the equations of a logistic regression; this model is --arch "
                                f"{victim.arch} --aggregate {victim.aggregate}: use --arch tabular-lr --aggregate sum")

    def __call__(self, view: PredictionView, *, seed: int = 0, engine: EngineOptions = QUIET) -> Reconstruction:
        view = require_view(self.name, view)
        if not view.linear:
            raise SplitlabError("esa solves the equations of a logistic regression: the view's model is not one")
        start = time.perf_counter()
        model = copy.deepcopy(view.model).double()
        base = view.own.double()
        shape = (1, *base.shape[1:-1], len(view.target_columns))
        with torch.enable_grad():
            probe = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
            logits = model(_first(view, probe))
            weights = torch.stack([torch.autograd.grad(logits[0, k], probe, retain_graph=True)[0].flatten()
                                   for k in range(logits.shape[1])])                     # A: (K, D)
        with torch.no_grad():
            offset = model(base)                                                          # c: (N, K)
            log_v = view.probabilities.double().clamp_min(torch.finfo(torch.float64).tiny).log()
            rhs = (log_v[:, 1:] - log_v[:, :1]) - (offset[:, 1:] - offset[:, :1])          # (N, K-1)
            system = weights[1:] - weights[:1]                                            # (K-1, D)
            solved = rhs @ torch.linalg.pinv(system).T                                    # (N, D) minimum norm
        return Reconstruction(
            attack=self.name, preset=self.settings.preset, trials=solved.float().unsqueeze(0), features=True,
            loss=torch.zeros(1), history={}, diverged=torch.zeros(1, dtype=torch.bool),
            seconds=time.perf_counter() - start, steps=1, mode="closed form",
            extras={"equations": int(system.shape[0]), "unknowns": int(system.shape[1]),
                    "exact": bool(system.shape[0] >= system.shape[1])})


def _first(view: PredictionView, target: torch.Tensor) -> torch.Tensor:
    """The first prediction sample with `target` in its unknown columns (the weights do not depend on which)."""
    x = view.own[:1].double().clone()
    x[..., view.target_columns] = target
    return x

"""Marvell's noise design (Li et al., "Label Leakage and Protection in Two-party Split Learning", ICLR 2022,
Sec. 4): the covariances of class-dependent Gaussian noise that make the perturbed positive and negative cut
gradients hardest to tell apart under a power budget. Pure maths; the defence that draws the noise is
`vfl.defences.send_back.Marvell`.

The label party models each class's gradients in a batch as Gaussian: means m1 (positive), m0 (negative),
isotropic coordinate variances v and u, in d dimensions, with g = ||m1 - m0||^2. It adds to class k's
gradients noise of covariance

    Sigma_k = (lam1k - lam2k) e e^T + lam2k I,      e = (m1 - m0) / ||m1 - m0||,

variance lam1k along the direction that separates the classes and lam2k in the d - 1 others (so lam2k <=
lam1k). It chooses the four variances to minimise the symmetrised KL divergence between the two perturbed
Gaussians, which bounds every attacker's leak AUC from above,

    KL(P1 || P0) + KL(P0 || P1) = 1/2 [ (u + lam10 + g) / (v + lam11) + (v + lam11 + g) / (u + lam10)
                                        + (d - 1) ((u + lam20) / (v + lam21) + (v + lam21) / (u + lam20)) ] - d,

(each Gaussian's trace ratio against the other's covariance, plus the mean gap in each's metric) subject to
the expected noise power p (lam11 + (d-1) lam21) + (1-p) (lam10 + (d-1) lam20) <= P, p the positive fraction.
The paper sets P = s g (the scale s trades privacy for utility).

The objective is homogeneous of degree 0 in (u, v, g, lam): the lab solves it in units of g, where P = s,
with SLSQP from a few feasible starts, keeping the best.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

__all__ = ["Solution", "sum_kl", "solve"]

_FLOOR = 1e-12
"""Variances are kept above this (in units of g), so a class with one example (zero variance) stays finite."""


@dataclass(frozen=True)
class Solution:
    """The noise variances (in the units of the gradients' squared entries) and the divergence they leave."""
    lam10: float
    lam20: float
    lam11: float
    lam21: float
    sum_kl: float
    """The symmetrised KL divergence of the perturbed class distributions (0: indistinguishable)."""
    sum_kl_before: float
    """The same without noise."""

    @property
    def error_bound(self) -> float:
        """A lower bound on any attacker's balanced error (FPR + FNR) / 2 at telling the classes apart:
        it is at least (1 - TV) / 2, and Pinsker's inequality on either direction of the divergence gives
        TV <= sqrt(sum_kl) / 2."""
        return max(0.0, 0.5 - math.sqrt(max(self.sum_kl, 0.0)) / 4)


def sum_kl(lam10: float, lam20: float, lam11: float, lam21: float, u: float, v: float, d: int, g: float) -> float:
    """KL(P1 || P0) + KL(P0 || P1) of the perturbed class Gaussians (the module docstring's formula)."""
    a0, a1 = u + lam10, v + lam11                   # along the separating direction
    b0, b1 = u + lam20, v + lam21                   # in each of the d - 1 others
    if min(a0, a1) <= 0 or (d > 1 and min(b0, b1) <= 0):
        return math.inf
    along = (a0 + g) / a1 + (a1 + g) / a0
    across = (d - 1) * (b0 / b1 + b1 / b0) if d > 1 else 0.0
    return 0.5 * (along + across) - d


def solve(u: float, v: float, d: int, g: float, p: float, scale: float) -> Solution:
    """The variances minimising `sum_kl` under the power budget P = scale * g (see the module docstring).

    u, v: the negative and positive gradients' mean coordinate variances; d: the dimension; g: the squared
    distance of the class means; p: the positive fraction (0 < p < 1); scale >= 0."""
    if not (0 < p < 1) or d < 1 or g < 0 or u < 0 or v < 0 or scale < 0:
        raise ValueError(f"marvell needs 0 < p < 1, d >= 1, g, u, v, scale >= 0; got p={p}, d={d}, g={g}, "
                         f"u={u}, v={v}, scale={scale}")
    if g == 0:                                       # identical class means: nothing separates them
        return Solution(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    un, vn = max(u / g, _FLOOR), max(v / g, _FLOOR)
    before = sum_kl(0.0, 0.0, 0.0, 0.0, un, vn, d, 1.0)
    if scale == 0:
        return Solution(0.0, 0.0, 0.0, 0.0, before, before)
    weights = np.array([1 - p, (1 - p) * (d - 1), p, p * (d - 1)])        # power of (lam10, lam20, lam11, lam21)
    # SLSQP works on each variance's share of the budget, lam_i = scale * x_i / weights_i, so every variable is of
    # order one whatever d, p and the classes' spreads are
    to_lam = scale / weights

    def objective(x: np.ndarray) -> float:
        value = sum_kl(*(np.maximum(x, 0.0) * to_lam), un, vn, d, 1.0)
        return value if math.isfinite(value) else 1e300

    constraints = [{"type": "ineq", "fun": lambda x: 1.0 - float(x.sum())},
                   {"type": "ineq", "fun": lambda x: x[0] * to_lam[0] - x[1] * to_lam[1]},     # lam20 <= lam10
                   {"type": "ineq", "fun": lambda x: x[2] * to_lam[2] - x[3] * to_lam[3]}]     # lam21 <= lam11
    best = None
    for start in _STARTS:
        found = minimize(objective, start, method="SLSQP", bounds=[(0.0, 1.0)] * 4, constraints=constraints,
                         options={"maxiter": 300, "ftol": 1e-14})
        x = _feasible(np.maximum(found.x, 0.0) * to_lam, weights, scale)
        value = sum_kl(*x, un, vn, d, 1.0)
        if best is None or value < best[1]:
            best = (x, value)
    x, value = best
    lam = [float(t) * g for t in x]
    return Solution(*lam, sum_kl=float(value), sum_kl_before=float(before))


_STARTS = [np.array(x, dtype=float) for x in ([1, 0, 0, 0], [0, 0, 1, 0], [0.5, 0, 0.5, 0], [0.25] * 4,
                                              [0.1, 0.4, 0.1, 0.4], [0.05, 0.05, 0.45, 0.45], [0.45, 0.45, 0.05, 0.05])]
"""Feasible starting shares of the budget: all on one class's axis, both axes, spread evenly, mostly across."""


def _feasible(x: np.ndarray, weights: np.ndarray, scale: float) -> np.ndarray:
    """`x` projected back inside the constraints SLSQP may leave by a rounding error: each class's spread no
    larger than its variance along the axis, the power within the budget."""
    x = x.copy()
    x[1], x[3] = min(x[1], x[0]), min(x[3], x[2])
    power = float(weights @ x)
    return x * (scale / power) if power > scale else x

"""Component checks of the bound (the constants, the FedAvg rate and the Lipschitz composition), each a `CheckResult`.

All run in float64 whatever `dtype` the suite passes (the bound's constants are float64 quantities);
each inequality reports its largest normalised excess LHS - RHS, so a negative `measured` is slack. The
FL setting is the lab's reference one: digits 0 vs 1, binary l2-LogReg (lam = 0.1), N = 10, E = 2, T = 100, 10 seeds,
K = 5 for partial participation.
"""
from __future__ import annotations

import functools
import math

import torch

from theory_checks.bounds.constants import heterogeneity
from theory_checks.bounds.experiment import BoundsConfig, Setting, convergence, curvature, fl_setting
from theory_checks.bounds.fedavg import split_evenly
from theory_checks.bounds.lipschitz import Node, autolip, chain, power_iteration, spectral_norm
from theory_checks.bounds.logreg import LogReg, load_digits
from theory_checks.records import CheckResult
from vfl.runtime import generator


@functools.lru_cache(maxsize=1)
def reference_setting() -> Setting:
    return fl_setting(BoundsConfig(sensitivity=False, trends=False))


def _matrix(rows: int, cols: int, seed: int) -> torch.Tensor:
    return torch.randn(rows, cols, generator=generator(seed), dtype=torch.float64)


def smoothness(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A1: the paper's L >= lambda_max(Hessian L_k) and mu <= lambda_min, at random w and along FedAvg."""
    s = reference_setting()
    eig = curvature(s)
    excess = max(max((e["lambda_max"] - s.L) / s.L for e in eig.values()),
                 max((s.mu - e["lambda_min"]) / s.mu for e in eig.values()))
    return CheckResult.judge("bounds-smoothness", "paper L >= lambda_max and mu <= lambda_min of every local Hessian",
                             excess, 0.0, "holds", {"L": s.L, "mu": s.mu, **eig})


def step_size(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A2: eta_1 <= 1/(4L), eta_t non-increasing, eta_t <= 2 eta_{t+E} (the proof's requirements)."""
    s = reference_setting()
    eta, E = s.full.eta, s.full.local_steps
    first = (float(eta[0]) - 1 / (4 * s.L)) * 4 * s.L
    increase = float((eta[1:] - eta[:-1]).max() / eta[0])
    doubling = float(((eta[:-E] - 2 * eta[E:]) / eta[:-E]).max())
    return CheckResult.judge("bounds-step-size", "eta_1 <= 1/(4L), eta_t non-increasing, eta_t <= 2 eta_{t+E}",
                             max(first, increase, doubling), 0.0, "holds",
                             {"eta_1": float(eta[0]), "one_over_4L": 1 / (4 * s.L), "gamma": s.gamma,
                              "eta_1_excess": first, "increase": increase, "doubling_excess": doubling})


def power_method(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A6: Alg. 3's power iteration within 1e-4 (relative) of the SVD's sigma_max, and never above it."""
    shapes = [(64, 128), (64, 64), (64, 192), (10, 300)]
    gaps = []
    for k, (r, c) in enumerate(shapes):
        m = _matrix(r, c, k)
        exact = spectral_norm(m, "svd")
        gaps.append((power_iteration(lambda v, m=m: m @ v + 1.0, c, seed=k) - exact) / exact)
    measured = max(abs(g) for g in gaps)
    return CheckResult.judge("bounds-power-iteration", "power iteration within 1e-4 of the SVD sigma_max",
                             measured, 1e-4, "holds", {"relative_gaps": gaps}, holds=measured <= 1e-4
                             and max(gaps) <= 1e-12)


def autolip_mlp(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A7 / Lemma 1: AutoLip on an MLP with 1-Lipschitz activations equals prod_h ||M_h||_2."""
    matrices = [_matrix(30, 20, 10), _matrix(40, 30, 11), _matrix(5, 40, 12)]
    product = math.prod(float(torch.linalg.matrix_norm(m, ord=2)) for m in matrices)
    got = autolip(chain(matrices), {"input": 1.0}, {"input": 20})["layer3"]
    return CheckResult.judge("bounds-autolip-mlp", "AutoLip(MLP) = prod ||M_h||_2 (Lemma 1)",
                             abs(got - product) / product, 1e-10, "holds", {"autolip": got, "product": product})


def autolip_residual(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A7: AutoLip on the residual block x + f(x), f = M_2 ReLU(M_1 x), is 1 + L_f (sum over predecessors)."""
    m1, m2 = _matrix(16, 16, 20), _matrix(16, 16, 21)
    f = chain([m1, m2])
    L_f = autolip(f, {"input": 1.0}, {"input": 16})["layer2"]
    block = f + [Node("out", ("input", "layer2"), affine=lambda x, fx: x + fx)]
    got = autolip(block, {"input": 1.0}, {"input": 16})["out"]
    return CheckResult.judge("bounds-autolip-residual", "AutoLip(x + f(x)) = 1 + AutoLip(f)",
                             abs(got - (1 + L_f)) / (1 + L_f), 1e-10, "holds", {"autolip": got, "L_f": L_f})


def idlg_labels(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A8: iDLG's sign rule recovers every single-sample label (binary 0/1 and softmax 0/1/2, x >= 0), at
    random weights and at the FedAvg models."""
    accuracies = {}
    for kind, digits in (("binary", (0, 1)), ("softmax", (0, 1, 2))):
        data = load_digits(digits)
        model = LogReg(kind, data.dim, classes=len(digits))
        w = torch.cat([torch.randn(8, model.params, generator=generator(30), dtype=torch.float64),
                       reference_setting().full.global_w[0, ::20]]) if kind == "binary" else \
            torch.randn(8, model.params, generator=generator(31), dtype=torch.float64)
        g = model.sample_grads(w[:, None], data.flat[None], data.labels[None])
        accuracies[kind] = float((model.idlg_label(w[:, None], g) == data.labels[None]).double().mean())
    return CheckResult.judge("bounds-idlg-labels", "iDLG's sign rule labels 100% of single samples",
                             1 - min(accuracies.values()), 0.0, "holds", accuracies)


def gamma_nonnegative(dtype: torch.dtype = torch.float64) -> CheckResult:
    """A4: Gamma = L* - sum_k p_k L_k* >= 0 for even splits into N = 2, 5, 10, 20 devices."""
    data = load_digits((0, 1))
    model = LogReg("binary", data.dim)
    gammas = {n: heterogeneity(model, split_evenly(data, n))[0] for n in (2, 5, 10, 20)}
    return CheckResult.judge("bounds-gamma-nonnegative", "Gamma >= 0 (Newton minima)", -min(gammas.values()), 0.0,
                             "holds", {"Gamma": gammas})


def fedavg_rate(dtype: torch.dtype = torch.float64) -> CheckResult:
    """B4: mean over 10 seeds of ||w_t - w*||^2 <= v / (gamma + t) at every SGD step, full participation
    (Theorem 1's B) and partial with K = 5 draws with replacement (Theorem 2's B + C)."""
    s = reference_setting()
    full, partial = convergence(s.full, s.full_constants), convergence(s.partial, s.partial_constants)
    return CheckResult.judge("bounds-fedavg-rate", "mean ||w_t - w*||^2 <= v/(gamma+t) at every step, full and partial",
                             max(full["max_ratio"], partial["max_ratio"]) - 1, 0.0, "holds",
                             {"full": full, "partial": partial})


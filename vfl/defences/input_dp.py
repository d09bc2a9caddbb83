"""Differential privacy on the feature party's input (the JAST paper's DP baseline): Gaussian noise on every input
the client sends (training batches and attacked inputs), sigma from the analytic Gaussian mechanism (Balle & Wang
2018, via `autodp`) for (epsilon, delta) and an L2 sensitivity estimated as the JAST code does (below)."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from vfl.defences.base import ClientDefence, SeededNoise, seed_option
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation, Where
from vfl.errors import SplitlabError
from vfl.options import number, option, optional

__all__ = ["DPInputNoise", "analytic_gaussian_sigma", "estimate_sensitivity", "SPEC", "DP_EPSILON", "DP_DELTA",
           "CALIBRATION_SECONDS"]

DP_EPSILON, DP_DELTA = 6.0, 0.5
"""input-dp's defaults when the spec gives none: the JAST DP experiments (epsilon 6, delta 0.5)."""

CALIBRATION_SECONDS = 10.0
"""The calibration takes milliseconds where its inputs are bounded (below); past this it is stuck."""


@dataclass(frozen=True, kw_only=True)
class InputDPSettings(DefenceSettings):
    """autodp's calibration loops forever on nan/inf, on some larger epsilons (15 with delta 0.99, 20 with 0.9)
    and overflows above epsilon ~700; below delta ~1e-10 its tolerance makes sigma wrong. The ranges keep it to
    epsilon in [1e-3, 10] and delta in [1e-10, 0.99], where a dense grid converged in milliseconds and the
    inverse (autodp's get_eps_ana_gaussian) gave epsilon back within 0.04%."""
    epsilon: float | None = option(None, f"Privacy budget epsilon (default {DP_EPSILON:g}, the JAST paper's).",
                                   optional(number(low=1e-3, high=10)))
    delta: float | None = option(None, f"Privacy budget delta (default {DP_DELTA:g}, the JAST paper's).",
                                 optional(number(low=1e-10, high=0.99)))
    sigma: float | None = option(None, "The noise scale itself, instead of calibrating it from epsilon and delta.",
                                 optional(number(low=0)))
    sensitivity: float | None = option(None, "L2 sensitivity (default: estimated on the training inputs as the "
                                       "JAST code does).", optional(number(low=0, low_open=True)))
    seed: int = seed_option("the noise (and of the sensitivity estimate)")


def _unit_sigma(epsilon: float, delta: float) -> float:
    """autodp's analytic Gaussian calibration for sensitivity 1 (its bisection stops only within 1e-12 of delta:
    the ranges above keep it finite)."""
    from autodp.calibrator_zoo import ana_gaussian_calibrator
    from autodp.mechanism_zoo import ExactGaussianMechanism

    return float(ana_gaussian_calibrator()(ExactGaussianMechanism, epsilon, delta, [[0, 1000]]).params["sigma"])


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise scale of the analytic Gaussian mechanism (Balle & Wang 2018, Alg. 1) for L2 sensitivity.

    Runs the calibration in a daemon thread bounded by `CALIBRATION_SECONDS`: a stuck search cannot be
    interrupted, but it no longer hangs the command (the process exits with the error)."""
    epsilon, delta = SPEC.checked("epsilon", epsilon), SPEC.checked("delta", delta)
    sensitivity = SPEC.checked("sensitivity", sensitivity)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(_calibrate_or_error(epsilon, delta)), daemon=True)
    worker.start()
    worker.join(CALIBRATION_SECONDS)
    if not result:
        raise SplitlabError(f"input-dp calibration for epsilon={epsilon:g}, delta={delta:g} did not finish in "
                            f"{CALIBRATION_SECONDS:g} s; give the noise scale directly with input-dp:sigma=S")
    if isinstance(result[0], Exception):
        raise SplitlabError(f"input-dp calibration for epsilon={epsilon:g}, delta={delta:g} failed "
                            f"({type(result[0]).__name__}); give the noise scale directly with input-dp:sigma=S")
    return result[0] * sensitivity


def _calibrate_or_error(epsilon: float, delta: float) -> float | Exception:
    try:
        return _unit_sigma(epsilon, delta)
    except Exception as exc:            # reported in the caller's thread as a SplitlabError
        return exc


def estimate_sensitivity(images: torch.Tensor, batch_size: int = 64, seed: int = 0) -> float:
    """The JAST code's L2 "sensitivity": the element-wise mean of all full training batches (in a
    seeded shuffled order) is the "average batch" X; X' is X with one random row zeroed; the
    estimate is ||X - X'||_F, the norm of that row. (This is a heuristic, not a bound on the true
    global sensitivity; it is what the paper's sigma values come from.)"""
    g = torch.Generator().manual_seed(seed)
    flat = images.flatten(1).double()
    order = torch.randperm(len(flat), generator=g)
    full = len(flat) // batch_size * batch_size
    average_batch = flat[order[:full]].view(-1, batch_size, flat.shape[1]).mean(0)
    row = int(torch.randint(batch_size, (1,), generator=g))
    return float(average_batch[row].norm())


class DPInputNoise(SeededNoise, ClientDefence):
    """x -> x + N(0, sigma^2) per input element, on every input the client sends."""

    name = "input-dp"

    def __init__(self, sigma: float, epsilon: float | None = None, delta: float | None = None,
                 sensitivity: float | None = None, seed: int = 0):
        super().__init__(sigma, seed)
        self.epsilon, self.delta, self.sensitivity = epsilon, delta, sensitivity

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x + self.noise_like(x)


def build(s: InputDPSettings, where: Where) -> DPInputNoise:
    if s.sigma is not None:
        return DPInputNoise(s.sigma, seed=s.seed)
    epsilon = DP_EPSILON if s.epsilon is None else s.epsilon
    delta = DP_DELTA if s.delta is None else s.delta
    sensitivity = s.sensitivity
    if sensitivity is None:
        if where.train_images is None:
            raise SplitlabError("input-dp needs training images to estimate its sensitivity, or sensitivity=<value>")
        sensitivity = estimate_sensitivity(where.train_images, seed=s.seed)
    return DPInputNoise(analytic_gaussian_sigma(epsilon, delta, sensitivity), epsilon, delta, sensitivity, s.seed)


SPEC = DefenceSpec(
    name="input-dp", point="input", title="Gaussian noise on every input the feature party sends, calibrated to "
    "(epsilon, delta) by the analytic Gaussian mechanism", paper="Semenov et al. (JAST, arXiv 2412.11689), its DP "
    "baseline; Balle & Wang, Improving the Gaussian Mechanism for Differential Privacy (ICML 2018)",
    settings=InputDPSettings, build=build, example="input-dp:epsilon=6,delta=0.5", needs=("train-images",),
    zero={"sigma": 0.0}, strengths=({"epsilon": 10.0}, {"epsilon": 6.0}, {"epsilon": 1.0}),
    deviations=(Deviation("sensitivity", "the L2 sensitivity of the mechanism", "the JAST code's estimate (the norm "
                          "of one row of the average training batch) unless sensitivity= is given",
                          "the paper's sigma values come from it; it is a heuristic, not a bound"),))

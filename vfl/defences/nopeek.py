"""NoPeek (Vepakomma, Singh, Gupta, Raskar, NoPeek: Information leakage reduction to share activations in
distributed deep learning, ICDMW 2020): the feature party adds alpha * DCOR(X, Z) to its training loss, the sample
distance correlation between the raw inputs X of a batch and the activations Z it sends, so that its activations
keep less of its inputs and a reconstruction from them (UnSplit, a model-inversion attacker) recovers less.

    a_ij = ||x_i - x_j||, A = a double-centred;  b_ij = ||z_i - z_j||, B likewise
    dCov^2(X, Z) = mean(A * B);  DCOR = sqrt(dCov^2(X, Z) / sqrt(dCov^2(X, X) dCov^2(Z, Z)))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from vfl.defences.base import ClientDefence
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation
from vfl.options import number, option

__all__ = ["distance_correlation", "NoPeek", "SPEC"]

VEPAKOMMA = "Vepakomma, Singh, Gupta, Raskar, NoPeek: Information leakage reduction to share activations in " \
            "distributed deep learning (ICDM Workshops 2020)"


def _centred(rows: torch.Tensor) -> torch.Tensor:
    d = torch.cdist(rows, rows)
    return d - d.mean(0, keepdim=True) - d.mean(1, keepdim=True) + d.mean()


def distance_correlation(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The sample distance correlation of the rows of x and z (each flattened per example), in [0, 1]."""
    a, b = _centred(x.flatten(1)), _centred(z.flatten(1))
    xy, xx, zz = (a * b).mean(), (a * a).mean(), (b * b).mean()
    tiny = torch.finfo(xy.dtype).tiny
    return (xy.clamp_min(0) / (xx * zz).sqrt().clamp_min(tiny)).clamp_min(tiny).sqrt()


class NoPeek(ClientDefence):
    name = "nopeek"

    def __init__(self, alpha: float):
        self.alpha = alpha
        self.values: list[float] = []

    def on_loss(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None:
        if self.alpha == 0:
            return None
        dcor = distance_correlation(x.detach(), h)
        self.values.append(float(dcor.detach()))
        return self.alpha * dcor

    def report(self) -> dict[str, Any]:
        return {"nopeek_dcor_mean": sum(self.values) / len(self.values) if self.values else None,
                "nopeek_dcor_last": self.values[-1] if self.values else None}


@dataclass(frozen=True, kw_only=True)
class NoPeekSettings(DefenceSettings):
    alpha: float = option(help="Weight of DCOR(X, Z) in the feature party's loss (0: none).",
                          check=number(low=0, high=1e4))


SPEC = DefenceSpec(
    name="nopeek", point="feature-loss", title="the feature party minimises the distance correlation between its "
    "inputs and the activations it sends, alpha * DCOR(X, Z) beside the task loss", paper=VEPAKOMMA,
    settings=NoPeekSettings, build=lambda s, where: NoPeek(s.alpha), example="nopeek:alpha=0.5", zero={"alpha": 0.0},
    strengths=({"alpha": 0.1}, {"alpha": 0.5}, {"alpha": 1.0}, {"alpha": 3.0}),
    deviations=(Deviation("loss", "alpha1 DCOR(X, Z) + alpha2 CE(Y, Y^), the two weights", "alpha DCOR(X, Z) beside "
                          "the label party's cross-entropy, whose weight is 1 (alpha = alpha1 / alpha2)", "the task "
                          "loss lives at the label party; only the ratio of the weights matters to the feature "
                          "party's gradient up to the learning rate"),
                Deviation("strengths", "no alpha grid given for image data", "alpha 0.1, 0.5, 1, 3 (ours)",
                          "spans a small effect to a large loss in accuracy on mnist5k"),))

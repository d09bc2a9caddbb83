"""How `splitlab bounds` departs from the bounds paper, declared as data: rendered by `splitlab claims
--deviations` and in docs/claims.md beside the attacks' own (`attacks.spec.Deviation`)."""
from __future__ import annotations

from attacks.spec import Deviation

__all__ = ["DEVIATIONS"]

DEVIATIONS: tuple[Deviation, ...] = (
    Deviation("data", "MNIST, Fashion-MNIST and CIFAR-10 at full size",
              "scikit-learn's 8x8 digits (d = 64), binary (digits 0 and 1) and softmax",
              "offline (no download) and CPU time; the theorems' constants are exact on this size"),
    Deviation("w*", "FedAvg trained until |loss_{s+1} - loss_s| <= 1e-5",
              "Newton's method on the centralised l2-regularised loss",
              "the exact minimiser the theorems are stated at; FedAvg's stopping rule leaves an error of its own"),
    Deviation("GGL's generator", "a public pretrained GAN for each dataset",
              "a PCA-linear decoder (top-k components of the digits, a Gaussian fit)",
              "no pretrained GAN exists for 8x8 digits and the lab fetches no weights; the decoder is affine, so "
              "its Lipschitz constant is exact"),
    Deviation("attacked samples", "not stated (figures averaged over the test data)",
              "40 samples, 10 random starts each, 200 gradient steps per attack",
              "CPU time; --samples, --inits and --attack-steps set them"),
)

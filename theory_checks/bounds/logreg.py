"""l2-regularised logistic regression on scikit-learn's digits: the paper's strongly convex FL model.

Paper §5 / App. C.1.1 (its l2 coefficient gamma is called lam here; it also names a step-size constant):

    L_k(w) = (1/n_k) sum_j l(w; x_j, y_j) + lam ||w||^2,      lam = 0.1 (the paper calls it gamma)

- binary: y in {-1, +1}, l = log(1 + exp(-y <w, x>)). Written as two-class cross-entropy on the logits
  (0, <w, x>) (class 1 <-> y = +1), which is the same function, so the attacks' `FedSGDGradient`
  differentiates exactly the clients' loss.
- softmax: K classes, W in R^{K x d}, cross-entropy of W x (the paper never defines its multi-class
  model; the paper never defines its multi-class LogReg).

Data: `sklearn.datasets.load_digits` (ships inside scikit-learn, no download), 8x8 images / 16 in [0, 1],
d = 64; or `mnist5k`'s train split (the lab's embedded MNIST subset), 28x28 in [0, 1], d = 784, the paper's
MNIST size. Parameters are one flat vector w (p = d binary, p = K d softmax); no bias, as in the paper.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from attacks.engine import task_loss
from vfl.errors import SplitlabError

KINDS = ("binary", "softmax")
DATASETS = ("digits", "mnist5k")
"""scikit-learn's 8x8 digits, or the lab's embedded MNIST subset at the paper's 28x28."""
LAM = 0.1
"""The paper's l2 coefficient (App. C.1.1 names it gamma, as it names a step-size constant; renamed)."""
DTYPE = torch.float64


@dataclass(frozen=True)
class Digits:
    """Images (n, 1, H, W) in [0, 1] and class indices (n,) for the chosen digits (index i <-> digits[i])."""
    images: torch.Tensor
    labels: torch.Tensor
    digits: tuple[int, ...]
    provenance: str

    @property
    def flat(self) -> torch.Tensor:
        return self.images.flatten(1)

    @property
    def dim(self) -> int:
        return self.flat.shape[1]


@functools.lru_cache(maxsize=8)
def load_digits(digits: Sequence[int] = (0, 1), dataset: str = "digits") -> Digits:
    """All samples of `digits` (a tuple) from scikit-learn's copy of the UCI digits (8x8), or from the train
    split of mnist5k (28x28, `dataset="mnist5k"`), in file order."""
    digits = tuple(int(d) for d in digits)
    if len(set(digits)) != len(digits) or len(digits) < 2 or not all(0 <= d <= 9 for d in digits):
        raise SplitlabError(f"digits must be at least two distinct values in 0..9, got {list(digits)}")
    if dataset == "mnist5k":
        from vfl import data as datasets

        split = datasets.load("mnist5k", "train")
        images, target, source = split.images.to(DTYPE), split.labels, f"{split.provenance}, train split"
    elif dataset == "digits":
        from sklearn import __version__ as sklearn_version
        from sklearn.datasets import load_digits as sk_load

        bunch = sk_load()
        images = torch.as_tensor(bunch.images, dtype=DTYPE).unsqueeze(1) / 16.0
        target, source = torch.as_tensor(bunch.target), f"sklearn.datasets.load_digits (scikit-learn {sklearn_version}), /16"
    else:
        raise SplitlabError(f"unknown dataset {dataset!r}; choose one of: {', '.join(DATASETS)}")
    keep = torch.isin(target, torch.tensor(digits))
    labels = torch.tensor([digits.index(int(t)) for t in target[keep]])
    return Digits(images[keep], labels, digits, f"{source}, digits {list(digits)}")


@dataclass(frozen=True)
class LogReg:
    """The model and its loss as functions of a flat parameter vector w (float64)."""
    kind: str
    dim: int
    classes: int = 2
    lam: float = LAM

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SplitlabError(f"unknown model {self.kind!r}; choose one of: {', '.join(KINDS)}")
        if self.kind == "binary" and self.classes != 2:
            raise SplitlabError("the binary model has two classes")

    @property
    def params(self) -> int:
        return self.dim if self.kind == "binary" else self.classes * self.dim

    def logits(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(..., d) -> (..., classes), broadcasting leading dimensions of w (..., p) and x: (0, <w, x>)
        binary, W x softmax."""
        if self.kind == "binary":
            z = (x * w).sum(-1)
            return torch.stack([torch.zeros_like(z), z], dim=-1)
        return (w.unflatten(-1, (self.classes, self.dim)) * x.unsqueeze(-2)).sum(-1)

    def loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """L(w) = mean_j CE(logits(w, x_j), y_j) + lam ||w||^2 over the rows of x (n, d)."""
        return task_loss(self.logits(w, x), y) + self.lam * w.square().sum()

    def gradient(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """grad L(w) over the rows of x."""
        with torch.enable_grad():
            w = w.detach().clone().requires_grad_(True)
            return torch.autograd.grad(self.loss(w, x, y), w)[0]

    def sample_losses(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """l(w; x, y) = CE(logits(w, x), y) + lam ||w||^2 elementwise over the broadcast leading dimensions."""
        logits = self.logits(w, x)
        ce = nn.functional.cross_entropy(logits.flatten(0, -2), y.expand(logits.shape[:-1]).flatten(),
                                         reduction="none").view(logits.shape[:-1])
        return ce + self.lam * w.square().sum(-1)

    def sample_grads(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """grad_w l(w; x, y) per sample: w (..., p) broadcast against x (..., d), y (...) -> (..., p)."""
        shape = torch.broadcast_shapes(w.shape[:-1], x.shape[:-1], y.shape)
        with torch.enable_grad():
            w = w.detach().expand(*shape, w.shape[-1]).clone().requires_grad_(True)
            return torch.autograd.grad(self.sample_losses(w, x, y).sum(), w)[0]

    def hessian(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Hessian of L at w (labels drop out): the logits are linear in w, z_j = J_j w, so
        H = mean_j J_j^T (diag p_j - p_j p_j^T) J_j + 2 lam I with p_j = softmax(z_j); w (..., p), x (..., n, d)."""
        prob = torch.softmax(self.logits(w.unsqueeze(-2), x), dim=-1)                  # (..., n, C)
        curvature = torch.diag_embed(prob) - prob.unsqueeze(-1) * prob.unsqueeze(-2)  # (..., n, C, C)
        n = x.shape[-2]
        if self.kind == "binary":
            h = torch.einsum("...j,...ji,...jk->...ik", curvature[..., 1, 1], x, x) / n
        else:
            h = torch.einsum("...jab,...ji,...jk->...aibk", curvature, x, x).flatten(-4, -3).flatten(-2, -1) / n
        return h + 2 * self.lam * torch.eye(self.params, dtype=h.dtype)

    def paper_L(self, x: torch.Tensor) -> float:
        """The paper's smoothness constant for one device: (1/4) mean ||x||^2 + 2 lam (binary, App. C.1.1);
        (1/2) mean ||x||^2 + 2 lam for softmax (the softmax Hessian block is at most 1/2)."""
        scale = 0.25 if self.kind == "binary" else 0.5
        return scale * float(x.square().sum(1).mean()) + 2 * self.lam

    @property
    def paper_mu(self) -> float:
        """The paper's mu = lam (the true strong convexity is 2 lam; the paper's is kept, conservative)."""
        return self.lam

    def idlg_label(self, w: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """iDLG's sign rule on the data part of the gradient g - 2 lam w (exact for x >= 0, one sample):
        binary: class of y = -sign(sum_i (g - 2 lam w)_i); softmax: argmin of the row sums."""
        data = (g - 2 * self.lam * w)
        if self.kind == "binary":
            return (data.sum(-1) < 0).long()
        return data.view(*data.shape[:-1], self.classes, self.dim).sum(-1).argmin(-1)

    def network(self, w: torch.Tensor) -> "LogRegNet":
        return LogRegNet(self, w)


class LogRegNet(nn.Module):
    """The model as a module (parameter `weight` = w) for the engine's `FedSGDGradient`; it computes
    `LogReg.logits` on flattened inputs, so clients and attacker share one loss."""

    def __init__(self, model: LogReg, w: torch.Tensor):
        super().__init__()
        self.model = model
        self.weight = nn.Parameter(w.detach().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.logits(self.weight, x.flatten(1))


def newton(model: LogReg, x: torch.Tensor, y: torch.Tensor, *, tol: float = 1e-12, max_steps: int = 50) -> torch.Tensor:
    """argmin_w L(w) by Newton's method from 0 (L is 2 lam-strongly convex and smooth: a few steps reach
    ||grad L|| <= tol). Used for w* and for the local minima L_k* behind Gamma (the paper does not say how it computes them)."""
    w = torch.zeros(model.params, dtype=DTYPE)
    for _ in range(max_steps):
        g = model.gradient(w, x, y)
        if float(g.norm()) <= tol:
            break
        w = w - torch.linalg.solve(model.hessian(w, x), g)
    return w

"""CAE and DCAE, the confusional autoencoder defences (Liu, Zou, Kang et al., Batch Label Inference and Replacement
Attacks in Black-Boxed Vertical Federated Learning, arXiv 2112.05409): before training, the label party trains an
autoencoder on one-hot labels y alone (no data), whose encoder E maps y to a confused soft label y~ = softmax(E(y))
and whose decoder D maps y~ back to y:

    L = CE(y, D(y~)) - lambda1 CE(y, y~) - lambda2 H(y~)

(reconstruct y; move y~ away from y; spread y~ out). The label party then trains its top model on y~ instead of y,
so the cut gradient it sends back is that of the confused labels, and decodes every prediction through D:
prediction = D(softmax(top(H))). Nothing is downloaded: the autoencoder is trained here, from the defence's seed.

DCAE adds VFLAIR's DiscreteSGD on the cut gradient it sends back: g -> round(g / w) w, the bin width w = 2 sigma /
floor((bins + 1) / 2) fixed from the first batch's standard deviation sigma.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from vfl.defences.base import seed_option
from vfl.defences.send_back import SendBackDefence
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation, Where
from vfl.errors import SplitlabError
from vfl.options import integer, number, option

__all__ = ["LabelAutoencoder", "train_autoencoder", "ConfusionalAutoencoder", "CAE", "DCAE"]

LIU = "Liu, Zou, Kang, Liu, He, Yi, Yang, Batch Label Inference and Replacement Attacks in Black-Boxed " \
      "Vertical Federated Learning (arXiv 2112.05409), as VFLAIR (FLAIR-THU/VFLAIR) runs it"
AE_BATCH = 128
AE_LR = 1e-3


class LabelAutoencoder(nn.Module):
    """VFLAIR's label autoencoder: encoder and decoder each K -> (6K + 2)^2 -> K with a ReLU between."""

    def __init__(self, classes: int):
        super().__init__()
        hidden = (6 * classes + 2) ** 2
        self.classes = classes
        self.encoder = nn.Sequential(nn.Linear(classes, hidden), nn.ReLU(), nn.Linear(hidden, classes))
        self.decoder = nn.Sequential(nn.Linear(classes, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def confuse(self, one_hot: torch.Tensor) -> torch.Tensor:
        """y~ = softmax(E(y))."""
        return F.softmax(self.encoder(one_hot), dim=1)

    def forward(self, one_hot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(D's logits of y~, y~)."""
        soft = self.confuse(one_hot)
        return self.decoder(soft), soft


def cae_loss(one_hot: torch.Tensor, decoded: torch.Tensor, soft: torch.Tensor, contrast: float,
             entropy: float) -> torch.Tensor:
    reconstruction = -(one_hot * F.log_softmax(decoded, dim=1)).sum(1).mean()
    away = -(one_hot * soft.clamp_min(1e-12).log()).sum(1).mean()
    spread = -(soft * soft.clamp_min(1e-12).log()).sum(1).mean()
    return reconstruction - contrast * away - entropy * spread


def train_autoencoder(classes: int, contrast: float, entropy: float, steps: int, seed: int) -> LabelAutoencoder:
    """The autoencoder trained on `steps` batches of uniformly drawn labels, all from `seed` (its weights, its
    labels; the global random stream untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LabelAutoencoder(classes)
    g = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=AE_LR)
    with torch.enable_grad():                # it may first be needed inside a caller's no_grad (a prediction)
        _fit(model, optimizer, g, classes, contrast, entropy, steps)
    return model.eval().requires_grad_(False)


def _fit(model: LabelAutoencoder, optimizer: torch.optim.Optimizer, g: torch.Generator, classes: int,
         contrast: float, entropy: float, steps: int) -> None:
    for _ in range(steps):
        y = F.one_hot(torch.randint(classes, (AE_BATCH,), generator=g), classes).float()
        decoded, soft = model(y)
        loss = cae_loss(y, decoded, soft, contrast, entropy)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


class ConfusionalAutoencoder(SendBackDefence):
    """The label party trains on y~ and decodes its predictions (`on_predict`); with `bins`, DiscreteSGD on what it
    sends back (DCAE)."""

    def __init__(self, classes: int, contrast: float, entropy: float, steps: int, seed: int = 0,
                 bins: int | None = None):
        self.name = "cae" if bins is None else "dcae"
        self.classes, self.contrast, self.entropy, self.steps, self.seed, self.bins = \
            classes, contrast, entropy, steps, seed, bins
        self._model: LabelAutoencoder | None = None
        self.width: float | None = None

    @property
    def model(self) -> LabelAutoencoder:
        if self._model is None:              # trained once, when first needed
            self._model = train_autoencoder(self.classes, self.contrast, self.entropy, self.steps, self.seed)
        return self._model

    def table(self) -> torch.Tensor:
        """y~ of each class, one row per class (K, K)."""
        with torch.no_grad():
            return self.model.confuse(torch.eye(self.classes))

    def on_training_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The soft labels y~ (float, (N, K)) the top model trains on."""
        return self.table().to(labels.device)[labels]

    def on_predict(self, scores: torch.Tensor) -> torch.Tensor:
        """The decoder's logits of softmax(top's scores): the prediction in the true classes."""
        decoder = self.model.decoder.to(scores.device)
        with torch.no_grad():
            return decoder(F.softmax(scores, dim=1))

    def on_send(self, g: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        if self.bins is None:
            return g
        if self.width is None:               # VFLAIR fixes the bin width from the first batch
            self.width = float(2 * g.std() / ((self.bins + 1) // 2))
        if self.width <= 0:
            return g
        return torch.round(g / self.width) * self.width

    def report(self) -> dict[str, Any]:
        table = self.table()
        decoded = self.model.decoder(table).argmax(1)
        key = self.name
        found = {f"{key}_decodes_every_class": bool((decoded == torch.arange(self.classes)).all()),
                 f"{key}_soft_label_true_class_mean": float(table.diagonal().mean()),
                 f"{key}_soft_label_argmax_is_true_share": float((table.argmax(1) ==
                                                                  torch.arange(self.classes)).float().mean())}
        if self.bins is not None:
            found["dcae_bin_width"] = self.width
        return found


@dataclass(frozen=True, kw_only=True)
class CAESettings(DefenceSettings):
    lam: float = option(help="Weight lambda2 of the entropy term H(y~) (VFLAIR's CAE lambda).",
                        check=number(low=0, high=100))
    contrast: float = option(0.1, "Weight lambda1 of the term pushing y~ away from y.", number(low=0, high=100))
    steps: int = option(300, "Adam steps of the autoencoder's training (batches of 128 random labels).",
                        integer(low=1, high=1_000_000))
    seed: int = seed_option("the autoencoder's weights and training labels")


@dataclass(frozen=True, kw_only=True)
class DCAESettings(CAESettings):
    bins: int = option(12, "DiscreteSGD's bin count (the width: 2 std of the first batch's gradient / "
                       "floor((bins + 1) / 2)).", integer(low=1, high=10_000))


def _build(s: CAESettings, where: Where) -> ConfusionalAutoencoder:
    if where.classes is None:
        raise SplitlabError("cae is built for a task of a known number of classes")
    return ConfusionalAutoencoder(where.classes, s.contrast, s.lam, s.steps, s.seed, getattr(s, "bins", None))


_STRENGTHS = ({"lam": 0.0}, {"lam": 0.1}, {"lam": 0.5}, {"lam": 1.0})
_DEVIATIONS = (
    Deviation("weights", "lambda1 and lambda2 per experiment (VFLAIR ships autoencoders trained at lambda 0, 0.1, "
              "0.5, 1)", "lambda2 = lam as VFLAIR's lambda, lambda1 = contrast 0.1 by default", "the ratio of the "
              "reconstruction to the contrast term in public ports of the paper's code; the paper text was not at "
              "hand to check"),
    Deviation("training", "the autoencoder pre-trained offline (VFLAIR loads it from a file)", "trained when the "
              "run starts, 300 Adam steps (lr 1e-3, option steps) on batches of 128 uniform labels, from the seed",
              "nothing is downloaded; its report says whether it decodes every class"),
    Deviation("zero strength", "-", "none: lam 0 still confuses the labels through the contrast term",
              "a learned label transformation, like the orthogonal family, has no strength that is no defence"),
)

CAE = DefenceSpec(
    name="cae", point="labels", title="a confusional autoencoder: the top model trains on confused soft labels, "
    "its predictions decoded back", paper=LIU, settings=CAESettings, build=_build, example="cae:lam=0.5",
    strengths=_STRENGTHS, deviations=_DEVIATIONS)

DCAE = DefenceSpec(
    name="dcae", point="labels", title="CAE plus DiscreteSGD: confused soft labels, and the cut gradient sent back "
    "rounded to bins", paper=LIU, settings=DCAESettings, build=_build, example="dcae:lam=0.5,bins=12",
    strengths=_STRENGTHS, deviations=(*_DEVIATIONS, Deviation(
        "point", "the labels and the gradient sent back", "declared at the labels point; it also rounds what is "
        "sent back", "one declaration at its first point; --send-back takes both")))

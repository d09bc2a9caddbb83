"""Label differential privacy by randomised response (Ghazi et al., Deep Learning with Label Differential Privacy,
NeurIPS 2021, its RR baseline): the label party replaces each training label, once before training, by

    y~ = y                 with probability e^eps / (e^eps + K - 1)
    y~ = c != y            with probability 1 / (e^eps + K - 1) each

and trains on y~ only. Every later message (every cut gradient sent back, the trained model) is a post-processing
of the features and y~, so the whole run is eps-label-DP. The epsilon recorded in metrics.json is the mechanism's
likelihood ratio computed from the probabilities it drew with, not the option echoed back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from vfl.defences.base import seed_option
from vfl.defences.send_back import SendBackDefence
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation, Where
from vfl.errors import SplitlabError
from vfl.options import number, option

__all__ = ["RandomisedResponse", "keep_probability", "SPEC"]

GHAZI = "Ghazi, Golowich, Kumar, Manurangsi, Zhang, Deep Learning with Label Differential Privacy (NeurIPS 2021)"


def keep_probability(epsilon: float, classes: int) -> float:
    """P(y~ = y) = e^eps / (e^eps + K - 1), computed as 1 / (1 + (K - 1) e^-eps) (finite for every eps): exactly 1
    in float64 once (K - 1) e^-eps < 2^-53, so eps = 100 keeps every label (K <= 1000)."""
    return 1.0 / (1.0 + (classes - 1) * math.exp(-epsilon))


class RandomisedResponse(SendBackDefence):
    name = "label-rr"

    def __init__(self, epsilon: float, classes: int, seed: int = 0):
        self.epsilon, self.classes, self.seed = epsilon, classes, seed
        self.kept: float | None = None

    def on_training_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The noisy labels, drawn from a generator of its own seeded afresh on every call (the same labels every
        time: a resumed run trains on the labels it started with)."""
        k, p_keep = self.classes, keep_probability(self.epsilon, self.classes)
        g = torch.Generator().manual_seed(self.seed)
        u = torch.rand(labels.shape, generator=g, dtype=torch.float64)
        other = torch.randint(k - 1, labels.shape, generator=g)            # uniform over the K - 1 other classes
        cpu = labels.cpu()
        flipped = torch.where(other >= cpu, other + 1, other)
        noisy = torch.where(u < p_keep, cpu, flipped).to(labels.device)
        self.kept = float((noisy == labels).double().mean()) if len(labels) else 1.0
        return noisy

    def report(self) -> dict[str, Any]:
        p_keep = keep_probability(self.epsilon, self.classes)
        p_other = math.exp(-self.epsilon) * p_keep          # e^eps / (.) and 1 / (.) share the denominator
        return {"label_dp_epsilon": math.log(p_keep) - math.log(p_other), "label_rr_keep_probability": p_keep,
                "label_rr_kept": self.kept}


@dataclass(frozen=True, kw_only=True)
class RRSettings(DefenceSettings):
    epsilon: float = option(help="Label-DP budget epsilon of the randomised response (100: every label kept).",
                            check=number(low=0, low_open=True, high=100))
    seed: int = seed_option("the responses")


def _build(s: RRSettings, where: Where) -> RandomisedResponse:
    if where.classes is None:
        raise SplitlabError("label-rr is built for a task of a known number of classes")
    return RandomisedResponse(s.epsilon, where.classes, s.seed)


SPEC = DefenceSpec(
    name="label-rr", point="labels", title="randomised response on every training label, once before training "
    "(eps-label-DP for the whole run)", paper=GHAZI, settings=RRSettings, build=_build, example="label-rr:epsilon=1",
    zero={"epsilon": 100.0}, strengths=({"epsilon": 8.0}, {"epsilon": 4.0}, {"epsilon": 2.0}, {"epsilon": 1.0}),
    deviations=(Deviation("mechanism", "RR-with-prior in one or more stages (LP-1ST, LP-2ST): the prior comes from a "
                          "model trained on earlier stages' noisy labels", "plain randomised response (the paper's "
                          "RR baseline), one stage", "RR-with-prior needs a model trained on a first stage; the lab "
                          "trains once"),
                Deviation("strengths", "CIFAR-10 at epsilon 1, 2, 4, 8", "the same epsilons on mnist5k",
                          "the lab's embedded data"),))

"""SplitGuard (Erdogan, Kupcu, Cicek, SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split
Learning, WPES 2022): the feature party detects a server that steers its model to a task of the server's own
(FSHA) from the cut gradients it receives.

After `start` regular rounds, each round is a fake batch with probability `p_fake`: the labels that go with it are
randomised (a share `fake_share` of them), and its gradient is only looked at, never stepped on. Every other
round's gradient joins R1 or R2 at random. On each fake batch, with F the fake gradients so far:

    x  = angle(mean F, mean R) * |F| - |R|| / m  -  angle(mean R1, mean R2) * ||R1| - |R2|| / m
    SG = sigmoid(mult * x) ** exp

with |A| the mean norm of A's vectors, R = R1 and R2 (their means averaged) and m the sum of the two norm gaps, as
the authors' code has it. An honest server answers random labels with gradients unlike the regular ones (SG near
1); a hijacking server's gradients ignore the labels (SG near sigmoid(0)^exp). The detector flags an attack when
the mean of the last `window` scores falls below `threshold`; with `on_detection=stop` the feature party then stops
stepping on what the server sends.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from vfl.defences.base import ClientDefence, seed_option
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation
from vfl.options import choice, integer, number, option

__all__ = ["SplitGuard", "sg_score", "SPEC"]

ERDOGAN = "Erdogan, Kupcu, Cicek, SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split " \
          "Learning (WPES 2022)"


def _angle(a: torch.Tensor, b: torch.Tensor) -> float:
    cos = torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(torch.finfo(a.dtype).tiny)
    return float(torch.arccos(cos.clamp(-1, 1)))


def _mean_norm(vectors: list[torch.Tensor]) -> float:
    return float(torch.stack(vectors).norm(dim=1).mean())


def sg_score(fakes: list[torch.Tensor], r1: list[torch.Tensor], r2: list[torch.Tensor], mult: float,
             exp: float) -> float:
    """The SplitGuard score of the fake and the two regular sets of gradient vectors, in [0, 1]."""
    f_mean, c_mean, r_mean = (torch.stack(v).mean(0) for v in (fakes, r1, r2))
    f_mag, c_mag, r_mag = (_mean_norm(v) for v in (fakes, r1, r2))
    cr_mean, cr_mag = (c_mean + r_mean) / 2, (c_mag + r_mag) / 2
    gaps = abs(f_mag - cr_mag) + abs(c_mag - r_mag)
    if gaps == 0:
        return 1 / (1 + math.exp(0)) ** exp
    x = _angle(f_mean, cr_mean) * abs(f_mag - cr_mag) / gaps - _angle(c_mean, r_mean) * abs(c_mag - r_mag) / gaps
    return float(1 / (1 + math.exp(-mult * x))) ** exp


class SplitGuard(ClientDefence):
    name = "splitguard"

    def __init__(self, p_fake: float, start: int = 20, fake_share: float = 1.0, mult: float = 5.0, exp: float = 2.0,
                 threshold: float = 0.5, window: int = 1, on_detection: str = "report", seed: int = 0):
        self.p_fake, self.start, self.fake_share, self.mult, self.exp = p_fake, start, fake_share, mult, exp
        self.threshold, self.window, self.on_detection = threshold, window, on_detection
        self.generator = torch.Generator().manual_seed(seed)
        self.rounds = 0
        self.classes = 0
        """The classes seen in the labels so far (the fake labels are drawn among them)."""
        self.fake_now = False
        self.fakes: list[torch.Tensor] = []
        self.regular: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        self.scores: list[float] = []
        self.score_rounds: list[int] = []
        self.detected_at: int | None = None

    def _draw(self) -> float:
        return float(torch.rand((), generator=self.generator, dtype=torch.float64))

    def on_labels(self, y: torch.Tensor | None, step: int) -> torch.Tensor | None:
        self.rounds += 1
        if y is not None and len(y):
            self.classes = max(self.classes, int(y.max()) + 1)
        self.fake_now = self.p_fake > 0 and self.rounds > self.start and self._draw() <= self.p_fake
        if not self.fake_now or y is None:   # a hijacking server takes no labels: the batch is fake all the same
            return y
        # as the authors do: every label shifted by one random class offset (a permutation within the batch would
        # keep its label counts, and with them the batch's summed gradient); the classes are those seen so far
        count = math.ceil(self.fake_share * len(y))
        offset = 1 + int(torch.randint(max(self.classes - 1, 1), (), generator=self.generator))
        shifted = (y + offset) % max(self.classes, 2)
        return torch.cat((shifted[:count], y[count:]))

    def on_gradient(self, g: torch.Tensor) -> torch.Tensor | None:
        if self.p_fake == 0:
            return g
        vector = g.detach().reshape(len(g), -1).sum(0).to("cpu", torch.float64)
        if self.fake_now:
            self.fake_now = False
            self.fakes.append(vector)
            r1, r2 = self.regular
            if r1 and r2:
                self.scores.append(sg_score(self.fakes, r1, r2, self.mult, self.exp))
                self.score_rounds.append(self.rounds)
                recent = self.scores[-self.window:]
                if self.detected_at is None and len(recent) == self.window and \
                        sum(recent) / self.window < self.threshold:
                    self.detected_at = self.rounds
            return None                          # a fake batch's gradient is never stepped on
        if self.rounds > self.start:
            self.regular[0 if self._draw() <= 0.5 else 1].append(vector)
        if self.detected_at is not None and self.on_detection == "stop":
            return None
        return g

    def report(self) -> dict[str, Any]:
        if self.p_fake == 0:
            return {}
        below = [s < self.threshold for s in self.scores]
        return {"splitguard_fake_batches": len(self.fakes), "splitguard_scores": len(self.scores),
                "splitguard_score_mean": sum(self.scores) / len(self.scores) if self.scores else None,
                "splitguard_score_last": self.scores[-1] if self.scores else None,
                "splitguard_below_threshold_share": sum(below) / len(below) if below else None,
                "splitguard_detected": self.detected_at is not None,
                "splitguard_first_detection_round": self.detected_at}

    def state_dict(self) -> dict[str, Any]:
        """Its draws' position and everything it has seen and decided, so a resumed run keeps its alarm (with
        `stop`, stepping on nothing after it) and scores new fake batches against the gradients so far."""
        return {"generator": self.generator.get_state(), "rounds": self.rounds, "classes": self.classes,
                "fake_now": self.fake_now, "fakes": list(self.fakes), "r1": list(self.regular[0]),
                "r2": list(self.regular[1]), "scores": list(self.scores), "score_rounds": list(self.score_rounds),
                "detected_at": self.detected_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        if "rounds" not in state:                # a checkpoint that kept only the generator
            return
        self.rounds, self.classes, self.fake_now = state["rounds"], state["classes"], state["fake_now"]
        self.fakes, self.regular = list(state["fakes"]), (list(state["r1"]), list(state["r2"]))
        self.scores, self.score_rounds = list(state["scores"]), list(state["score_rounds"])
        self.detected_at = state["detected_at"]


@dataclass(frozen=True, kw_only=True)
class SplitGuardSettings(DefenceSettings):
    p_fake: float = option(help="Probability that a round after the first `start` is a fake batch (0: none).",
                           check=number(low=0, high=1))
    start: int = option(20, "Regular rounds before the first fake batch (the authors' N).",
                        integer(low=0, high=10_000_000))
    fake_share: float = option(1.0, "Share of a fake batch's labels randomised (the authors' B_fake / batch).",
                               number(low=0, low_open=True, high=1))
    mult: float = option(5.0, "Multiplier of the score's sigmoid.", number(low=0, low_open=True, high=1000))
    exp: float = option(2.0, "Exponent of the score's sigmoid.", number(low=0, low_open=True, high=100))
    threshold: float = option(0.5, "An attack is flagged when the mean of the last `window` scores is below it.",
                              number(low=0, high=1))
    window: int = option(1, "Scores averaged for the decision (1: the authors' fail-fast).",
                         integer(low=1, high=10_000))
    on_detection: str = option("report", "report (keep training, record the round) or stop (step on nothing the "
                               "server sends after it).", choice(("report", "stop")))
    seed: int = seed_option("the fake-batch draws, the fake labels and the R1/R2 split")


SPEC = DefenceSpec(
    name="splitguard", point="received-gradient", title="fake batches with randomised labels, their cut gradients "
    "compared with the regular ones (the SplitGuard score) to detect a hijacking server", paper=ERDOGAN,
    settings=SplitGuardSettings, needs=("labels-sent",),
    build=lambda s, where: SplitGuard(s.p_fake, s.start, s.fake_share, s.mult, s.exp, s.threshold, s.window,
                                      s.on_detection, s.seed),
    example="splitguard:p_fake=0.1", zero={"p_fake": 0.0},
    strengths=({"p_fake": 0.05}, {"p_fake": 0.1}, {"p_fake": 0.2}),
    deviations=(
        Deviation("gradient", "the gradient of the client's first layer's weights", "the cut gradient received, "
                  "summed over the batch's examples", "the defence sits at the point where the gradient is received; "
                  "it sees no weight gradient there"),
        Deviation("labels", "the client owns the labels and sends them; a fake batch's labels shifted by a random "
                  "class offset in 1..K-2", "the label party holds them; the lab's loop lets the feature party's "
                  "detector change a fake batch's labels before they reach the server, shifted by an offset in "
                  "1..K-1 among the classes seen so far", "SplitGuard's setting is a client that sends labels; over "
                  "TCP or with several feature parties the label party holds them, and the lab refuses the "
                  "defence there"),
        Deviation("decision", "Fail-Fast, Avg-k and Votes policies, thresholds chosen per task", "the mean of the "
                  "last `window` scores below `threshold` (window 1: fail-fast), threshold 0.5 (ours)", "midway "
                  "between a hijacker's expected score sigmoid(0)^2 = 0.25 and an honest run's, near 1"),
        Deviation("settings", "-", "mult 5, exp 2, p_fake 0.1, N = 20, every label of a fake batch randomised: "
                  "the authors' code", "the paper's own values where its code gives them"),
    ))

"""`BoundsConfig`: every setting of `splitlab bounds`, each declared once with its default, help and check
(`vfl.options`); the command's options are generated from these fields (`theory_checks/cli.py`).

The defaults fit the unrolled surrogate as the paper does (App. C.1.1): on about 1,000 (input, iterate) pairs
(`fit_pairs`, drawn from the attacks' trials) by plain least squares (`ridge` 0, the minimum-norm solution).
The lab's earlier defaults are `--samples 40 --ridge 1e-2 --fit-pairs 0` (every trial, a ridge of 1e-2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from theory_checks.bounds.attacks import ATTACKS, AttackSettings
from theory_checks.bounds.fedavg import GAMMA_RULES, MU_RULES
from theory_checks.bounds.logreg import DATASETS, KINDS, load_digits
from theory_checks.bounds.surrogate import FEEDS, INPUTS
from vfl.errors import SplitlabError
from vfl.options import Check, Validated, choice, integer, number, option
from vfl.validate import check_choice, check_int

LIPSCHITZ = ("full", "w")
MAX_BATCH = 64
"""The surrogate of a batch of B maps R^(B d) -> R^(B d); at B = 64 one layer is already 4096 x 4096."""


def _words(name: str, value: Any) -> tuple[str, ...]:
    """Distinct attack names, given as "dlg,idlg" or as a sequence."""
    words = tuple(w.strip() for w in value.split(",") if w.strip()) if isinstance(value, str) else tuple(value)
    if not words or len(set(words)) != len(words):
        raise SplitlabError(f"{name} needs distinct comma-separated names, got {value!r}")
    for word in words:
        check_choice(name, word, ATTACKS)
    return words


def _digits(name: str, value: Any) -> tuple[int, ...]:
    """At least two distinct digits 0..9, given as "0,1" or as a sequence."""
    try:
        digits = tuple(int(v) for v in value.split(",")) if isinstance(value, str) else tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise SplitlabError(f"{name} needs comma-separated digits, got {value!r}") from None
    if len(digits) < 2 or len(set(digits)) != len(digits) or not all(0 <= d <= 9 for d in digits):
        raise SplitlabError(f"{name} needs at least two distinct digits in 0..9, got {value!r}")
    return digits


ATTACK_NAMES = Check(str, _words, "distinct names among " + ", ".join(ATTACKS), refused="dlg,foo")
DIGITS = Check(str, _digits, "two or more distinct digits 0..9, comma-separated", refused="0,12")


@dataclass(frozen=True, kw_only=True)
class BoundsConfig(Validated):
    """The whole measurement of `splitlab bounds`; checked when built (CLI, Python and sweeps alike)."""
    surrogate_input: str = option("w,x0", "The unrolled surrogate's input: w,x0 (the paper) or w,g,x0 (with the "
                                  "observed gradient).", choice(INPUTS))
    ridge: float = option(0.0, "Ridge of each layer's least-squares fit (0: none, the minimum-norm solution, as "
                          "the paper fits).", number(low=0.0, high=1e6))
    fit_pairs: int = option(1000, "(input, iterate) pairs the surrogate is fitted on, drawn from the attacks' "
                            "trials (the paper's 1,000; 0: every trial).", integer(low=0, high=10_000_000))
    layers: int = option(20, "H, the surrogate's layers (<= --attack-steps).", integer(low=1, high=100_000))
    rounds: int = option(100, "T, FedAvg communication rounds.", integer(low=1, high=10_000))
    devices: int = option(10, "N, devices (the data are split evenly).", integer(low=1, high=1000))
    local_steps: int = option(2, "E, local SGD steps per round.", integer(low=1, high=1000))
    seeds: int = option(10, "FedAvg seeds for the constants and the convergence check.", integer(low=1, high=1000))
    participation: int = option(5, "K, devices drawn with replacement per round for Theorem 2's check.",
                                integer(low=1, high=10_000))
    samples: int = option(100, "Attacked training images (grouped into batches of --batch).",
                          integer(low=1, high=100_000))
    inits: int = option(10, "Random starts per sample or batch (mean and best-of over them).",
                        integer(low=1, high=1000))
    batch: int = option(1, "B, images reconstructed together from their one averaged gradient (1: single "
                        "images; B > 1: the sign-rule attacks are given the batch's labels).",
                        integer(low=1, high=MAX_BATCH))
    attack_steps: int = option(200, "I, GD iterations of every attack.", integer(low=1, high=100_000))
    lr: float = option(0.5, "GD step size of dlg and idlg.", number(low=0.0, low_open=True, high=1e6))
    ggl_clip: float = option(1.0, "S of GGL's clipping defence g / max(1, ||g|| / S), its own setting in the paper "
                             "(0: off).", number(low=0.0, high=1e6))
    attacks: tuple[str, ...] = option(",".join(ATTACKS), "Attacks, comma-separated: " + ", ".join(ATTACKS)
                                      + " (ggl: PCA-linear decoder, a deviation).", ATTACK_NAMES)
    lipschitz: str = option("full", "L_R in the bound: full (prod over all of M_1, the paper) or w (the w-block "
                            "only).", choice(LIPSCHITZ))
    feed: str = option("fitted", "Each layer's fitting input: fitted (greedy) or true (the previous true iterate).",
                       choice(FEEDS))
    gamma_rule: str = option("theorem", "theorem: max(8L/mu, E); proof: that - 1.", choice(GAMMA_RULES))
    mu_rule: str = option("paper", "paper: mu = lam; tight: mu = 2 lam.", choice(MU_RULES), flag="--mu")
    init_mean: float = option(0.0, "Mean of the attacks' Gaussian init.", number(low=-1e3, high=1e3))
    init_std: float = option(1.0, "Standard deviation of the attacks' Gaussian init.",
                             number(low=0.0, low_open=True, high=1e3))
    model: str = option("binary", "binary (the paper's) or softmax LogReg.", choice(KINDS))
    dataset: str = option("digits", "digits (scikit-learn's 8x8, d = 64) or mnist5k (28x28, d = 784, the paper's "
                          "MNIST size).", choice(DATASETS))
    digits: tuple[int, ...] = option("0,1", "The digits of the dataset to use.", DIGITS)
    sensitivity: bool = option(True, "L_R over ridge x input x H.", flag="--sensitivity/--no-sensitivity")
    trends: bool = option(True, "The bound's trends in E, N and T (trends.png).", flag="--trends/--no-trends")
    seed: int = option(0, "Seed of the data split, FedAvg, the attacks' inits and the fit's pairs.",
                       integer(low=0, high=2**63 - 1))

    def check(self) -> None:
        if self.layers > self.attack_steps:
            raise SplitlabError(f"--layers must be between 1 and the attack's {self.attack_steps} steps, "
                                f"got {self.layers}")
        if self.model == "binary" and len(self.digits) != 2:
            raise SplitlabError(f"--model binary needs two --digits, got {','.join(map(str, self.digits))}")
        available = len(load_digits(self.digits, self.dataset).labels)
        check_int("--devices", self.devices, low=1, high=available)
        check_int("--samples", self.samples, low=1, high=available // self.devices * self.devices)
        if self.batch > self.samples:
            raise SplitlabError(f"--batch {self.batch} needs at least as many --samples, got {self.samples}")

    @property
    def attack(self) -> AttackSettings:
        """The attacks' settings: --lr sets dlg's and idlg's step; invgrad's and ggl's keep theirs."""
        return AttackSettings(steps=self.attack_steps, lr={**AttackSettings().lr, "dlg": self.lr, "idlg": self.lr},
                              init=(self.init_mean, self.init_std), ggl_clip=self.ggl_clip, dataset=self.dataset)

    @property
    def batches(self) -> int:
        """M, the attacked batches: the first samples // B * B images, B at a time."""
        return self.samples // self.batch

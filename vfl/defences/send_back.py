"""The label party's defences at the send-back point: what the server does to the cut gradient G = dL/dH
before it returns it (`vfl.protocol.Server(defences=...)`), against a feature party that infers the labels
from the gradients it receives (Li et al., ICLR 2022; Fu et al., USENIX Security 2022). A client-side
defence (`vfl.defences`) cannot help here: the client is the attacker.

Each acts per example on the batch's gradient, flattened to (B, d), and may read the batch's labels (the
label party holds them); the training uses the perturbed gradient, so each one's cost in task accuracy is
measured beside the leak it stops.

- `max-norm`: Li et al.'s heuristic: g_j <- g_j (1 + sigma_j xi_j), xi_j ~ N(0, 1) one per example, with
  sigma_j = sqrt(max_k ||g_k||^2 / ||g_j||^2 - 1): every example's expected squared norm becomes the batch's
  largest, so the norm no longer tells the classes apart (the direction is kept).
- `marvell:scale=S`: Li et al.'s Marvell: class-dependent Gaussian noise whose covariances minimise the
  symmetrised KL divergence of the perturbed classes under the power budget P = S ||m1 - m0||^2
  (`vfl.marvell`), re-solved on every batch from its own class statistics. Binary tasks only. A batch
  holding one class only reuses the last batch's solution (none before the first).
- `gradient-noise:ratio=R` or `gradient-noise:sigma=S`: isotropic Gaussian noise N(0, s^2 I) with
  s = R max_k ||g_k|| / sqrt(d) (Li et al.'s `iso` baseline, scaled to the batch's largest gradient) or the
  absolute s = S (the client-side defence of the same name, moved to the label party).
- `sparsify:drop=F`: gradient sparsification: zero the fraction F of each example's gradient entries with
  the smallest magnitude (Fu et al.'s GS defence; the HFL upload defence `topk` per example).

Each is declared by a `DefenceSpec` at the send-back point (`vfl.defences.registry`: one parser for every
defence). Noise comes from a generator of the defence's own (option `seed`, default 0).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn

from dataclasses import dataclass

from vfl.defences.base import SeededNoise
from vfl.defences.base import seed_option
from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation
from vfl.errors import SplitlabError
from vfl.marvell import Solution, solve
from vfl.options import number, option, optional

__all__ = ["SendBackDefence", "MaxNorm", "Marvell", "IsoNoise", "Sparsify", "MAX_NORM", "MARVELL",
           "GRADIENT_NOISE", "SPARSIFY"]

LI = "Li et al., Label Leakage and Protection in Two-party Split Learning (ICLR 2022)"
FU = "Fu et al., Label Inference Attacks Against Vertical Federated Learning (USENIX Security 2022)"


class SendBackDefence:
    """Base of the label party's defences, every hook the identity unless a defence overrides it (`vfl.protocol.Server`
    calls them): `on_training_labels(labels)` once on all its training labels before training (the labels point),
    `layer` between the activations it receives and its top model with its `penalty()` added to the loss (the
    label-layers point), `on_send(G, labels)` the gradient it sends instead of G (the send-back point). A defence
    with `class_gradients` is given, before `on_send`, the batch's cut gradient as if every label were class c, for
    each c (`per_class`)."""

    name = "none"
    layer: nn.Module | None = None
    class_gradients = False

    def on_training_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return labels

    def penalty(self) -> torch.Tensor | None:
        """The loss term of `layer`'s last forward pass (None: none)."""
        return None

    def on_send(self, g: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        return g

    def report(self) -> dict[str, Any]:
        """What the defence did over the run (Marvell's divergence bound), for metrics.json."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What changes as the defence is used, for a checkpoint to resume from bit for bit: the position of each of
        its noise streams (its own and its layer's), its counters and the numbers it fixed from what it met (DCAE's
        bin width, set by the first batch)."""
        state: dict[str, Any] = {}
        for owner, prefix in ((self, ""), (self.layer, "layer.")):
            for name, value in (vars(owner).items() if owner is not None else ()):
                if isinstance(value, SeededNoise):
                    state[prefix + name] = value.state_dict()
                elif isinstance(value, (int, float)) and not isinstance(value, bool) and owner is self:
                    state[name] = value
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            owner, _, name = key.rpartition(".")
            target = self.layer if owner == "layer" else self
            current = getattr(target, name)
            if isinstance(current, SeededNoise):
                current.load_state_dict(value)
            else:
                setattr(target, name, value)


def _rows(g: torch.Tensor) -> torch.Tensor:
    return g.reshape(len(g), -1)


class MaxNorm(SendBackDefence):
    name = "max-norm"

    def __init__(self, seed: int = 0):
        self.noise = SeededNoise(1.0, seed)

    def on_send(self, g: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        squared = _rows(g).pow(2).sum(1)
        sigma = (squared.max() / squared.clamp_min(torch.finfo(g.dtype).tiny) - 1).clamp_min(0).sqrt()
        xi = self.noise.noise_like(squared)
        factor = 1 + sigma * xi
        return g * factor.view(-1, *[1] * (g.dim() - 1))


class IsoNoise(SendBackDefence):
    name = "gradient-noise"

    def __init__(self, ratio: float | None = None, sigma: float | None = None, seed: int = 0):
        self.ratio, self.sigma = ratio, sigma
        self.noise = SeededNoise(1.0, seed)

    def on_send(self, g: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        rows = _rows(g)
        scale = self.sigma if self.sigma is not None else \
            self.ratio * rows.norm(dim=1).max() / math.sqrt(rows.shape[1])
        return g + scale * self.noise.noise_like(g)


class Sparsify(SendBackDefence):
    name = "sparsify"

    def __init__(self, drop: float):
        self.drop = drop

    def on_send(self, g: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        rows = _rows(g)
        dropped = math.floor(self.drop * rows.shape[1])
        if dropped == 0:
            return g
        smallest = rows.abs().topk(dropped, dim=1, largest=False).indices
        return rows.scatter(1, smallest, 0.0).view_as(g)


class Marvell(SendBackDefence):
    name = "marvell"

    def __init__(self, scale: float, seed: int = 0):
        self.scale = scale
        self.noise = SeededNoise(1.0, seed)
        self.last: tuple[torch.Tensor, Solution] | None = None
        self.solutions: list[Solution] = []

    def _solve(self, rows: torch.Tensor, positive: torch.Tensor) -> tuple[torch.Tensor, Solution] | None:
        pos, neg = rows[positive], rows[~positive]
        if len(pos) == 0 or len(neg) == 0:
            return self.last                         # one class only: no class statistics in this batch
        gap = pos.mean(0) - neg.mean(0)
        stats = torch.stack([gap.pow(2).sum(), neg.var(0, correction=0).mean(), pos.var(0, correction=0).mean()])
        g, u, v = stats.double().cpu().tolist()      # one host read per batch: the solver runs on the CPU
        solution = solve(u, v, rows.shape[1], g, len(pos) / len(rows), self.scale)
        self.solutions.append(solution)
        return gap / gap.norm().clamp_min(torch.finfo(gap.dtype).tiny), solution

    def on_send(self, g: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        if labels is None:
            raise SplitlabError("marvell needs the batch's labels: it is the label party's defence")
        rows = _rows(g)
        positive = labels == 1
        self.last = found = self._solve(rows, positive)
        if found is None:
            return g
        axis, s = found
        along = torch.where(positive, math.sqrt(s.lam11 - s.lam21), math.sqrt(s.lam10 - s.lam20)).to(rows.dtype)
        spread = torch.where(positive, math.sqrt(s.lam21), math.sqrt(s.lam20)).to(rows.dtype)
        xi = self.noise.noise_like(rows[:, 0])
        noise = (along * xi)[:, None] * axis + spread[:, None] * self.noise.noise_like(rows)
        return (rows + noise).view_as(g)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.last is not None:                   # the solution a batch of one class reuses
            state["last"] = {"axis": self.last[0], **dataclasses.asdict(self.last[1])}
        state["solutions"] = [dataclasses.asdict(s) for s in self.solutions]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        last = state.pop("last", None)
        self.solutions = [Solution(**s) for s in state.pop("solutions", [])]
        if last is not None:
            axis = last.pop("axis")
            self.last = (axis, Solution(**last))
        super().load_state_dict(state)

    def report(self) -> dict[str, Any]:
        if not self.solutions:
            return {"marvell_batches": 0}
        n = len(self.solutions)
        return {"marvell_batches": n, "marvell_sum_kl_mean": sum(s.sum_kl for s in self.solutions) / n,
                "marvell_sum_kl_before_mean": sum(s.sum_kl_before for s in self.solutions) / n,
                "marvell_error_bound_mean": sum(s.error_bound for s in self.solutions) / n}


@dataclass(frozen=True, kw_only=True)
class SeedOnly(DefenceSettings):
    seed: int = seed_option("the noise")


@dataclass(frozen=True, kw_only=True)
class MarvellSettings(DefenceSettings):
    scale: float = option(help="Power budget P = scale ||m1 - m0||^2 (the paper's s; 0: no noise).",
                          check=number(low=0, high=1e6))
    seed: int = seed_option("the noise")


@dataclass(frozen=True, kw_only=True)
class IsoSettings(DefenceSettings):
    ratio: float | None = option(None, "Noise scale relative to the batch's largest gradient: s = ratio max ||g|| / "
                                 "sqrt(d) (Li et al.'s iso).", optional(number(low=0, high=1e6)))
    sigma: float | None = option(None, "Absolute noise scale s.", optional(number(low=0, high=1e6)))
    seed: int = seed_option("the noise")

    def check(self) -> None:
        if (self.ratio is None) == (self.sigma is None):
            raise SplitlabError("gradient-noise takes one of ratio=R (relative to the batch's largest gradient, "
                                "Li et al.'s iso) or sigma=S (absolute)")


@dataclass(frozen=True, kw_only=True)
class SparsifySettings(DefenceSettings):
    drop: float = option(help="Fraction of each example's gradient entries zeroed (the smallest in magnitude).",
                         check=number(low=0, high=1, high_open=True))


MAX_NORM = DefenceSpec(
    name="max-norm", point="send-back", title="noise that gives every example's gradient the batch's largest "
    "expected norm (the norm no longer tells the classes apart)", paper=LI, settings=SeedOnly,
    build=lambda s, where: MaxNorm(s.seed), example="max-norm")

MARVELL = DefenceSpec(
    name="marvell", point="send-back", title="class-dependent Gaussian noise minimising the perturbed classes' "
    "divergence under a power budget", paper=LI, settings=MarvellSettings, needs=("binary-task",),
    build=lambda s, where: Marvell(s.scale, s.seed), example="marvell:scale=1", zero={"scale": 0.0},
    strengths=({"scale": 0.25}, {"scale": 1.0}, {"scale": 4.0}),
    deviations=(Deviation("solver", "the paper's optimisation of the four covariance parameters", "re-solved on "
                          "every batch from its own class statistics; a batch of one class reuses the last solution",
                          "the per-batch statistics are what the label party has"),))

GRADIENT_NOISE = DefenceSpec(
    name="gradient-noise", point="send-back", title="isotropic Gaussian noise on the cut gradient the label party "
    "sends, relative to the batch's largest gradient or absolute", paper=f"{LI} (its iso baseline)",
    settings=IsoSettings, build=lambda s, where: IsoNoise(s.ratio, s.sigma, s.seed), example="gradient-noise:ratio=1",
    zero={"sigma": 0.0}, strengths=({"ratio": 0.5}, {"ratio": 2.0}, {"ratio": 8.0}))

SPARSIFY = DefenceSpec(
    name="sparsify", point="send-back", title="zero the smallest-magnitude fraction of each example's cut gradient",
    paper=f"{FU} (its gradient sparsification defence)", settings=SparsifySettings,
    build=lambda s, where: Sparsify(s.drop), example="sparsify:drop=0.9", zero={"drop": 0.0},
    strengths=({"drop": 0.5}, {"drop": 0.9}, {"drop": 0.99}))

"""FedAvg as Theorems 1 and 2 assume it (paper §3.1, Eq. 2, App. A/B; Li et al., ICLR 2020).

Every device k copies the global model and takes E local SGD steps on one uniformly drawn sample,

    w^k_{t+1} = w^k_t - eta_t grad l(w^k_t; xi^k_t),      eta_t = 2 / (mu (gamma + t)),  gamma = max{8L/mu, E}

and every E steps the server aggregates: full participation w = sum_k p_k w^k; partial participation by
Assumption 6 (Li et al.'s scheme I): K devices drawn i.i.d. with replacement with probabilities p_k,
w = (1/K) sum over the draws (Scheme I, as Assumption 6 states; Sec. 3.1 describes Scheme II). Data are split evenly (p_k = 1/N).

Indexing (the theorem's t counts rounds, its proof's SGD steps; the proof's is used): t counts SGD steps and w_1 is the initial model, as in the proof; the global model
after round r is w_{rE+1}. Seeds run together along a leading dimension.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from theory_checks.bounds.logreg import DTYPE, Digits, LogReg
from vfl.errors import SplitlabError
from vfl.runtime import generator

GAMMA_RULES = ("theorem", "proof")
MU_RULES = ("paper", "tight")


@dataclass(frozen=True)
class Federation:
    """The data of N devices, evenly split: x (N, n_k, d), y (N, n_k), p_k = 1/N."""
    x: torch.Tensor
    y: torch.Tensor

    @property
    def devices(self) -> int:
        return self.x.shape[0]

    @property
    def weights(self) -> torch.Tensor:
        return torch.full((self.devices,), 1.0 / self.devices, dtype=DTYPE)

    @property
    def all_x(self) -> torch.Tensor:
        return self.x.flatten(0, 1)

    @property
    def all_y(self) -> torch.Tensor:
        return self.y.flatten(0, 1)


def split_evenly(data: Digits, devices: int, *, seed: int = 0) -> Federation:
    """A seeded random permutation cut into N equal shards (the n mod N left-over samples are dropped)."""
    per_device = len(data.labels) // devices
    if per_device < 1:
        raise SplitlabError(f"{devices} devices for {len(data.labels)} samples leaves a device empty")
    order = torch.randperm(len(data.labels), generator=generator(seed))[: devices * per_device]
    return Federation(data.flat[order].view(devices, per_device, -1), data.labels[order].view(devices, per_device))


def schedule_gamma(L: float, mu: float, local_steps: int, rule: str = "theorem") -> float:
    """gamma = max{8L/mu, E} (Theorem 1, default) or max{8L/mu, E} - 1 (the proof's; both are valid)."""
    if rule not in GAMMA_RULES:
        raise SplitlabError(f"unknown gamma rule {rule!r}; choose one of: {', '.join(GAMMA_RULES)}")
    gamma = max(8 * L / mu, float(local_steps))
    return gamma - 1 if rule == "proof" else gamma


def step_sizes(mu: float, gamma: float, steps: int) -> torch.Tensor:
    """eta_t = 2 / (mu (gamma + t)) for t = 1..steps."""
    t = torch.arange(1, steps + 1, dtype=DTYPE)
    return 2.0 / (mu * (gamma + t))


@dataclass(frozen=True)
class Trajectory:
    """`global_w` (S, TE+1, p): w_t = sum_k p_k w^k_t for t = 1..TE+1 (index t-1; at aggregation steps the
    aggregate); `local_w` (S, TE, N, p): w^k_t where device k drew its stochastic gradient at step t."""
    global_w: torch.Tensor
    local_w: torch.Tensor
    eta: torch.Tensor
    local_steps: int
    participation: int | None

    def after_round(self, r: int) -> torch.Tensor:
        """The global models (S, p) after round r (w_{rE+1}; r = 0 is w_1)."""
        return self.global_w[:, r * self.local_steps]


def fedavg(model: LogReg, fed: Federation, eta: torch.Tensor, local_steps: int, *, seeds: int,
           participation: int | None = None, w1: torch.Tensor | None = None, seed: int = 0) -> Trajectory:
    """Run FedAvg for len(eta) SGD steps (a multiple of E) for `seeds` independent seeds at once."""
    steps, N = len(eta), fed.devices
    if steps % local_steps:
        raise SplitlabError(f"{steps} SGD steps are not whole rounds of E = {local_steps}")
    if participation is not None and participation < 1:
        raise SplitlabError(f"participation K must be >= 1, got {participation}")
    gen = generator(seed)
    w = (torch.zeros(model.params, dtype=DTYPE) if w1 is None else w1).expand(seeds, N, -1).clone()
    rows = torch.arange(N)
    global_w, local_w = [w[:, 0].clone()], []
    for t in range(steps):
        pick = torch.randint(fed.x.shape[1], (seeds, N), generator=gen)
        local_w.append(w.clone())
        w = w - eta[t] * model.sample_grads(w, fed.x[rows, pick], fed.y[rows, pick])
        if (t + 1) % local_steps == 0:
            if participation is None:
                w = (fed.weights[:, None] * w).sum(1, keepdim=True).expand(-1, N, -1).clone()
            else:
                drawn = torch.multinomial(fed.weights.expand(seeds, -1), participation, replacement=True,
                                          generator=gen)
                w = w[torch.arange(seeds)[:, None], drawn].mean(1, keepdim=True).expand(-1, N, -1).clone()
        global_w.append((fed.weights[:, None] * w).sum(1))
    return Trajectory(torch.stack(global_w, 1), torch.stack(local_w, 1), eta, local_steps, participation)

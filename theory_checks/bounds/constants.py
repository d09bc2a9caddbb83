"""The constants of Theorems 1 and 2 and the bound itself (paper §4.1, Eqs. 5-6, App. A/B, C.1.1).

    B = sum_k p_k^2 sigma_k^2 + 6 L Gamma + 8 (E - 1)^2 G^2          C = 4 E^2 G^2 / K
    v = 4 (B [+ C]) / mu^2 + (gamma + 1) Delta_1                     Delta_1 = ||w_1 - w*||^2
    E||w_t - w*||^2 <= v / (gamma + t)                               (Li et al.; proof of Thm 1)
    bound(t) = 2 err(w*) + L_R^2 Phi(t),   Phi(t) = 2 v / (gamma + t)  (Eq. 5; Eq. 6 with B + C)

L: the paper's max_k (1/4) mean_j ||x_j^k||^2 + 2 lam; mu = lam (the paper's; the true strong convexity is 2 lam). sigma_k^2: the largest
||grad l(w, xi) - grad L_k(w)||^2 over the device's samples xi and the points w^k_t of the recorded
trajectory (all seeds); G^2: the largest over k and t of the mean over xi of ||grad l(w^k_t, xi)||^2
(App. C.1.1; single-sample SGD, as the paper leaves the minibatch unstated). Gamma = L* - sum_k p_k L_k*, each minimum by Newton (the paper does not say how). v uses the
paper's loosened sum form; `v_max` is the tighter max{4B/mu^2, (gamma + 1) Delta_1} (the proof's own form).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from theory_checks.bounds.fedavg import Federation, Trajectory
from theory_checks.bounds.logreg import LogReg, newton


@dataclass(frozen=True)
class Constants:
    L: float
    mu: float
    gamma: float
    local_steps: int
    participation: int | None
    sigma2: tuple[float, ...]
    G2: float
    Gamma: float
    B: float
    C: float
    delta1: float
    w_star: torch.Tensor = field(repr=False)

    @property
    def v(self) -> float:
        """4 (B + C) / mu^2 + (gamma + 1) Delta_1 (C = 0 under full participation)."""
        return 4 * (self.B + self.C) / self.mu ** 2 + (self.gamma + 1) * self.delta1

    @property
    def v_max(self) -> float:
        return max(4 * (self.B + self.C) / self.mu ** 2, (self.gamma + 1) * self.delta1)

    def rate(self, t: torch.Tensor | float) -> torch.Tensor | float:
        """v / (gamma + t): the bound on E||w_t - w*||^2."""
        return self.v / (self.gamma + t)

    def phi(self, t: torch.Tensor | float) -> torch.Tensor | float:
        """Phi(t) = 2 v / (gamma + t): the bound's term per unit L_R^2."""
        return 2 * self.rate(t)

    def bound(self, err_star: float, lipschitz: float, t: float) -> float:
        """Eq. 5 (Eq. 6 when `participation` is set): 2 err(w*) + L_R^2 Phi(t) (inf past float range: an
        unregularised surrogate's L_R can be 1e100 and more, and float ** 2 would raise)."""
        return 2 * err_star + lipschitz * lipschitz * float(self.phi(t))

    def as_dict(self) -> dict:
        return {"L": self.L, "mu": self.mu, "gamma": self.gamma, "E": self.local_steps, "K": self.participation,
                "sigma2_max": max(self.sigma2), "sum_pk2_sigma2": sum(self.sigma2) / len(self.sigma2) ** 2,
                "G2": self.G2, "Gamma": self.Gamma, "B": self.B, "C": self.C, "delta1": self.delta1,
                "v": self.v, "v_max": self.v_max, "eta_1": 2 / (self.mu * (self.gamma + 1))}


def heterogeneity(model: LogReg, fed: Federation) -> tuple[float, torch.Tensor]:
    """(Gamma, w*): Gamma = L(w*) - sum_k p_k min L_k >= 0, all minima by Newton."""
    w_star = newton(model, fed.all_x, fed.all_y)
    local = sum(float(p) * float(model.loss(newton(model, x, y), x, y))
                for p, x, y in zip(fed.weights, fed.x, fed.y))
    return float(model.loss(w_star, fed.all_x, fed.all_y)) - local, w_star


def gradient_moments(model: LogReg, fed: Federation, trajectory: Trajectory, *, chunk: int = 25
                     ) -> tuple[torch.Tensor, float]:
    """(sigma_k^2 per device (N,), G^2) over every recorded local point of every seed."""
    local = trajectory.local_w.flatten(0, 1)                               # (S*TE, N, p)
    sigma2 = torch.zeros(fed.devices, dtype=local.dtype)
    G2 = 0.0
    for start in range(0, local.shape[0], chunk):
        grads = model.sample_grads(local[start:start + chunk, :, None], fed.x, fed.y)   # (c, N, n_k, p)
        spread = (grads - grads.mean(2, keepdim=True)).square().sum(-1)    # (c, N, n_k)
        sigma2 = torch.maximum(sigma2, spread.amax(dim=(0, 2)))
        G2 = max(G2, float(grads.square().sum(-1).mean(2).max()))
    return sigma2, G2


def constants(model: LogReg, fed: Federation, trajectory: Trajectory, *, L: float, mu: float, gamma: float,
              w1: torch.Tensor | None = None) -> Constants:
    """Every constant of Theorem 1 (Theorem 2 when the trajectory used partial participation)."""
    Gamma, w_star = heterogeneity(model, fed)
    sigma2, G2 = gradient_moments(model, fed, trajectory)
    E, K = trajectory.local_steps, trajectory.participation
    p = fed.weights
    B = float((p ** 2 * sigma2).sum()) + 6 * L * Gamma + 8 * (E - 1) ** 2 * G2
    C = 4 * E ** 2 * G2 / K if K is not None else 0.0
    start = trajectory.global_w[0, 0] if w1 is None else w1
    return Constants(L=L, mu=mu, gamma=gamma, local_steps=E, participation=K,
                     sigma2=tuple(float(s) for s in sigma2), G2=G2, Gamma=Gamma, B=B, C=C,
                     delta1=float((start - w_star).square().sum()), w_star=w_star)

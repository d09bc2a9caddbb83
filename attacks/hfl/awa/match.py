"""AWA's enhanced squared-L2 match of a FedAvg update (Song, Wang, Zuazua, Section 4.2, eqs. 23-30).

    l_Q(x) = sum_l q^(l) || s^(l) - o^(l) ||^2                                     (eq. 23)
    q^(l)  = the eq. (24) ramp of its type (`attacks.engine.layer_weights`), except
    q^(l)  = q_en for l in P = top-ceil(p_mean L) of e_mean  ∩  top-ceil(p_var L) of e_var   (eqs. 25-30)

Q = (q_cv, q_bn, q_fc, q_en, p_mean, p_var) is a tensor in the target, so several Q values run as batched
trials under vmap.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from attacks.kit import LayerGroups, total

__all__ = ["Q_NAMES", "enhancement_counts", "EnhancedSquaredL2"]

Q_NAMES = ("q_cv", "q_bn", "q_fc", "q_en", "p_mean", "p_var")
"""The six numbers of Q, in the order the Q tensor holds them (the paper's Table II/III rows)."""


def enhancement_counts(p_mean: float, p_var: float, layers: int) -> tuple[int, int]:
    """Eqs. (28)-(29): how many layers the mean and the variance criteria each select, ceil(p L)."""
    return math.ceil(p_mean * layers), math.ceil(p_var * layers)


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One layer's entries as a vector (a reshape, not a copy, for a one-tensor layer)."""
    return tensors[0].reshape(-1) if len(tensors) == 1 else torch.cat([t.reshape(-1) for t in tensors])


def _rank(values: torch.Tensor) -> torch.Tensor:
    """0 for the largest value, 1 for the next ...; ties by position (vmap-safe, no data-dependent shapes)."""
    return torch.argsort(torch.argsort(values, descending=True, stable=True), stable=True)


@dataclass(frozen=True)
class EnhancedSquaredL2:
    """AWA's match: sum over layers of q^(l) ||s^(l) - o^(l)||^2 with the ramp weights of eq. (24), except
    that the layers in P (large relative errors of both the mean and the variance of their entries,
    eqs. 25-30) get q_en. P is recomputed at every evaluation from the detached current errors, so it
    steers the weights but is not differentiated; `eps` guards the relative errors against a zero mean
    or variance of the target.

    `observed` is `target(update, Q)`: the update (one tensor per parameter), Q = (q_cv, q_bn, q_fc, q_en,
    p_mean, p_var) as a tensor, so Q can differ per trial (`run(per_trial_target=True)`), and the update's
    per-layer entry mean and variance. With every q = 1 the value is `SquaredL2()`'s.
    """
    groups: LayerGroups
    eps: float = 1e-12

    def target(self, update: Sequence[torch.Tensor], q: torch.Tensor, trials: int | None = None) -> dict:
        """`observed` for this match. The update's per-layer statistics are constant through a run, so they
        are computed here once, not at every evaluation. With `trials`, the update and its statistics are
        expanded along a leading trial dimension to go beside per-trial Q of shape (trials, 6)."""
        flats = [_flat([update[i] for i in m]) for m in self.groups.members]
        observed = {"update": list(update), "mean": torch.stack([o.mean() for o in flats]),
                    "var": torch.stack([o.var(unbiased=False) for o in flats])}
        if trials is not None:
            observed = {"update": [u.expand(trials, *u.shape) for u in observed["update"]],
                        **{k: observed[k].expand(trials, -1) for k in ("mean", "var")}}
        return {**observed, "q": q}

    def weights(self, simulated: Sequence[torch.Tensor], observed: Mapping[str, object]) -> torch.Tensor:
        """q^(l) per layer at these simulated updates (detached)."""
        q, o_mean, o_var = observed["q"], observed["mean"], observed["var"]
        flats = [_flat([simulated[i].detach() for i in m]) for m in self.groups.members]
        s_mean, s_var = torch.stack([s.mean() for s in flats]), torch.stack([s.var(unbiased=False) for s in flats])
        e_mean = (s_mean - o_mean).abs() / o_mean.abs().clamp_min(self.eps)
        e_var = (s_var - o_var).abs() / o_var.clamp_min(self.eps)
        layers = self.groups.layers
        n_mean, n_var = torch.ceil(q[4] * layers), torch.ceil(q[5] * layers)
        chosen = (_rank(e_mean) < n_mean) & (_rank(e_var) < n_var)
        kind_index, fraction = self.groups._ramp_tables(q.device, q.dtype)
        ramps = 1 + (q[:3][kind_index] - 1) * fraction
        return torch.where(chosen, q[3], ramps)

    def __call__(self, simulated: Sequence[torch.Tensor], observed: Mapping[str, object]) -> torch.Tensor:
        target = observed["update"]
        errors = [(s - o).square().sum() for s, o in zip(simulated, target)]
        w = self.weights(simulated, observed)
        grouped = total(w[g] * total(errors[i] for i in m) for g, m in enumerate(self.groups.members))
        rest = [errors[i] for i in self.groups.ungrouped]
        return grouped + total(rest) if rest else grouped

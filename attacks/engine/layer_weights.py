"""Per-layer weights for update matching: conv / BN / FC layer groups, per-type linear ramps, and the
enhanced squared-L2 match of the approximate-and-weighted FedAvg attack (Song, Wang, Zuazua, AWA,
Section 4.2, eqs. 23-30).

    l_Q(x) = sum_l q^(l) || s^(l) - o^(l) ||^2                                     (eq. 23)
    q^(l)  = 1 + (q_type - 1) (i - 1) / (L_type - 1), i = index within its type  (eq. 24; q_type if L_type = 1)
    q^(l)  = q_en for l in P = top-ceil(p_mean L) of e_mean  ∩  top-ceil(p_var L) of e_var   (eqs. 25-30)

A layer is a module (a conv's weight and bias, a BN's gamma and beta, a Linear's W and b together),
in registration order, which for the lab's models is the forward order. Q = (q_cv, q_bn, q_fc, q_en,
p_mean, p_var) is a tensor in the target, so several Q values run as batched trials under vmap.
"""
from __future__ import annotations

import functools

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import torch
from torch import nn

from attacks.engine.matches import total

__all__ = ["KINDS", "Q_NAMES", "LayerGroups", "ramp", "enhancement_counts", "EnhancedSquaredL2"]

KINDS = ("conv", "bn", "fc")
Q_NAMES = ("q_cv", "q_bn", "q_fc", "q_en", "p_mean", "p_var")
"""The six numbers of Q, in the order the Q tensor holds them (the paper's Table II/III rows)."""
_TYPES = ((nn.modules.conv._ConvNd, "conv"), (nn.modules.batchnorm._NormBase, "bn"), (nn.Linear, "fc"))


def ramp(q: float, count: int) -> list[float]:
    """Eq. (24): weights of the `count` layers of one type, 1 for the first rising linearly to q for the
    last (q itself when the type has one layer)."""
    if count == 1:
        return [float(q)]
    return [1 + (q - 1) * i / (count - 1) for i in range(count)]


def enhancement_counts(p_mean: float, p_var: float, layers: int) -> tuple[int, int]:
    """Eqs. (28)-(29): how many layers the mean and the variance criteria each select, ceil(p L)."""
    return math.ceil(p_mean * layers), math.ceil(p_var * layers)


def _kind(module: nn.Module) -> str | None:
    return next((kind for cls, kind in _TYPES if isinstance(module, cls)), None)


@dataclass(frozen=True)
class LayerGroups:
    """Parameter tensors grouped into layers, each of a kind (conv, bn, fc), in forward order.

    `members[g]` lists the indices (into the model's `named_parameters` order) of layer g. Parameters of
    other module types form no layer: they keep weight 1 and are not ranked for enhancement.
    """
    members: tuple[tuple[int, ...], ...]
    kinds: tuple[str, ...]
    n_params: int
    _tables: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    @classmethod
    def of(cls, model: nn.Module, level: str = "module") -> "LayerGroups":
        """Module-level layers (the paper's natural reading: L = 41 for ResNet-18), or `level="parameter"`:
        every parameter tensor its own layer (L = 62 for ResNet-18)."""
        if level not in ("module", "parameter"):
            raise ValueError(f"unknown layer grouping {level!r}; use module or parameter")
        index = {id(p): i for i, p in enumerate(model.parameters())}
        members, kinds = [], []
        for module in model.modules():
            kind = _kind(module)
            own = [index[id(p)] for p in module.parameters(recurse=False)]
            if kind is None or not own:
                continue
            for group in ([own] if level == "module" else [[i] for i in own]):
                members.append(tuple(group))
                kinds.append(kind)
        return cls(tuple(members), tuple(kinds), len(index))

    @property
    def layers(self) -> int:
        """L = L_cv + L_bn + L_fc."""
        return len(self.members)

    @functools.cached_property
    def ungrouped(self) -> tuple[int, ...]:
        """Indices of the parameters outside every layer (weight 1, never ranked)."""
        grouped = {i for m in self.members for i in m}
        return tuple(i for i in range(self.n_params) if i not in grouped)

    def count(self, kind: str) -> int:
        return self.kinds.count(kind)

    def ramp_weights(self, q_cv: float, q_bn: float, q_fc: float) -> list[float]:
        """Eq. (24) per layer, in layer order (for reporting; the match computes the same on tensors)."""
        ramps = {k: iter(ramp(q, self.count(k))) for k, q in zip(KINDS, (q_cv, q_bn, q_fc)) if self.count(k)}
        return [next(ramps[k]) for k in self.kinds]

    def _ramp_tables(self, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(kind index, fraction) per layer: the ramp is 1 + (q_kind - 1) * fraction, fraction = (i-1)/(L_k-1)
        (1 for a type with one layer, which gives q_kind). Built once per device and dtype, kept on the
        instance (not at every evaluation)."""
        if (device, dtype) not in self._tables:
            seen = dict.fromkeys(KINDS, 0)
            kind_index, fraction = [], []
            for kind in self.kinds:
                count = self.count(kind)
                fraction.append(seen[kind] / (count - 1) if count > 1 else 1.0)
                seen[kind] += 1
                kind_index.append(KINDS.index(kind))
            self._tables[device, dtype] = (torch.tensor(kind_index, device=device),
                                           torch.tensor(fraction, device=device, dtype=dtype))
        return self._tables[device, dtype]


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

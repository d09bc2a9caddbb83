"""Per-layer weights for update matching: conv / BN / FC layer groups and per-type linear ramps (the
AWA paper's eq. 24, also AGIC's weights as AWA runs it).

    q^(l)  = 1 + (q_type - 1) (i - 1) / (L_type - 1), i = index within its type  (eq. 24; q_type if L_type = 1)

A layer is a module (a conv's weight and bias, a BN's gamma and beta, a Linear's W and b together),
in registration order, which for the lab's models is the forward order.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass, field

import torch
from torch import nn


__all__ = ["KINDS", "LayerGroups", "ramp"]

KINDS = ("conv", "bn", "fc")
_TYPES = ((nn.modules.conv._ConvNd, "conv"), (nn.modules.batchnorm._NormBase, "bn"), (nn.Linear, "fc"))


def ramp(q: float, count: int) -> list[float]:
    """Eq. (24): weights of the `count` layers of one type, 1 for the first rising linearly to q for the
    last (q itself when the type has one layer)."""
    if count == 1:
        return [float(q)]
    return [1 + (q - 1) * i / (count - 1) for i in range(count)]


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

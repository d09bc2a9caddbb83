"""The trigger a poisoning feature party stamps on its own features: on images a square patch in the bottom-right
corner set to the brightest value of the training split (the corners of a digit are dark, so the patch shows), on
tabular samples the last few features each set to the largest value the training split gives it (a value the data
can hold, so the trigger is not an out-of-range marker)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Trigger"]


@dataclass(frozen=True, eq=False)
class Trigger:
    size: int
    """Side of the patch in pixels (images) or number of features (tabular)."""
    value: torch.Tensor
    """What the stamped positions are set to, shaped like one sample's stamped part."""

    @classmethod
    def for_data(cls, train: torch.Tensor, size: int) -> "Trigger":
        value = train.amax() if train.dim() == 4 else cls._part(train, size).amax(0)
        return cls(size, value)

    @staticmethod
    def _part(x: torch.Tensor, size: int) -> torch.Tensor:
        return x[..., -size:, -size:] if x.dim() == 4 else x[..., -size:]

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """A copy of `x` (N, ...) with the trigger stamped on every sample."""
        out = x.clone()
        self._part(out, self.size)[...] = self.value.to(out)
        return out

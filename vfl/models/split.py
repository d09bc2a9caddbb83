"""A network as an ordered list of layers with named cut layers.

Cut layer k puts layers 0..k on the client and layers k+1.. on the server, the index semantics of
the UnSplit/JAST code (`forward(x, start, end)` with the client running indices <= end). Client and
server are views of the same modules, so a split model and the whole model share parameters.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


class SplitNet(nn.Module):
    def __init__(self, layers: Sequence[nn.Module], cut_layers: Sequence[int]):
        super().__init__()
        self.layers = nn.Sequential(*layers)
        self.cut_layers = tuple(cut_layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def client(self, cut: int) -> nn.Sequential:
        """Layers 0..cut: the client's bottom model."""
        return self.layers[: cut + 1]

    def server(self, cut: int) -> nn.Sequential:
        """Layers cut+1..: the label-holding server's top model."""
        return self.layers[cut + 1:]


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


class Flatten(nn.Flatten):
    """Flatten everything after the batch dimension (named so printed models read like the paper)."""

"""The CIFAR-10 models of the JAST paper: UnSplit's CifarNet and the MLP-Mixer client/server."""
from __future__ import annotations

import torch
from torch import nn

from vfl.models.split import Flatten, SplitNet


def cifar_cnn() -> SplitNet:
    """UnSplit's CifarNet (1,609,546 parameters): three VGG blocks, then FC 2048->512, Sigmoid, FC 10.

    Indices: 0 conv11, 1 ReLU, 2 conv12, 3 ReLU, 4 pool, 5 conv21, 6 ReLU, ... Cut 1 = conv11 + ReLU.
    """
    def conv(cin: int, cout: int) -> nn.Conv2d:
        return nn.Conv2d(cin, cout, 3, padding=1)

    return SplitNet([
        conv(3, 64), nn.ReLU(), conv(64, 64), nn.ReLU(), nn.MaxPool2d(2),
        conv(64, 128), nn.ReLU(), conv(128, 128), nn.ReLU(), nn.MaxPool2d(2),
        conv(128, 128), nn.ReLU(), conv(128, 128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Sequential(Flatten(), nn.Linear(128 * 4 * 4, 512)), nn.Sigmoid(),
        nn.Linear(512, 10),
    ], cut_layers=range(1, 7))


class PatchEmbedding(nn.Module):
    """A stride-p convolution: one dense map applied to each non-overlapping p x p patch."""

    def __init__(self, channels: int = 3, hidden: int = 128, patch: int = 4):
        super().__init__()
        self.proj = nn.Conv2d(channels, hidden, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)          # (B, tokens, hidden)


class MixerLayer(nn.Module):
    """Token mixing (across patches) then channel mixing, each pre-norm with a residual."""

    def __init__(self, tokens: int = 64, hidden: int = 128, token_hidden: int = 64, channel_hidden: int = 512):
        super().__init__()
        self.token_norm = nn.LayerNorm(hidden)
        self.token_mlp = nn.Sequential(nn.Conv1d(tokens, token_hidden, 1), nn.GELU(),
                                       nn.Conv1d(token_hidden, tokens, 1))
        self.channel_norm = nn.LayerNorm(hidden)
        self.channel_mlp = nn.Sequential(nn.Linear(hidden, channel_hidden), nn.GELU(),
                                         nn.Linear(channel_hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.token_norm(x))
        return x + self.channel_mlp(self.channel_norm(x))


class MixerHead(nn.Module):
    def __init__(self, hidden: int = 128, num_classes: int = 10):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(x).mean(dim=1))


def mlp_mixer(num_layers: int = 8) -> SplitNet:
    """MLP-Mixer for CIFAR-10 (patch 4, hidden 128, token MLP 64, channel MLP 512, 8 layers, no dropout).

    Index 0 is the patch embedding, 1..8 the Mixer layers, 9 the head. Cut k = patch embedding + k
    Mixer layers; at cut 1 the client has 6,272 + 140,544 = 146,816 parameters (the paper's Table 2).
    """
    return SplitNet([PatchEmbedding(), *[MixerLayer() for _ in range(num_layers)], MixerHead()],
                    cut_layers=range(1, num_layers))

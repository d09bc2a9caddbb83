"""The victim's networks in the Feature-Space Hijacking Attack (FSHA) setting, per split level 1-4,
and the building blocks the attacker's networks (`attacks.split.fsha.networks`) share with them.

Two client setups (Semenov et al., the JAST paper, arXiv 2412.11689, section 4.2):

| setup | client f |
|---|---|
| `resnet` (FSHA original) | conv64, BN, ReLU, maxpool, pre-activation ResBlocks |
| `mlp` (JAST) | Flatten, Dense(3072, ReLU), Dense(k), reshape |

Smashed-data (feature) shape per level, NCHW: 1 -> 64x16x16, 2 and 3 -> 128x8x8, 4 -> 256x4x4.
The dense client emits k = C*H*W numbers reshaped to that shape; its last layer is a linear cut
layer (the setting of the paper's Lemma 3). The attacker's pilot, decoder and critic are not here:
they belong to the attack (`attacks.split.fsha_networks`), and vfl imports nothing from attacks.

Choices where PyTorch and the original (TF/Keras) differ, all deliberate:

- Inputs are 3x32x32 in [-1, 1], NCHW (the original is NHWC). The dense networks reshape to
  (C, H, W) instead of (H, W, C); a dense layer's output order is arbitrary, so this is a
  permutation of units and changes nothing.
- Padding: Keras "same" pads stride-2 convolutions on even sizes only at the bottom/right; here
  every 3x3 convolution uses symmetric `padding=1` (transposed ones `padding=1, output_padding=1`),
  which gives the same output sizes with the sampling grid shifted by one pixel. The networks are
  learned, so only sizes matter.
- Initialisation as in Keras: Glorot-uniform weights and zero biases for every convolution and
  dense layer (`glorot_init_`); BatchNorm keeps gamma = 1, beta = 0. PyTorch's BatchNorm defaults
  (momentum 0.1, eps 1e-5) are kept instead of Keras' (0.99, 1e-3). The client is the lab's honest
  client, which runs its model in training mode, so BatchNorm normalises with batch statistics, as
  the public PyTorch port does. (The TF original calls its Keras models without `training=True`;
  by our reading of Keras semantics its BatchNorm then uses the never-updated moving statistics,
  i.e. acts as a fixed affine map. The PyTorch port still matches the TF curve at level 4.)
- `width` scales every channel count and hidden width (1.0 = the paper's); the `fsha.quick` preset
  uses it to fit a 2-core CPU.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from vfl.errors import SplitlabError
from vfl.runtime import seeded

INPUT_SHAPE = (3, 32, 32)
"""FSHA's images: MNIST-like data tiled to three channels and resized to 32x32, in [-1, 1]."""
LEVELS = (1, 2, 3, 4)
SETUPS = ("resnet", "mlp")

_FEATURES = {1: (64, 16), 2: (128, 8), 3: (128, 8), 4: (256, 4)}  # level -> (channels, side)


def scaled(channels: int, width: float) -> int:
    """A channel count or hidden width scaled by `width` (at least 1)."""
    return max(1, int(round(channels * width)))


def check_level(level: int) -> None:
    if level not in LEVELS:
        raise SplitlabError(f"FSHA has no split level {level}; use --cut-layer 1, 2, 3 or 4")


def feature_shape(level: int, width: float = 1.0) -> tuple[int, int, int]:
    """The smashed data's shape (C, H, W) at a split level: what the client sends."""
    check_level(level)
    channels, side = _FEATURES[level]
    return scaled(channels, width), side, side


# --- building blocks --------------------------------------------------------------------------------

def conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride, padding=1)


def deconv3x3(cin: int, cout: int) -> nn.ConvTranspose2d:
    """3x3 transposed convolution that doubles the side (Keras Conv2DTranspose(k3, s2, "same"))."""
    return nn.ConvTranspose2d(cin, cout, 3, 2, padding=1, output_padding=1)


class ResBlock(nn.Module):
    """Pre-activation residual block without BatchNorm: x + conv(relu(conv(relu(x)))).

    With stride 2 the shortcut is a strided 3x3 convolution (the original's projection); with stride
    1 it is the identity, so input and output channels must agree.
    """

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        if stride == 1 and cin != cout:
            raise ValueError("an identity shortcut needs cin == cout")
        self.conv1 = conv3x3(cin, cout, stride)
        self.conv2 = conv3x3(cout, cout)
        self.shortcut = conv3x3(cin, cout, stride) if stride > 1 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(F.relu(self.conv1(F.relu(x))))
        return (x if self.shortcut is None else self.shortcut(x)) + y


class Reshape(nn.Module):
    """(N, k) -> (N, *shape)."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


def glorot_init_(module: nn.Module) -> nn.Module:
    """Keras defaults: Glorot-uniform kernels, zero biases, for every conv, transposed conv and dense layer."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return module


# --- clients ----------------------------------------------------------------------------------------

def resnet_client(level: int, width: float = 1.0) -> nn.Sequential:
    """FSHA's client: conv64-BN-ReLU-maxpool, ResBlock64 [L1], ResBlock128 s2 [L2], ResBlock128 [L3],
    ResBlock256 s2 [L4]."""
    check_level(level)
    c64, c128, c256 = (scaled(c, width) for c in (64, 128, 256))
    layers: list[nn.Module] = [conv3x3(INPUT_SHAPE[0], c64), nn.BatchNorm2d(c64), nn.ReLU(), nn.MaxPool2d(2),
                               ResBlock(c64, c64)]
    if level >= 2:
        layers.append(ResBlock(c64, c128, stride=2))
    if level >= 3:
        layers.append(ResBlock(c128, c128))
    if level >= 4:
        layers.append(ResBlock(c128, c256, stride=2))
    return glorot_init_(nn.Sequential(*layers))


def mlp_client(level: int, width: float = 1.0) -> nn.Sequential:
    """JAST's dense client: Flatten, Dense(3072, ReLU), Dense(k) with no activation, reshape to the feature shape."""
    shape = feature_shape(level, width)
    hidden = scaled(3072, width)
    return glorot_init_(nn.Sequential(nn.Flatten(), nn.Linear(math.prod(INPUT_SHAPE), hidden), nn.ReLU(),
                                      nn.Linear(hidden, math.prod(shape)), Reshape(shape)))


def build_client(setup: str, level: int, width: float = 1.0, seed: int | None = None) -> nn.Module:
    """The victim's client model for a setup (`resnet` or `mlp`) and split level, initialised from
    `seed` in a forked random scope (`vfl.runtime.seeded`: no global seeding is left behind)."""
    if setup not in SETUPS:
        raise SplitlabError(f"unknown FSHA client {setup!r}; use --arch resnet or mlp")
    check_level(level)
    if not width > 0:
        raise SplitlabError("FSHA network width must be positive")
    build = resnet_client if setup == "resnet" else mlp_client
    if seed is None:
        return build(level, width)
    with seeded(seed):
        return build(level, width)

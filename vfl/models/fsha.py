"""The four networks of the Feature-Space Hijacking Attack (FSHA), per split level 1-4.

Two setups share the decoder (JAST paper, section 4.2; notes/papers/004 section 4.2):

| role | `resnet` setup (FSHA original) | `mlp` setup (JAST) |
|---|---|---|
| client f | conv64, BN, ReLU, maxpool, pre-activation ResBlocks | Flatten, Dense(3072, ReLU), Dense(k), reshape |
| pilot f~ | linear stride-2 convs, no activations | Flatten, 2x Dense(3072, ReLU), Dense(k), reshape |
| decoder | linear transposed convs, tanh output | (same) |
| discriminator D | conv256 entry, 6 ResBlocks(256), conv256 s2, Dense(1) | Flatten, 3x Dense(4096, ReLU), Dense(1) |

Smashed-data (feature) shape per level, NCHW: 1 -> 64x16x16, 2 and 3 -> 128x8x8, 4 -> 256x4x4.
The dense client emits k = C*H*W numbers reshaped to that shape; its last layer is a linear cut
layer (the setting of the paper's Lemma 3).

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
- The discriminator's entry: the original TF code chains `if level == 1`, `if level <= 3`,
  `if level <= 4` without `elif`, so the last assignment wins and every level <= 4 starts with a
  stride-1 conv256 on z (the strided branches are dead code). `entry="tf"` (default) builds that;
  `entry="strided"` builds the evidently intended entries (level 1: conv128 s2 + ReLU + conv256 s2;
  levels 2-3: conv256 s2; level 4: conv256 s1), as the public PyTorch port does. The two agree at
  level 4, the level the paper's runs use.
- `width` scales every channel count and hidden width (1.0 = the paper's); the `quick` preset of
  `attacks.split.fsha` uses it to fit a 2-core CPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from vfl.errors import SplitlabError

INPUT_SHAPE = (3, 32, 32)
"""FSHA's images: MNIST-like data tiled to three channels and resized to 32x32, in [-1, 1]."""
LEVELS = (1, 2, 3, 4)
SETUPS = ("resnet", "mlp")
DISCRIMINATOR_ENTRIES = ("tf", "strided")

_FEATURES = {1: (64, 16), 2: (128, 8), 3: (128, 8), 4: (256, 4)}  # level -> (channels, side)


def scaled(channels: int, width: float) -> int:
    """A channel count or hidden width scaled by `width` (at least 1)."""
    return max(1, int(round(channels * width)))


def check_level(level: int) -> None:
    if level not in LEVELS:
        raise SplitlabError(f"FSHA has no split level {level}; use --level 1, 2, 3 or 4")


def feature_shape(level: int, width: float = 1.0) -> tuple[int, int, int]:
    """The smashed data's shape (C, H, W) at a split level: what the client sends."""
    check_level(level)
    channels, side = _FEATURES[level]
    return scaled(channels, width), side, side


# --- building blocks --------------------------------------------------------------------------------

def _conv(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride, padding=1)


def _deconv(cin: int, cout: int) -> nn.ConvTranspose2d:
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
        self.conv1 = _conv(cin, cout, stride)
        self.conv2 = _conv(cout, cout)
        self.shortcut = _conv(cin, cout, stride) if stride > 1 else None

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
    layers: list[nn.Module] = [_conv(INPUT_SHAPE[0], c64), nn.BatchNorm2d(c64), nn.ReLU(), nn.MaxPool2d(2),
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


# --- the attacker's networks ------------------------------------------------------------------------

def pilot_cnn(level: int, width: float = 1.0) -> nn.Sequential:
    """Linear (activation-free) pilot encoder: conv64 s2 [+ conv64 at L1], conv128 s2 [+ conv128 at L2-3],
    conv256 s2 + conv256 [L4]."""
    check_level(level)
    c64, c128, c256 = (scaled(c, width) for c in (64, 128, 256))
    layers: list[nn.Module] = [_conv(INPUT_SHAPE[0], c64, 2)]
    if level == 1:
        layers.append(_conv(c64, c64))
    elif level <= 3:
        layers += [_conv(c64, c128, 2), _conv(c128, c128)]
    else:
        layers += [_conv(c64, c128, 2), _conv(c128, c256, 2), _conv(c256, c256)]
    return glorot_init_(nn.Sequential(*layers))


def pilot_mlp(level: int, width: float = 1.0) -> nn.Sequential:
    """JAST's dense pilot: Flatten, 2x Dense(3072, ReLU), Dense(k), reshape."""
    shape = feature_shape(level, width)
    hidden = scaled(3072, width)
    return glorot_init_(nn.Sequential(nn.Flatten(), nn.Linear(math.prod(INPUT_SHAPE), hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU(),
                                      nn.Linear(hidden, math.prod(shape)), Reshape(shape)))


def decoder(level: int, width: float = 1.0) -> nn.Sequential:
    """Linear decoder, tanh output: convT256 s2 [then conv3 at L1], convT128 s2 [then conv3 at L2-3],
    convT3 s2 [L4]."""
    cin = feature_shape(level, width)[0]
    c128, c256 = scaled(128, width), scaled(256, width)
    out = INPUT_SHAPE[0]
    layers: list[nn.Module] = [_deconv(cin, c256)]
    if level == 1:
        layers.append(_conv(c256, out))
    elif level <= 3:
        layers += [_deconv(c256, c128), _conv(c128, out)]
    else:
        layers += [_deconv(c256, c128), _deconv(c128, out)]
    layers.append(nn.Tanh())
    return glorot_init_(nn.Sequential(*layers))


def discriminator_cnn(level: int, width: float = 1.0, entry: str = "tf") -> nn.Sequential:
    """Critic on the feature space: entry conv(s), 6 ResBlocks(256), conv256 s2, Flatten, Dense(1).

    `entry="tf"` is what the original TF code runs at every level (conv256 s1); `"strided"` the
    intended level-specific entry (see the module docstring).
    """
    if entry not in DISCRIMINATOR_ENTRIES:
        raise SplitlabError(f"unknown discriminator entry {entry!r}; choose one of: {', '.join(DISCRIMINATOR_ENTRIES)}")
    cin, height, _ = feature_shape(level, width)
    c128, c256 = scaled(128, width), scaled(256, width)
    if entry == "tf" or level == 4:
        layers: list[nn.Module] = [_conv(cin, c256)]
    elif level == 1:
        layers = [_conv(cin, c128, 2), nn.ReLU(), _conv(c128, c256, 2)]
        height //= 4
    else:
        layers = [_conv(cin, c256, 2)]
        height //= 2
    layers += [ResBlock(c256, c256) for _ in range(6)]
    layers += [_conv(c256, c256, 2), nn.Flatten(), nn.Linear(c256 * math.ceil(height / 2) ** 2, 1)]
    return glorot_init_(nn.Sequential(*layers))


def discriminator_mlp(level: int, width: float = 1.0) -> nn.Sequential:
    """JAST's dense critic: Flatten, 3x Dense(4096, ReLU), Dense(1)."""
    k = math.prod(feature_shape(level, width))
    hidden = scaled(4096, width)
    return glorot_init_(nn.Sequential(nn.Flatten(), nn.Linear(k, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                      nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)))


@dataclass(frozen=True)
class FshaNetworks:
    """The client's model and the attacker's three networks for one setup and level."""
    client: nn.Module
    pilot: nn.Module
    decoder: nn.Module
    discriminator: nn.Module
    feature_shape: tuple[int, int, int]


def build_fsha(setup: str, level: int, width: float = 1.0, discriminator_entry: str = "tf",
               seed: int | None = None) -> FshaNetworks:
    """Build (seeded if asked) client, pilot, decoder and discriminator, in that order.

    `setup="resnet"`: ResNet client with the convolutional pilot and residual discriminator (FSHA).
    `setup="mlp"`: dense client with the dense pilot and dense discriminator (JAST).
    """
    if setup not in SETUPS:
        raise SplitlabError(f"unknown FSHA setup {setup!r}; use --arch resnet or mlp")
    check_level(level)
    if width <= 0:
        raise SplitlabError("FSHA network width must be positive")
    if seed is not None:
        torch.manual_seed(seed)
    if setup == "resnet":
        client, pilot = resnet_client(level, width), pilot_cnn(level, width)
    else:
        client, pilot = mlp_client(level, width), pilot_mlp(level, width)
    dec = decoder(level, width)
    critic = (discriminator_cnn(level, width, discriminator_entry) if setup == "resnet"
              else discriminator_mlp(level, width))
    return FshaNetworks(client, pilot, dec, critic, feature_shape(level, width))

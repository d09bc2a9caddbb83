"""The FSHA attacker's three networks: pilot encoder f~, decoder f~^-1 and critic D on the feature space.

The attacker builds them from what it knows: the shape of the smashed data it is sent (C, H, W) and
the client family it faces (`resnet` -> convolutional pilot and residual critic, as FSHA; `mlp` ->
dense pilot and dense critic, as JAST section 4.2). The side H of the feature fixes the layout (16:
split level 1, 8: levels 2-3, 4: level 4); the pilot's last layer emits exactly C channels, so a
pilot at another `width` than the client's still speaks the client's feature space.

| role | `resnet` family (FSHA original) | `mlp` family (JAST) |
|---|---|---|
| pilot f~ | linear stride-2 convs, no activations | Flatten, 2x Dense(3072, ReLU), Dense(k), reshape |
| decoder | linear transposed convs, tanh output | (same) |
| critic D | conv256 entry, 6 ResBlocks(256), conv256 s2, Dense(1) | Flatten, 3x Dense(4096, ReLU), Dense(1) |

The critic's entry: the original TF code chains `if level == 1`, `if level <= 3`, `if level <= 4`
without `elif`, so the last assignment wins and every level <= 4 starts with a stride-1 conv256 on z
(the strided branches are dead code). `entry="tf"` (default) builds that; `entry="strided"` builds
the evidently intended entries (level 1: conv128 s2 + ReLU + conv256 s2; levels 2-3: conv256 s2;
level 4: conv256 s1), as the public PyTorch port does. The two agree at level 4, the level the
paper's runs use. Blocks, padding and Glorot initialisation are shared with the client
(`vfl.models.fsha`, whose docstring lists the choices where PyTorch and the TF original differ).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

from attacks.kit import (FSHA_INPUT_SHAPE, FSHA_SETUPS, Reshape, ResBlock, SplitlabError, conv3x3, deconv3x3,
                         glorot_init_, scaled_channels, seeded)

__all__ = ["DISCRIMINATOR_ENTRIES", "AttackerNetworks", "build_attacker", "pilot_cnn", "pilot_mlp", "decoder",
           "discriminator_cnn", "discriminator_mlp"]

DISCRIMINATOR_ENTRIES = ("tf", "strided")
_SIDES = (16, 8, 4)            # feature side at split level 1, levels 2-3, level 4 (for 32x32 inputs)


def _check(feature: tuple[int, ...]) -> tuple[int, int]:
    """(channels, side) of a feature shape the networks can be built for."""
    if len(feature) != 3 or feature[1] != feature[2] or feature[1] not in _SIDES or feature[0] < 1:
        raise SplitlabError(f"FSHA's networks take square features of side 16, 8 or 4 (split levels 1-4), "
                            f"got {tuple(feature)}")
    return int(feature[0]), int(feature[1])


def pilot_cnn(feature: tuple[int, int, int], width: float = 1.0) -> nn.Sequential:
    """Linear (activation-free) pilot encoder: conv64 s2 [+ convC at L1], conv128 s2 [+ convC at L2-3],
    conv256 s2 + convC [L4]; C is the feature's channel count."""
    channels, side = _check(feature)
    c64, c128, c256 = (scaled_channels(c, width) for c in (64, 128, 256))
    layers: list[nn.Module] = [conv3x3(FSHA_INPUT_SHAPE[0], c64, 2)]
    if side == 16:
        layers.append(conv3x3(c64, channels))
    elif side == 8:
        layers += [conv3x3(c64, c128, 2), conv3x3(c128, channels)]
    else:
        layers += [conv3x3(c64, c128, 2), conv3x3(c128, c256, 2), conv3x3(c256, channels)]
    return glorot_init_(nn.Sequential(*layers))


def pilot_mlp(feature: tuple[int, int, int], width: float = 1.0) -> nn.Sequential:
    """JAST's dense pilot: Flatten, 2x Dense(3072, ReLU), Dense(k), reshape."""
    _check(feature)
    hidden = scaled_channels(3072, width)
    return glorot_init_(nn.Sequential(nn.Flatten(), nn.Linear(math.prod(FSHA_INPUT_SHAPE), hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU(),
                                      nn.Linear(hidden, math.prod(feature)), Reshape(feature)))


def decoder(feature: tuple[int, int, int], width: float = 1.0) -> nn.Sequential:
    """Linear decoder, tanh output: convT256 s2 [then conv3 at L1], convT128 s2 [then conv3 at L2-3],
    convT3 s2 [L4]."""
    channels, side = _check(feature)
    c128, c256 = scaled_channels(128, width), scaled_channels(256, width)
    out = FSHA_INPUT_SHAPE[0]
    layers: list[nn.Module] = [deconv3x3(channels, c256)]
    if side == 16:
        layers.append(conv3x3(c256, out))
    elif side == 8:
        layers += [deconv3x3(c256, c128), conv3x3(c128, out)]
    else:
        layers += [deconv3x3(c256, c128), deconv3x3(c128, out)]
    layers.append(nn.Tanh())
    return glorot_init_(nn.Sequential(*layers))


def discriminator_cnn(feature: tuple[int, int, int], width: float = 1.0, entry: str = "tf") -> nn.Sequential:
    """Critic on the feature space: entry conv(s), 6 ResBlocks(256), conv256 s2, Flatten, Dense(1).

    `entry="tf"` is what the original TF code runs at every level (conv256 s1); `"strided"` the
    intended level-specific entry (see the module docstring).
    """
    if entry not in DISCRIMINATOR_ENTRIES:
        raise SplitlabError(f"unknown discriminator entry {entry!r}; choose one of: {', '.join(DISCRIMINATOR_ENTRIES)}")
    channels, height = _check(feature)
    c128, c256 = scaled_channels(128, width), scaled_channels(256, width)
    if entry == "tf" or height == 4:
        layers: list[nn.Module] = [conv3x3(channels, c256)]
    elif height == 16:
        layers = [conv3x3(channels, c128, 2), nn.ReLU(), conv3x3(c128, c256, 2)]
        height //= 4
    else:
        layers = [conv3x3(channels, c256, 2)]
        height //= 2
    layers += [ResBlock(c256, c256) for _ in range(6)]
    layers += [conv3x3(c256, c256, 2), nn.Flatten(), nn.Linear(c256 * math.ceil(height / 2) ** 2, 1)]
    return glorot_init_(nn.Sequential(*layers))


def discriminator_mlp(feature: tuple[int, int, int], width: float = 1.0) -> nn.Sequential:
    """JAST's dense critic: Flatten, 3x Dense(4096, ReLU), Dense(1)."""
    _check(feature)
    k = math.prod(feature)
    hidden = scaled_channels(4096, width)
    return glorot_init_(nn.Sequential(nn.Flatten(), nn.Linear(k, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                      nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)))


@dataclass(frozen=True)
class AttackerNetworks:
    """The malicious server's pilot, decoder and critic for one client family and feature shape."""
    pilot: nn.Module
    decoder: nn.Module
    discriminator: nn.Module
    feature_shape: tuple[int, int, int]


def build_attacker(family: str, feature: tuple[int, int, int], width: float = 1.0, discriminator_entry: str = "tf",
                   seed: int | None = None) -> AttackerNetworks:
    """Build pilot, decoder and critic in that order, initialised from `seed` in a forked random scope
    (no global seeding left behind). `family`: the client family faced, `resnet` or `mlp`."""
    if family not in FSHA_SETUPS:
        raise SplitlabError(f"unknown FSHA client family {family!r}; use --arch resnet or mlp")
    if not width > 0:
        raise SplitlabError("FSHA network width must be positive")
    feature = tuple(int(n) for n in feature)
    _check(feature)
    if discriminator_entry not in DISCRIMINATOR_ENTRIES:
        raise SplitlabError(f"unknown discriminator entry {discriminator_entry!r}; use tf or strided")

    def build() -> AttackerNetworks:
        if family == "resnet":
            pilot, dec = pilot_cnn(feature, width), decoder(feature, width)
            critic = discriminator_cnn(feature, width, discriminator_entry)
        else:
            pilot, dec, critic = pilot_mlp(feature, width), decoder(feature, width), discriminator_mlp(feature, width)
        return AttackerNetworks(pilot, dec, critic, feature)

    if seed is None:
        return build()
    with seeded(seed):
        return build()

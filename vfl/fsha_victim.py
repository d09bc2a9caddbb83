"""FSHA's honest client, as its own side builds it: in the attack's process (`attacks.split.session.victim`) or in a
process of its own (`splitlab client --kind fsha`). Both build it here, so both compute the same numbers.

The client holds its private images (the dataset's train split) and nothing of the attack: its network
(`vfl.models.fsha.build_client`, initialised from its seed), Adam on it with the FSHA code's epsilon (TF's
1e-7), its private batches (an endless stream reshuffled every pass from its seed, in FSHA's [-1, 1] 3x32x32
form) and its evaluation targets (the first private image of each class), whose smashed data it sends when
asked. The attacker's networks and its public data are in `attacks.split.fsha`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
from torch.nn import functional as F

from vfl import data as datasets
from vfl.defences import parse_defences, parse_spec
from vfl.errors import SplitlabError
from vfl.models.fsha import INPUT_SHAPE, LEVELS, SETUPS, build_client, feature_shape
from vfl.options import Runtime, choice, integer, number, option, text
from vfl.protocol import Client
from vfl.runtime import adam, generator, resolve_device
from vfl.validate import check_number

__all__ = ["FshaClientConfig", "HonestClient", "honest_client", "to_fsha_images", "from_fsha_images", "BatchStream"]


@dataclass(frozen=True, kw_only=True)
class FshaClientConfig(Runtime):
    """FSHA's honest client: its data, network, optimiser and batch size; its seed initialises the network and
    orders its private batches. Checked when built."""
    dataset: str = option("mnist5k", "Dataset: the client's private images are its train split.", text())
    arch: str = option("resnet", "Client setup: resnet (FSHA's CNN) or mlp (JAST's dense client).", choice(SETUPS))
    level: int = option(4, "Split level 1-4: how much of the network the client holds.",
                        integer(low=min(LEVELS), high=max(LEVELS)))
    lr_client: float = option(1e-5, "The client's Adam learning rate.", number(low=0, low_open=True, high=10))
    batch_size: int = option(64, "Private images per protocol round.", integer(low=1, high=1_000_000))
    width: float = option(1.0, "Multiplier on the client's channel counts and hidden widths.",
                          number(low=0, low_open=True, high=16))
    defence: str = option("none", "The client's own defences (input, activations sent, gradient received): none or "
                          "name[:key=value,...] items joined by + (see `splitlab defences`).", text())
    adam_eps: float = 1e-7
    """The client's Adam epsilon (TF/Keras default, as in the FSHA code)."""

    def check(self) -> None:
        spec = datasets.dataset_spec(self.dataset)
        datasets.require_images(self.dataset, "FSHA")
        if spec.image_shape[0] not in (1, INPUT_SHAPE[0]):
            raise SplitlabError(f"FSHA takes grey or RGB images; dataset {self.dataset} has "
                                f"{spec.image_shape[0]} channels")
        check_number("client adam_eps", self.adam_eps, low=0, low_open=True, high=1)
        parse_spec(self.defence, INPUT_SHAPE, flat_input=False)
        resolve_device(self.device)

    @property
    def feature_shape(self) -> tuple[int, int, int]:
        return feature_shape(self.level, self.width)


def to_fsha_images(x: torch.Tensor) -> torch.Tensor:
    """[0,1] images (N, 1 or 3, H, W) -> FSHA's inputs (N, 3, 32, 32) in [-1, 1].

    Grey images are resized bilinearly to 32x32 (half-pixel centres, as TF's `tf.image.resize`) and
    tiled to three channels; values are scaled by 2x - 1 and clipped to [-1, 1], as the FSHA data
    pipeline does with x / 127.5 - 1.
    """
    if tuple(x.shape[-2:]) != INPUT_SHAPE[1:]:
        x = F.interpolate(x, size=INPUT_SHAPE[1:], mode="bilinear", align_corners=False)
    if x.shape[1] == 1:
        x = x.expand(-1, INPUT_SHAPE[0], -1, -1)
    return (x * 2 - 1).clamp(-1, 1)


def from_fsha_images(x: torch.Tensor) -> torch.Tensor:
    """FSHA's [-1, 1] scale back to the lab's [0, 1] reporting scale (still 3x32x32)."""
    return (x + 1) / 2


class BatchStream:
    """Endless batches of one split on the device: reshuffled every pass, the last partial batch
    dropped (the FSHA pipeline's `batch(drop_remainder=True).repeat()`), converted by `to_fsha_images`.
    `last` is the batch handed out most recently."""

    def __init__(self, images: torch.Tensor, batch_size: int, order: torch.Generator, device: torch.device):
        if len(images) < batch_size:
            raise SplitlabError(f"a split has {len(images)} images, fewer than --batch-size {batch_size}")
        self.images = images.to(device)
        self.batch_size = batch_size
        self.order = order
        self._order = torch.empty(0, dtype=torch.long, device=device)
        self._position = 0
        self.last: torch.Tensor | None = None

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        if self._position + self.batch_size > len(self._order):
            self._order = torch.randperm(len(self.images), generator=self.order).to(self.images.device)
            self._position = 0
        index = self._order[self._position:self._position + self.batch_size]
        self._position += self.batch_size
        self.last = to_fsha_images(self.images[index])
        return self.last


@dataclass(eq=False)
class HonestClient:
    """The client and what it holds: its private batch stream and its targets (FSHA's form, on its device)."""
    client: Client
    batches: BatchStream
    targets: torch.Tensor


def honest_client(config: FshaClientConfig, private: datasets.ImageData, device: torch.device) -> HonestClient:
    """The client (network from `config.seed`, Adam on it), its private batches (order from `config.seed`) and its
    targets, the first private image of each class."""
    model = build_client(config.arch, config.level, config.width, seed=config.seed).to(device)
    defences = parse_defences(config.defence, INPUT_SHAPE, to_fsha_images(private.images))
    client = Client(model, adam(model.parameters(), config.lr_client, eps=config.adam_eps,
                                fused=device.type == "cuda"), defences)
    batches = BatchStream(private.images, config.batch_size, generator(config.seed), device)
    targets, _ = datasets.first_of_each_class(private)
    return HonestClient(client, batches, to_fsha_images(targets.to(device)))

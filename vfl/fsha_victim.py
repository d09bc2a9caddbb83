"""FSHA's honest client, as its own side builds it: in the attack's process (`attacks.split.session.victim`) or in a
process of its own (`splitlab client --kind fsha`). Both build it here, so both compute the same numbers.

The client holds its private images (the dataset's train split) and nothing of the attack: its network
(`vfl.models.fsha.build_client`, initialised from its seed), Adam on it with the FSHA code's epsilon (TF's
1e-7), its private batches (an endless stream reshuffled every pass from its seed, in FSHA's [-1, 1] 3x32x32
form) and its evaluation targets (the first private image of each class), whose smashed data it sends when
asked. The attacker's networks and its public data are in `attacks.split.fsha`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator

import torch
from torch.nn import functional as F

from vfl import data as datasets
from vfl.case import SplitCase, with_defaults
from vfl.defences import parse_defences, parse_spec
from vfl.errors import SplitlabError
from vfl.models.fsha import INPUT_SHAPE, LEVELS, SETUPS, build_client, feature_shape
from vfl.options import number, option
from vfl.protocol import Client
from vfl.runtime import adam, generator, resolve_device
from vfl.validate import check_choice, check_int, check_number

__all__ = ["FshaCase", "FSHA_DEFAULTS", "FSHA_MEANING", "NOT_FSHA", "RENAMED", "HonestClient", "honest_client",
           "to_fsha_images", "from_fsha_images", "BatchStream"]

FSHA_DEFAULTS = {"arch": "resnet", "cut_layer": 4, "lr": 1e-5, "optimizer": "adam"}
"""FSHA's client where a field is not given (the FSHA code's hparams, which the JAST paper keeps): the ResNet client
split at level 4, Adam at 1e-5. For FSHA's client the case's fields mean (`FSHA_MEANING`): `arch` the FSHA model
family's setup (resnet or mlp, not an architecture of `splitlab models`), `cut_layer` FSHA's split level 1-4,
`lr` the client's own Adam rate (the malicious server's rates are the attack's settings), `optimizer` Adam only,
with the FSHA code's epsilon (`adam_eps`)."""

FSHA_MEANING = {
    "dataset": "Dataset: private = its train split (the client's), public = its test split (the server's); "
               "disjoint.",
    "arch": "Client setup: resnet (FSHA's CNN) or mlp (JAST's dense client).",
    "cut_layer": "FSHA's split level, 1-4: how much of the network the client holds (the FSHA paper's level).",
    "lr": "The client's Adam learning rate (the malicious server's are the attack's options).",
    "optimizer": "adam only: FSHA's client trains with the FSHA code's Adam (epsilon 1e-7).",
    "defence": "The client's own defences (input, activations sent, gradient received): none or "
               "name[:key=value,...] items joined by + (see `splitlab defences`).",
    "send_back": "none only: FSHA's server is the attacker and sends back the gradients it chooses.",
}
"""The help FSHA's commands give the case's fields whose meaning is FSHA's own (`FSHA_DEFAULTS` says why)."""

NOT_FSHA = ("top", "epochs", "task", "positive", "parties", "partition", "aggregate")
"""The case's fields FSHA's client has no use for: its rounds are the attack's iterations over its own private
batches, on the dataset's classes, as the one party holding whole images. Any value but the case's own default is
refused (the commands do not offer them)."""

RENAMED = {"level": "cut_layer", "lr_client": "lr"}
"""FSHA's earlier names of two of the case's fields, still taken as aliases (`--level`, `--lr-client`)."""


@dataclass(frozen=True, kw_only=True)
class FshaCase(with_defaults(SplitCase, FSHA_DEFAULTS)):
    """FSHA's honest client: the split case (`vfl.case.SplitCase`) with FSHA's defaults (`FSHA_DEFAULTS`) over
    FSHA's model family (`vfl.models.fsha`), plus that family's width. Its seed initialises the network and
    orders its private batches. Checked when built."""
    width: float = option(1.0, "Multiplier on the client's channel counts and hidden widths.",
                          number(low=0, low_open=True, high=16))
    adam_eps: float = 1e-7
    """The client's Adam epsilon (TF/Keras default, as in the FSHA code)."""

    def check(self) -> None:
        # not the case's own check: its architectures and cuts are `splitlab models`', the client's FSHA's
        if self.send_back.strip().lower() != "none":
            raise SplitlabError("FSHA's server is the attacker: it sends back the gradients it chooses, so no honest "
                                "label party is there to run --send-back "
                                f"{self.send_back}; give the client's defences with --defence")
        case = {f.name: f.default for f in dataclasses.fields(SplitCase)}
        for name in NOT_FSHA:
            if getattr(self, name) != case[name]:
                raise SplitlabError(f"--{name.replace('_', '-')} {getattr(self, name)}: FSHA's client does not take "
                                    "it (its rounds are the attack's --iterations over its own private batches of "
                                    "whole images); leave it out")
        check_choice("--arch", self.arch, SETUPS)
        check_int("--cut-layer", self.cut_layer, low=min(LEVELS), high=max(LEVELS))
        check_number("--lr", self.lr, low=0, low_open=True, high=10)
        if self.optimizer != "adam":
            raise SplitlabError(f"--optimizer {self.optimizer}: FSHA's client trains with adam (the FSHA code's, "
                                f"epsilon {self.adam_eps:g}); leave --optimizer out")
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
        return feature_shape(self.cut_layer, self.width)


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


def honest_client(config: FshaCase, private: datasets.ImageData, device: torch.device) -> HonestClient:
    """The client (network from `config.seed`, Adam on it), its private batches (order from `config.seed`) and its
    targets, the first private image of each class."""
    model = build_client(config.arch, config.cut_layer, config.width, seed=config.seed).to(device)
    defences = parse_defences(config.defence, INPUT_SHAPE, to_fsha_images(private.images))
    client = Client(model, adam(model.parameters(), config.lr, eps=config.adam_eps,
                                fused=device.type == "cuda"), defences)
    batches = BatchStream(private.images, config.batch_size, generator(config.seed), device)
    targets, _ = datasets.first_of_each_class(private)
    return HonestClient(client, batches, to_fsha_images(targets.to(device)))

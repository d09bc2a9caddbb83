"""What an attacker of split learning observes, one class a kind (the spec's `observes`), beside the HFL kinds of
`attacks.hfl.observations`; every attack takes them from `attacks.kit`.

- `CutObservation` (`cut-activations`): what an honest-but-curious server received, the activations the client
  sent, built by `observe_cut` from the server's own transcript (UnSplit).
- `FshaObservation` (`session`): what a malicious server has, public images and a protocol session through which
  it chooses the gradients it returns (FSHA).
- the label-inference kinds (`gradients`, `bottom-model`: what a feature party received and holds) are
  `LabelObservation` and its `GradientRecord` (`attacks.split.labels.observation`), with `Needs`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from torch import nn

from vfl.errors import SplitlabError
from vfl.models.fsha import INPUT_SHAPE, SETUPS
from vfl.parties import CutLayout, activation_shapes, strip_shape
from vfl.protocol import CuriousServer, ask
from vfl.validate import check_choice, check_int

__all__ = ["CutObservation", "observe_cut", "party_view", "Session", "FshaObservation"]


@dataclass(frozen=True)
class CutObservation:
    """What the honest-but-curious server has: the client's architecture and the activations it sent. With
    K feature parties (`parties` > 1) it is one party's slice of the joined activations (`party_view`), and
    `input_shape` that party's strip."""
    arch: str
    """The client's architecture (the server knows it, not its weights)."""
    cut_layer: int
    """Where the model is cut: layers 0..cut_layer are the client's."""
    input_shape: tuple[int, ...]
    """(C, H, W) of the client's input (with K parties, the attacked party's strip)."""
    activations: torch.Tensor
    """(targets, *activation shape): what the server received, one row per target."""
    parties: int = 1
    """Feature parties K whose activations the server joins."""
    party: int = 0
    """The attacked party (with K > 1)."""
    groups: tuple[tuple[int, int], ...] = ()
    """Tabular data: the one-hot groups of the attacked columns, which an architecture that embeds categorical
    columns is built for (part of the architecture the server knows; `vfl.parties.party_groups`)."""


def observe_cut(client, images: torch.Tensor, arch: str, cut_layer: int, server: nn.Module | None = None
                ) -> CutObservation:
    """What the honest-but-curious server has after the client asks it to predict `images`: the activations it
    received (its transcript's last inference query, through the client's defences). `server` is its top model
    (None: a server that only records what it receives)."""
    curious = CuriousServer(server if server is not None else nn.Identity(), None)
    ask(client, curious, images, step=0)
    received = curious.seen.queries()[-1].tensor.to(images.device)
    return CutObservation(arch, cut_layer, tuple(images.shape[1:]), received)


def party_view(observation: CutObservation, parties: int, party: int) -> CutObservation:
    """The observation of K feature parties' joined activations narrowed to party `party`'s slice: the server
    knows where each party's activations sit (`vfl.parties.CutLayout`, from the architecture and the strips)."""
    check_int("--target-party", party, low=0, high=parties - 1)
    if parties == 1:
        return observation
    shapes = activation_shapes(observation.arch, observation.cut_layer, observation.input_shape, parties)
    part = CutLayout(shapes).split(observation.activations)[party]
    return CutObservation(observation.arch, observation.cut_layer, strip_shape(observation.input_shape, parties, party),
                          part, parties, party)


class Session(Protocol):
    """What FSHA's server can do with the client (`vfl.protocol.ClientSession` is the real one)."""

    def round(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor]) -> int: ...
    def target_activations(self) -> torch.Tensor: ...


@dataclass(frozen=True)
class FshaObservation:
    """Everything FSHA's adversary has: public images of the client's domain ([0,1], the dataset's
    own shape; disjoint from the private ones), the shape of the smashed data it is sent, the client
    family it faces (`resnet` or `mlp`; it picks the matching pilot and critic, JAST section 4.2),
    and the session with the client (protocol rounds and the targets' smashed data only)."""
    public_images: torch.Tensor
    """(N, C, H, W) public images of the client's domain, in [0,1]."""
    feature_shape: tuple[int, int, int]
    """(C, H, W) of the smashed data the client sends."""
    session: Session
    """The protocol with the client: `round(choose_gradient)` runs one round, `target_activations()` ends it."""
    client_arch: str = "resnet"
    """The client family it faces (resnet or mlp)."""

    def __post_init__(self) -> None:
        if self.public_images.dim() != 4 or len(self.public_images) == 0:
            raise SplitlabError("FSHA needs a non-empty batch of public images shaped (N, C, H, W)")
        if self.public_images.shape[1] not in (1, INPUT_SHAPE[0]):
            raise SplitlabError(f"FSHA takes grey or RGB images, got {self.public_images.shape[1]} channels")
        if len(self.feature_shape) != 3:
            raise SplitlabError(f"FSHA's smashed data is shaped (C, H, W), got {tuple(self.feature_shape)}")
        check_choice("client architecture", self.client_arch, SETUPS)

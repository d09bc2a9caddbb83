"""What a label-inference attacker observes: only what its party has in the protocol.

- `GradientRecord`: the cut gradients the feature party received, round by round, with the ids of its samples
  in each round and, where kept, the activations it sent. It is built from a transcript of the messages the
  party received (`vfl.protocol.Transcript`, entries sent by the server): in process from the attacking
  party's own transcript (`victim.ObservingClient.seen`), over the wire from the same entries decoded from the
  frames the party received (`from_transcript` takes either).
- `LabelObservation`: the record, plus what else the attack's threat model grants (`Needs`): its own trained
  bottom model and inputs (model completion), a few labelled samples (its auxiliary knowledge), the label of
  one sample per round (Li et al.'s direction attack), the number of classes (the protocol's output size).
  The attack scores the samples `targets` names, in that order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from vfl.errors import SplitlabError
from vfl.protocol import Transcript

__all__ = ["Needs", "GradientRecord", "LabelObservation", "require"]


@dataclass(frozen=True)
class Needs:
    """What a label-inference attack needs beside the number of classes (each is the attacker's own, or
    auxiliary knowledge its threat model grants)."""
    gradients: bool = True
    """The cut gradients it received in training."""
    rounds: int = 0
    """The last rounds of training whose gradients it scores (0: every round)."""
    sent: bool = False
    """The activations it sent (its own outputs), beside the gradients."""
    bottom: bool = False
    """Its trained bottom model and its own training and test inputs."""
    labelled: int = 0
    """Known labels of this many training samples of each class."""
    hints: bool = False
    """The label of one positive sample in each round that holds one (Li et al.'s direction attack)."""
    models: bool = False
    """Its bottom model's weights as they were in each round it scores (with its own training inputs): what a
    black-boxed party computes its batch-level parameter gradient with."""


@dataclass(frozen=True, eq=False)
class GradientRecord:
    """Per training round (in order): its step, the gradient received (B_r, *shape), the ids of its samples
    (B_r,), and the activations sent (B_r, *shape) where kept."""
    steps: tuple[int, ...]
    """The protocol step of each round."""
    gradients: tuple[torch.Tensor, ...]
    """(B_r, *cut shape) the cut gradient the party received in each round, one row per sample."""
    samples: tuple[torch.Tensor, ...]
    """(B_r,) the ids of each round's samples (the parties align samples by id)."""
    sent: tuple[torch.Tensor, ...] | None = None
    """(B_r, *cut shape) the activations it sent in each round, where the attack needs them (`Needs.sent`)."""

    def __post_init__(self) -> None:
        if not self.gradients:
            raise SplitlabError("the record holds no gradient: the attacking party received none")
        if len(self.samples) != len(self.gradients):
            raise SplitlabError(f"the record has {len(self.gradients)} rounds of gradients but {len(self.samples)} "
                                "rounds of sample ids")
        for g, s in zip(self.gradients, self.samples):
            if len(g) != len(s):
                raise SplitlabError(f"a round's gradient has {len(g)} rows for {len(s)} samples")

    @classmethod
    def from_transcript(cls, transcript: Transcript, samples: list[torch.Tensor]) -> "GradientRecord":
        """The record from a transcript of what the party received (and sent, where kept): its `cut_gradient`
        entries in order, one per round, with the ids of each round's samples."""
        received = [e for e in transcript.entries if e.kind == "cut_gradient"]
        if any(e.tensor is None for e in received):
            raise SplitlabError("the transcript kept shapes only; the attack needs the gradients' values")
        sent = {e.step: e.tensor for e in transcript.entries if e.kind == "activations" and e.tensor is not None}
        steps = tuple(e.step for e in received)
        kept = tuple(sent[s] for s in steps) if sent and all(s in sent for s in steps) else None
        return cls(steps, tuple(e.tensor for e in received), tuple(samples[:len(received)]), kept)

    def last(self, rounds: int) -> "GradientRecord":
        """The last `rounds` rounds (0: all of them)."""
        if rounds == 0 or rounds >= len(self.steps):
            return self
        cut = slice(len(self.steps) - rounds, None)
        return GradientRecord(self.steps[cut], self.gradients[cut], self.samples[cut],
                              None if self.sent is None else self.sent[cut])

    @property
    def targets(self) -> torch.Tensor:
        """(N,) the sample id of every row, rounds in order."""
        return torch.cat(self.samples)

    @property
    def rounds(self) -> torch.Tensor:
        """(N,) the round (its position in the record) of every row."""
        return torch.cat([torch.full((len(s),), r, dtype=torch.long) for r, s in enumerate(self.samples)])


@dataclass(frozen=True, eq=False)
class LabelObservation:
    """What the attacking feature party has: the cut gradients it received (`gradients`), its own trained bottom
    model and inputs (`bottom-model`), and what else its threat model grants, each only where the attack's `Needs`
    ask for it. Its answer scores the samples `targets` names, in that order."""
    classes: int
    """The classes of the task (the size of the protocol's output)."""
    targets: torch.Tensor
    """(N,) the ids of the samples whose labels the attack infers, in the order of its answer."""
    record: GradientRecord | None = None
    """The cut gradients received, round by round (`Needs.gradients`)."""
    bottom: nn.Module | None = None
    """Its own trained bottom model (`Needs.bottom`)."""
    train_inputs: torch.Tensor | None = None
    """Its own inputs of the training samples, by id (`Needs.bottom`)."""
    test_inputs: torch.Tensor | None = None
    """Its own inputs of the test samples (`Needs.bottom`)."""
    labelled: tuple[torch.Tensor, torch.Tensor] | None = None
    """(ids, labels) of the training samples whose labels the attacker knows."""
    hints: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Round -> (row in the round, label) of the one sample whose label the attacker knows in it."""
    facts: dict[str, Any] = field(default_factory=dict)
    """Public facts of the protocol (the label party's model in words, the batch size)."""
    models: tuple[dict[str, torch.Tensor], ...] | None = None
    """Per round of the record, its bottom model's weights when it computed that round's activations."""


def require(attack: str, observation: LabelObservation, *names: str) -> None:
    """Refuse, in one line, an observation that lacks what the attack needs."""
    if not isinstance(observation, LabelObservation):
        raise SplitlabError(f"{attack} takes a LabelObservation (what the attacking feature party has), got "
                            f"{type(observation).__name__}")
    for name in names:
        if name == "sent":
            missing = observation.record is None or observation.record.sent is None
        else:
            value = getattr(observation, name)
            missing = value is None or (name == "hints" and not value)
        if missing:
            raise SplitlabError(f"{attack} needs the observation's {name}, which it lacks")


class OwnBottom(nn.Module):
    """The feature party's own forward path on its raw inputs: its secret input transforms (it knows them: an
    orthogonal U it drew), then its bottom model. The noise it adds to what it sends (input-dp, activation noise) is
    not part of its own computations, so it is left out."""

    def __init__(self, model: nn.Module, defences=()):
        super().__init__()
        self.model = model
        self.transforms = [d for d in defences if getattr(d, "secret_transform", False)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for transform in self.transforms:
            x = transform.on_input(x, False)
        return self.model(x)

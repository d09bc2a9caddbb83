"""The feature parties as the server process sees them: clients in other processes, reached over channels.

`RemoteParties` has the client interface the protocol's loops take (`send`, `receive`, `query`,
`receive_prediction`; see `vfl.protocol`), so `fit`, `train_epoch`, `exchange` and `evaluate` drive
remote clients unchanged. Its inputs are sample indices, not images: each party looks its own features up,
and only activations come back. Every frame received is checked against the handshake's terms (`Limits`)
before it is used; the parties' activations are joined as in process (`vfl.parties.CutLayout`).

`WireSession` is a malicious server's view of the same clients: `round(choose_gradient)` and
`target_activations()`, the two operations of `vfl.protocol.ClientSession` that FSHA's attack takes as its
`session`; `vfl.wire.victim_session.OwnBatchSession` the same for a client that picks its own batches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.parties import CutLayout
from vfl.protocol import (Activations, CutGradient, InferenceQuery, MaliciousServer, Prediction, Role, Transcript,
                          exchange)
from vfl.wire.channel import ABORT_WITHIN, Channel, PeerSilent, Traffic
from vfl.wire.frames import Allow, Expect, Frame, Kind, abort, all_finite, fmt

QUERY_ROWS = 1000
"""The most rows of one inference query (`vfl.protocol.evaluate`'s chunk)."""


@dataclass(frozen=True)
class Limits:
    """What the handshake allows in frames: the sizes of the two splits, the batch size, the classes."""
    train_size: int
    test_size: int
    batch_size: int
    classes: int
    query_rows: int = QUERY_ROWS

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))

    @classmethod
    def from_terms(cls, value: object) -> "Limits":
        """The limits in a server's terms: exactly these fields, each a whole number (else a one-line refusal)."""
        fields = tuple(cls.__dataclass_fields__)
        if not isinstance(value, dict) or set(value) != set(fields) or \
                any(type(value[k]) is not int or not 0 <= value[k] < 2**40 for k in fields):
            raise SplitlabError("the server sent malformed limits in its terms; run the same splitlab on both sides")
        return cls(**value)


class RemoteParties:
    """K clients over `channels` (party k on channels[k]) whose activations have `layout`."""

    def __init__(self, channels: Sequence[Channel], layout: CutLayout, device: torch.device):
        self.channels = list(channels)
        self.layout = layout
        self.device = device
        self.last_prediction: Prediction | None = None
        self.role: Role | None = None           # the server's role, whose loss `receive` checks (`serve` sets it)
        self._received: list[torch.Tensor] = []  # the parties' activations of the round under way

    def _gather(self, kind: Kind, step: int, rows: int) -> torch.Tensor:
        parts = [ch.receive(Expect(Allow(kind, torch.float32, (rows, *shape), step=step))).tensor
                 for ch, shape in zip(self.channels, self.layout.shapes)]
        if kind is Kind.ACTIVATIONS:
            self._received = parts
        return self.layout.join(parts).to(self.device)

    def send(self, indices: torch.Tensor, step: int) -> Activations:
        """Ask every party for its activations of the samples `indices` (one training round's batch)."""
        indices = indices.cpu()
        for ch in self.channels:
            ch.send(Frame(Kind.BATCH, step, indices))
        return Activations(step, self._gather(Kind.ACTIVATIONS, step, len(indices)))

    def receive(self, message: CutGradient) -> None:
        if tuple(message.tensor.shape[1:]) != self.layout.joined_shape:
            raise SplitlabError(f"the server's role returned a gradient shaped {fmt(message.tensor.shape)} for "
                                f"activations of {fmt(self.layout.joined_shape)} per example; it must match them")
        gradient = message.tensor.detach().cpu()          # the round's one wait for the device
        check_finite(self.role, gradient, self._received, message.step)
        for ch, part in zip(self.channels, self.layout.split(gradient)):
            ch.send(Frame(Kind.CUT_GRADIENT, message.step, part))

    def query(self, indices: torch.Tensor, step: int) -> InferenceQuery:
        """Ask every party for inference activations of the test samples `indices`."""
        indices = indices.cpu()
        for ch in self.channels:
            ch.send(Frame(Kind.QUERY_REQUEST, step, indices))
        return InferenceQuery(step, self._gather(Kind.QUERY, step, len(indices)))

    def send_own(self, step: int, rows: int) -> Activations:
        """Ask every party for its activations of its own next private batch of `rows` samples (PRIVATE_ROUND)."""
        for ch in self.channels:
            ch.send(Frame(Kind.PRIVATE_ROUND, step))
        return Activations(step, self._gather(Kind.ACTIVATIONS, step, rows))

    def query_own(self, step: int, rows: int) -> InferenceQuery:
        """Ask every party for inference activations of the `rows` evaluation targets it holds (TARGET_REQUEST)."""
        for ch in self.channels:
            ch.send(Frame(Kind.TARGET_REQUEST, step))
        return InferenceQuery(step, self._gather(Kind.QUERY, step, rows))

    def receive_prediction(self, message: Prediction) -> None:
        self.last_prediction = message
        for ch in self.channels:
            ch.send(Frame(Kind.PREDICTION, message.step, message.tensor.detach().cpu().long()))

    def end_epoch(self, epoch: int) -> None:
        """Every party saves its state for `epoch`; returns once all have confirmed."""
        for ch in self.channels:
            ch.send(Frame(Kind.EPOCH_END, epoch))
        for ch in self.channels:
            ch.receive(Expect(Allow(Kind.EPOCH_SAVED, step=epoch)))

    def finish(self, timeout: float) -> None:
        """End the session: BYE to every party, waiting up to `timeout` seconds for each to close its end (it
        has then read everything)."""
        for ch in self.channels:
            ch.send(Frame(Kind.BYE))
        for ch in self.channels:
            ch.finish(timeout)

    def abort(self, reason: str) -> None:
        """Tell every party the session stops and why (best effort: a party may be gone already)."""
        for ch in self.channels:
            if ch.peer_stopped:
                continue
            try:
                ch.send(abort(reason), within=ABORT_WITHIN)
            except SplitlabError:           # the peer is gone or stuck: nothing left to tell it
                pass

    def close(self, failed: bool, grace: float = 2.0) -> None:
        """Close every connection; after a failure each party still reachable gets `grace` seconds to read why
        (a silent one none)."""
        for ch in self.channels:
            if failed and not isinstance(ch.broken, PeerSilent):
                ch.finish(grace)
            ch.close()

    @property
    def traffic(self) -> Traffic:
        total = Traffic()
        for ch in self.channels:
            for key, value in ch.traffic.as_dict().items():
                setattr(total, key, getattr(total, key) + value)
        return total


def check_finite(role: Role | None, gradient: torch.Tensor, received: list[torch.Tensor], step: int) -> None:
    """Refuse a round whose loss or cut gradient is not finite, before the gradient leaves, naming the party
    whose activations drove it there (the largest in magnitude: finite values past float32's range once
    multiplied); a role without a task (no loss) is named itself. Read after the gradient came to the CPU,
    so it waits for nothing more."""
    loss = getattr(role, "last_loss", None) if role is not None else None
    bad_loss = loss is not None and not bool(torch.isfinite(loss))
    if not bad_loss and all_finite(gradient):
        return
    what = f"the server's loss became {float(loss)}" if bad_loss else "the server's cut gradient became non-finite"
    if loss is None or not received:
        raise SplitlabError(f"{what} at step {step}: the server's role returned it; refused (nothing of the epoch "
                            "is kept)")
    sizes = [float(part.abs().max()) if part.numel() else 0.0 for part in received]
    party = max(range(len(sizes)), key=sizes.__getitem__)
    other = max((size for k, size in enumerate(sizes) if k != party), default=None)
    beside = f", the other parties' up to {other:.3g}" if other is not None else ""
    raise SplitlabError(f"{what} at step {step} on the activations of party {party} (magnitude up to "
                        f"{sizes[party]:.3g}{beside}); refused (nothing of the epoch is kept)")


class WireSession:
    """A malicious server's session with remote clients, the operations of `vfl.protocol.ClientSession`:
    `round(choose_gradient)` runs one protocol round on the clients' next private batch (in the server's
    seeded order, epoch after epoch, each pass closed by the clients' EPOCH_END: `batch_size` must be the
    terms' batch size, whose rounds per epoch the clients count), and `target_activations()` asks for the evaluation targets' inference
    activations (the test samples `targets`). Received messages are recorded in `transcript` when given."""

    def __init__(self, parties: RemoteParties, train_size: int, batch_size: int, generator: torch.Generator,
                 targets: torch.Tensor, transcript: Transcript | None = None):
        self._parties = parties
        self._samples = datasets.ImageData("wire", "train", torch.arange(train_size), torch.zeros(train_size,
                                           dtype=torch.long), "sample indices")
        self._batch_size, self._generator = batch_size, generator
        self._batches = iter(())
        self._targets = targets
        self._transcript = transcript
        self._step = 0
        self._epoch = 0

    def _next_batch(self) -> torch.Tensor:
        batch = next(self._batches, None)
        if batch is None:
            if self._step:                  # a pass ended: the clients take no round past an epoch's end
                self._epoch += 1
                self._parties.end_epoch(self._epoch)
            self._batches = self._samples.batches(self._batch_size, self._generator)
            batch = next(self._batches)
        return batch[0]

    def round(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor]) -> int:
        step = self._step
        exchange(self._parties, MaliciousServer(choose_gradient), self._next_batch(), None, step, self._transcript)
        self._step += 1
        return step

    def target_activations(self) -> torch.Tensor:
        query = self._parties.query(self._targets, self._step)
        no_task = torch.full((len(self._targets),), -1, dtype=torch.long)     # a malicious server predicts nothing
        self._parties.receive_prediction(Prediction(query.step, no_task))
        if self._transcript is not None:
            self._transcript.record(query)
        return query.tensor

"""What crosses the cut, one dataclass per message kind, and the transcript that records it in order (the split
protocol's vocabulary, shared by `vfl.protocol`, the wire and the attackers' records)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["Activations", "CutGradient", "InferenceQuery", "Prediction", "Message", "TranscriptEntry", "Transcript"]


@dataclass(frozen=True)
class Activations:
    """Client -> server: the cut-layer activations H of one batch."""
    step: int
    tensor: torch.Tensor


@dataclass(frozen=True)
class CutGradient:
    """Server -> client: dL/dH (or whatever a malicious server chooses to send), same shape as H."""
    step: int
    tensor: torch.Tensor


@dataclass(frozen=True)
class InferenceQuery:
    """Client -> server: activations of inputs the client wants predicted (inference mode; no gradient
    comes back). `step` is the number of training rounds the client's model has taken."""
    step: int
    tensor: torch.Tensor


@dataclass(frozen=True)
class Prediction:
    """Server -> client: the predicted class of each queried row (int64; -1 from a server without a task)."""
    step: int
    tensor: torch.Tensor


Message = Activations | CutGradient | InferenceQuery | Prediction

_KINDS = {Activations: ("client", "activations"), CutGradient: ("server", "cut_gradient"),
          InferenceQuery: ("client", "query"), Prediction: ("server", "prediction")}


@dataclass(frozen=True)
class TranscriptEntry:
    sender: str                      # "client" or "server"
    kind: str                        # "activations", "cut_gradient", "query" or "prediction"
    step: int
    shape: tuple[int, ...]
    tensor: torch.Tensor | None      # kept only when the transcript keeps tensors
    nbytes: int | None = None        # the message's size as sent (elements x element size); None: not known


@dataclass
class Transcript:
    """Everything that crossed the cut, in order. Tensors are kept (on the CPU) only if asked."""
    keep_tensors: bool = False
    entries: list[TranscriptEntry] = field(default_factory=list)

    def record(self, message: Message) -> None:
        sender, kind = _KINDS[type(message)]
        kept = message.tensor.detach().to("cpu", copy=True) if self.keep_tensors else None
        size = message.tensor.numel() * message.tensor.element_size()
        self.entries.append(TranscriptEntry(sender, kind, message.step, tuple(message.tensor.shape), kept, size))

    def bytes_sent(self) -> dict[str, int]:
        """The bytes of the messages recorded here, by sender ("client", "server"): the tensors' payloads as the
        in-process protocol passes them (no framing; the wire measures its own, `vfl.wire`)."""
        out = {"client": 0, "server": 0}
        for e in self.entries:
            out[e.sender] += e.nbytes or 0
        return out

    def received_by_client(self) -> list[TranscriptEntry]:
        return [e for e in self.entries if e.sender == "server"]

    def sent_by_client(self) -> list[TranscriptEntry]:
        return [e for e in self.entries if e.sender == "client"]

    def queries(self) -> list[TranscriptEntry]:
        """The inference queries, in order (after `splitlab train` or `serve`, the last one holds the
        evaluation targets: the first test sample of each class, in class order)."""
        return [e for e in self.entries if e.kind == "query"]

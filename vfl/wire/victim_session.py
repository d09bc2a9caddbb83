"""A server's session with FSHA's honest victim (`splitlab client --kind fsha`), the session FSHA's malicious
server takes over the wire.

The victim draws its own private batches and holds its own evaluation targets, so the server never names a
sample: `OwnBatchSession.round(choose_gradient)` asks for the activations of the victim's next private batch
(PRIVATE_ROUND), returns the gradient `choose_gradient(H, step)` picks and the victim steps on it;
`target_activations()` asks for the smashed data of the victim's targets (TARGET_REQUEST) and answers class -1
(a server without a task predicts nothing). These are the two operations of `vfl.protocol.ClientSession`, the
in-process session, so an attack takes either.

In the handshake the victim declares its dataset, client family, split level, batch size, the seed its
private/public split is drawn from, activation shape and number of targets; the server refuses a victim that does
not match what it was told to expect (one line on each side) and a split-learning feature party.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.fsha_victim import FshaCase
from vfl.parties import CutLayout
from vfl.protocol import CutGradient, MaliciousServer, Prediction, Transcript, exchange
from vfl.wire.handshake import Listener
from vfl.wire.keys import Secret
from vfl.wire.remote import Limits, RemoteParties
from vfl.wire.server import admit, check_data_seed

__all__ = ["VictimTerms", "open_victim_session", "OwnBatchSession"]


class VictimTerms:
    """Checks the victim's declared configuration against `expected` (what the server prepared for: dataset,
    client family, split level (cut layer), batch size, so the smashed data's shape, and the seed of the data's
    split, so its private images are not the server's public ones); answers with the session's terms."""

    def __init__(self, expected: FshaCase, rounds: int, limits: Limits):
        self.expected, self.rounds, self.limits = expected, rounds, limits

    def __call__(self, party: int, body: Any) -> dict[str, Any]:
        e = self.expected
        if not isinstance(body, dict):
            raise SplitlabError(f"party {party} sent a malformed configuration; run the same splitlab on both sides")
        if body.get("kind") != "fsha":
            raise SplitlabError(f"party {party} is a --kind {body.get('kind')} client; this server expects FSHA's "
                                "victim (`splitlab client --kind fsha`)")
        for key, flag in (("dataset", "--dataset"), ("arch", "--arch"), ("cut_layer", "--cut-layer"),
                          ("batch_size", "--batch-size")):
            if body.get(key) != getattr(e, key):
                raise SplitlabError(f"party {party} runs {flag} {body.get(key)}, the server expects {flag} "
                                    f"{getattr(e, key)}; give both sides the same {flag}")
        check_data_seed(party, body, e.dataset, e.seed, e.data_draw, "private/public split")
        if body.get("activation_shape") != list(e.feature_shape):
            raise SplitlabError(f"party {party} would send smashed data shaped {body.get('activation_shape')}, the "
                                f"server expects {list(e.feature_shape)}; give both sides the same --width")
        targets = body.get("targets")
        if not isinstance(targets, int) or not 1 <= targets <= self.limits.query_rows:
            raise SplitlabError(f"party {party} declares {targets!r} evaluation targets; at most one per class "
                                f"({self.limits.query_rows}) is allowed")
        if body.get("resume"):
            raise SplitlabError(f"party {party} resumes, but FSHA's victim keeps no checkpoints; start it without "
                                "--resume")
        return {"rounds": self.rounds, "epochs": 0, "start_epoch": 0, "limits": self.limits.as_dict()}


def open_victim_session(listener: Listener, secret: Secret, expected: FshaCase, rounds: int,
                        device: torch.device, transcript: Transcript | None = None) -> tuple[RemoteParties,
                                                                                              "OwnBatchSession"]:
    """Admit the victim (the handshake), connect it, and return it as the server sees it with the session over
    it. `rounds` is what the server tells the victim to expect (its progress bar)."""
    classes = datasets.dataset_spec(expected.dataset).num_classes
    limits = Limits(0, 0, expected.batch_size, classes, query_rows=classes)
    layout = CutLayout([expected.feature_shape])
    parties, (body,) = admit(listener, secret, 1, VictimTerms(expected, rounds, limits), layout, device)
    return parties, OwnBatchSession(parties, expected.batch_size, int(body["targets"]), transcript)


class _OwnBatches:
    """The parties as `exchange` takes them, asked for their own next private batch instead of named samples."""

    def __init__(self, parties: RemoteParties, rows: int):
        self._parties, self._rows = parties, rows

    def send(self, _: None, step: int):
        return self._parties.send_own(step, self._rows)

    def receive(self, message: CutGradient) -> None:
        self._parties.receive(message)


class OwnBatchSession:
    """A malicious server's session with a victim that picks its own batches (see the module docstring).
    Received messages are recorded in `transcript` when given."""

    def __init__(self, parties: RemoteParties, batch_size: int, targets: int, transcript: Transcript | None = None):
        self._own = _OwnBatches(parties, batch_size)
        self._parties, self._targets, self._transcript = parties, targets, transcript
        self._step = 0

    def round(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor]) -> int:
        step = self._step
        exchange(self._own, MaliciousServer(choose_gradient), None, None, step, self._transcript)
        self._step += 1
        return step

    def target_activations(self) -> torch.Tensor:
        query = self._parties.query_own(self._step, self._targets)
        no_task = torch.full((self._targets,), -1, dtype=torch.long)      # a malicious server predicts nothing
        self._parties.receive_prediction(Prediction(query.step, no_task))
        if self._transcript is not None:
            self._transcript.record(query)
        return query.tensor

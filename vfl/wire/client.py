"""A client's program (`splitlab client`): connect, prove the secret, answer the server's frames.

A feature party of split learning (`--kind split`) holds its features (its strip of every image; the labels it
loads with them are dropped at once) and its bottom model, built exactly as in process
(`vfl.training.build_client`); FSHA's honest victim (`--kind fsha`) holds its private images and its network,
built as in the attack's own process (`vfl.fsha_victim`). What differs between the kinds is in `kinds.py`;
the server drives the session and the client answers each frame:

    BATCH (indices)          -> its activations of those samples (ACTIVATIONS), then the CUT_GRADIENT
    or PRIVATE_ROUND            it receives is backpropagated and its model steps (PRIVATE_ROUND: on its
                                own next private batch)
    QUERY_REQUEST (indices)  -> inference activations of those test samples (QUERY), then the PREDICTION
    or TARGET_REQUEST           (TARGET_REQUEST: of the evaluation targets it holds)
    EPOCH_END (epoch)        -> its state saved to `checkpoints/` (EPOCH_SAVED)
    BYE                      -> its model saved (`bottom.pt`); done

Every frame is checked before it is used against what the client knows itself (its own sample counts, batch
bound, classes: the server's terms are checked against them first, `kinds.py`). A resume starts from one of
the epochs the client saved and deletes nothing on the server's word; a checkpoint is written only after the
whole epoch of rounds the terms count, and a `bottom.pt` this run already holds is never replaced by an
earlier epoch's model. Its run directory holds its model, its checkpoints,
`metrics.json` (rounds, traffic, the targets' predictions) and `run.log`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from vfl.defences import report
from vfl.errors import SplitlabError
from vfl.progress import progress_bar
from vfl.protocol import Client, CutGradient, Prediction
from vfl.runs import Run, atomic_torch_save
from vfl.runtime import resolve_device
from vfl.wire.channel import ABORT_WITHIN, Channel, PeerSilent, PeerStopped
from vfl.wire.checkpoints import EpochCheckpoints
from vfl.wire.frames import Allow, Expect, Frame, Kind, abort
from vfl.wire.handshake import join, parse_address
from vfl.wire.keys import read_secret
from vfl.wire.kinds import QUERY_FRAMES, ROUND_FRAMES, FshaParty, SplitParty, introduction, party_of
from vfl.runtime import terminate_as_interrupt
from vfl.wire.lifecycle import saved_note
from vfl.wire.remote import Limits
from vfl.wire.settings import ClientSettings
from vfl.wire.tls import client_context

__all__ = ["run_client", "load_bottom", "load_received", "introduction", "BOTTOM_FORMAT", "RECEIVED_FORMAT"]

BOTTOM_FORMAT = "splitlab-bottom/1"
RECEIVED_FORMAT = "splitlab-received/1"


def _state(client: Client) -> dict[str, Any]:
    return {"model": client.model.state_dict(), "optimizer": client.optimizer.state_dict(),
            "defences": [d.state_dict() for d in client.defences], "rng": torch.get_rng_state()}


def _restore(client: Client, saved: dict[str, Any]) -> None:
    client.model.load_state_dict(saved["model"])
    client.optimizer.load_state_dict(saved["optimizer"])
    for defence, state in zip(client.defences, saved["defences"]):
        defence.load_state_dict(state)
    torch.set_rng_state(saved["rng"])                   # a dedicated process: its global stream is its own


class _Answers:
    """The client's side of the session: one method per frame the server may send."""

    def __init__(self, side: SplitParty | FshaParty, channel: Channel, limits: Limits, checkpoints: EpochCheckpoints,
                 device: torch.device, epoch: int):
        self.side, self.client, self.channel = side, side.client, channel
        self.limits, self.checkpoints, self.device, self.epoch = limits, checkpoints, device, epoch
        self.rounds = 0                     # in the session
        self.epoch_rounds = 0               # in the epoch under way
        self.received: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        """With --keep-received: (the round's sample ids, the cut gradient it returned), per round."""

    def expected(self) -> Expect:
        return Expect(*self.side.expected(self.limits, self.epoch, self.rounds), Allow(Kind.BYE))

    def round(self, frame: Frame) -> None:
        self.side.check_round(self.epoch, self.epoch_rounds)
        sent = self.client.send(self.side.round_input(frame), frame.step)
        self.channel.send(Frame(Kind.ACTIVATIONS, frame.step, sent.tensor))
        gradient = self.channel.receive(Expect(Allow(Kind.CUT_GRADIENT, torch.float32, tuple(sent.tensor.shape),
                                                     step=frame.step)))
        self.client.receive(CutGradient(frame.step, gradient.tensor.to(self.device)))
        if self.received is not None:
            self.received.append((frame.tensor.cpu(), gradient.tensor.cpu()))
        self.rounds += 1
        self.epoch_rounds += 1

    def query(self, frame: Frame) -> None:
        sent = self.client.query(self.side.query_input(frame), frame.step)
        rows = len(sent.tensor)
        self.channel.send(Frame(Kind.QUERY, frame.step, sent.tensor))
        answer = self.channel.receive(Expect(Allow(Kind.PREDICTION, torch.int64, (), rows=(rows, rows),
                                                   step=frame.step, values=(-1, self.limits.classes))))
        self.client.receive_prediction(Prediction(frame.step, answer.tensor))

    def end_epoch(self, frame: Frame) -> None:
        self.side.check_epoch_end(self.epoch, self.epoch_rounds)
        self.checkpoints.save(frame.step, _state(self.client))
        self.epoch, self.epoch_rounds = frame.step, 0
        self.channel.send(Frame(Kind.EPOCH_SAVED, frame.step))


def run_client(settings: ClientSettings, run: Run, progress: bool = True) -> dict[str, Any]:
    """Run the client `settings` describes until the server says BYE; returns its metrics (also written)."""
    device = resolve_device(settings.fsha.device if settings.kind == "fsha" else settings.train.device)
    secret = read_secret(settings.secret_file)
    side = party_of(settings, device)
    party = side.party
    checkpoints = EpochCheckpoints(run)
    host, port = parse_address(settings.connect, "--connect")
    saved = checkpoints.epochs() if settings.resume else None
    body = side.introduction(saved)
    run.log(f"{side.title} (party {party} of {side.parties}): connecting to {host}:{port}")
    epoch, channel, failed, start = 0, None, True, time.perf_counter()
    try:
        with terminate_as_interrupt():
            joined = join(host, port, secret, party, side.parties, body, settings.timeout,
                          client_context(settings.tls))
            channel = joined.channel
            limits, epoch, steps = side.accept_terms(joined.terms, saved)
            if epoch:
                _restore(side.client, checkpoints.load(epoch))
            run.log("session open" + (f", resuming after epoch {epoch}" if epoch else ""))
            answers = _Answers(side, channel, limits, checkpoints, device, epoch)
            if settings.keep_received:
                answers.received = []
            with progress_bar(steps, side.title, enabled=progress) as bar:
                while (frame := channel.receive(answers.expected())).kind is not Kind.BYE:
                    if frame.kind in ROUND_FRAMES:
                        answers.round(frame)
                        bar.advance()
                    elif frame.kind in QUERY_FRAMES:
                        answers.query(frame)
                    else:
                        answers.end_epoch(frame)
                        epoch = answers.epoch
            failed = False
    except KeyboardInterrupt:
        _tell(channel, f"party {party} was interrupted")
        raise SplitlabError(f"interrupted; {saved_note(run, max(checkpoints.epochs(), default=0))}") from None
    except SplitlabError as exc:
        if not isinstance(exc, PeerStopped):
            _tell(channel, str(exc))            # the server shows it as "party k stopped: ..."
        run.log(f"stopped: {exc}")
        raise SplitlabError(f"{exc}; {saved_note(run, max(checkpoints.epochs(), default=0))}") from None
    except Exception as exc:                # a bug: the server still hears of it
        _tell(channel, f"party {party} failed ({type(exc).__name__})")
        raise
    finally:
        if channel is not None:
            if failed and not isinstance(channel.broken, PeerSilent):
                channel.finish(2.0)             # the server reads why before the connection goes
            channel.close()
    _keep_later_model(run, epoch)
    atomic_torch_save({"format": BOTTOM_FORMAT, "party": party, "epoch": epoch,
                       "model": side.client.model.state_dict()}, run.file("bottom.pt"))
    if answers.received is not None:
        atomic_torch_save({"format": RECEIVED_FORMAT, "party": party, "samples": [s for s, _ in answers.received],
                           "gradients": [g for _, g in answers.received]}, run.file("received.pt"))
    predicted = side.client.last_prediction.tensor.tolist() if side.client.last_prediction is not None else None
    metrics = {"kind": settings.kind, "party": party, "epochs": epoch, "rounds": answers.rounds,
               "seconds": time.perf_counter() - start, "traffic": channel.traffic.as_dict(),
               "targets_predicted": predicted, "torch_threads": torch.get_num_threads()}
    found = report(side.client)                   # what its own defences did (NoPeek's distance correlation)
    if found:
        metrics["defence_report"] = found
    run.write_metrics(metrics)
    run.log(f"finished after {f'epoch {epoch}' if settings.kind == 'split' else f'{answers.rounds} rounds'}")
    return metrics


def _tell(channel: Channel | None, reason: str) -> None:
    """Best effort: tell the server why this party stops (it may be gone already)."""
    if channel is None or channel.peer_stopped:
        return
    try:
        channel.send(abort(reason), within=ABORT_WITHIN)
    except SplitlabError:               # nobody is left to tell
        pass


def _keep_later_model(run: Run, epoch: int) -> None:
    """Refuse to replace a `bottom.pt` of a later epoch (a resumed run's) with this session's model."""
    path = run.path / "bottom.pt"
    if not path.is_file():
        return
    try:
        earlier = torch.load(path, map_location="cpu", weights_only=True).get("epoch", 0)
    except Exception:                   # noqa: BLE001 - unreadable: nothing worth keeping
        return
    if isinstance(earlier, int) and earlier > epoch:
        raise SplitlabError(f"the server ended the session at epoch {epoch}, but {path} holds the model of epoch "
                            f"{earlier}; kept it (nothing was overwritten)")


def load_bottom(path: Path) -> dict[str, torch.Tensor]:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != BOTTOM_FORMAT:
        raise SplitlabError(f"{path} is not a bottom model written by `splitlab client`")
    return blob["model"]


def load_received(path: Path) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(each round's sample ids, the cut gradient the party received in it) from a `--keep-received` run."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != RECEIVED_FORMAT:
        raise SplitlabError(f"{path} is not a record written by `splitlab client --keep-received`")
    return blob["samples"], blob["gradients"]

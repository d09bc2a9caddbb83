"""A feature party's program (`splitlab client`): connect, prove the secret, answer the server's frames.

It holds its features (its strip of every image; the labels it loads with them are dropped at once) and
its bottom model, built exactly as in process (`vfl.training.build_client`). The server drives the
session; the client answers each frame:

    BATCH (indices)        -> its activations of those samples (ACTIVATIONS), then the CUT_GRADIENT
                              it receives is backpropagated and the bottom model steps
    QUERY_REQUEST (indices)-> inference activations of those test samples (QUERY), then the PREDICTION
    EPOCH_END (epoch)      -> its state saved to `checkpoints/` (EPOCH_SAVED)
    BYE                    -> the bottom model saved (`bottom.pt`); done

Every frame is checked against the handshake's terms before it is used. Its run directory holds its bottom
model, its checkpoints, `metrics.json` (rounds, traffic, the targets' predictions) and `run.log`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.parties import activation_shapes, take_strip
from vfl.progress import progress_bar
from vfl.protocol import Client, CutGradient, Prediction
from vfl.runs import Run, atomic_torch_save
from vfl.runtime import resolve_device
from vfl.wire.settings import ClientSettings
from vfl.training import TrainConfig, build_client
from vfl.wire.channel import Channel, PeerStopped, close_channels, process_group
from vfl.wire.checkpoints import EpochCheckpoints
from vfl.wire.frames import Allow, Expect, Frame, Kind, abort
from vfl.wire.handshake import gloo_store, join, local_address_towards, parse_address, read_secret
from vfl.wire.remote import Limits
from vfl.wire.lifecycle import saved_note, stop_on_sigterm

BOTTOM_FORMAT = "splitlab-bottom/1"


def _features(config: TrainConfig, party: int, split: str) -> torch.Tensor:
    """This party's strip of every image of the split (contiguous, as a party holding only it would)."""
    images = datasets.load(config.dataset, split, config.data_root).images       # its labels are not kept
    return images if config.parties == 1 else take_strip(images, config.parties, party).contiguous()


def _whole_images(config: TrainConfig) -> torch.Tensor:
    """The training images `build_client` takes (it cuts the party's strip; DP estimates its noise there)."""
    return datasets.load(config.dataset, "train", config.data_root).images


def _state(client: Client) -> dict[str, Any]:
    return {"model": client.model.state_dict(), "optimizer": client.optimizer.state_dict(),
            "defences": [d.state_dict() for d in client.defences], "rng": torch.get_rng_state()}


def _restore(client: Client, saved: dict[str, Any]) -> None:
    client.model.load_state_dict(saved["model"])
    client.optimizer.load_state_dict(saved["optimizer"])
    for defence, state in zip(client.defences, saved["defences"]):
        defence.load_state_dict(state)
    torch.set_rng_state(saved["rng"])                   # a dedicated process: its global stream is its own


def introduction(config: TrainConfig, party: int, train_size: int, test_size: int,
                 saved_epochs: list[int] | None = None) -> dict[str, Any]:
    """What a client tells the server in the handshake (`saved_epochs`: None unless it resumes)."""
    shape = activation_shapes(config.arch, config.cut_layer, config.image_shape, config.parties)[party]
    return {"dataset": config.dataset, "arch": config.arch, "cut_layer": config.cut_layer, "party": party,
            "activation_shape": list(shape), "train_size": train_size, "test_size": test_size,
            "resume": saved_epochs is not None, "epochs": saved_epochs or []}


class _Answers:
    """The client's side of the session: one method per frame the server may send."""

    def __init__(self, client: Client, channel: Channel, train: torch.Tensor, test: torch.Tensor,
                 limits: Limits, checkpoints: EpochCheckpoints, device: torch.device, epoch: int):
        self.client, self.channel, self.train, self.test = client, channel, train, test
        self.limits, self.checkpoints, self.device, self.epoch = limits, checkpoints, device, epoch
        self.rounds = 0

    def expected(self) -> Expect:
        lim = self.limits
        return Expect(Allow(Kind.BATCH, torch.int64, (), rows=(1, lim.batch_size), values=(0, lim.train_size)),
                      Allow(Kind.QUERY_REQUEST, torch.int64, (), rows=(1, lim.query_rows), values=(0, lim.test_size)),
                      Allow(Kind.EPOCH_END, step=self.epoch + 1), Allow(Kind.BYE))

    def batch(self, frame: Frame) -> None:
        sent = self.client.send(self.train[frame.tensor].to(self.device), frame.step)
        self.channel.send(Frame(Kind.ACTIVATIONS, frame.step, sent.tensor))
        gradient = self.channel.receive(Expect(Allow(Kind.CUT_GRADIENT, torch.float32, tuple(sent.tensor.shape),
                                                     step=frame.step)))
        self.client.receive(CutGradient(frame.step, gradient.tensor.to(self.device)))
        self.rounds += 1

    def query(self, frame: Frame) -> None:
        rows = len(frame.tensor)
        sent = self.client.query(self.test[frame.tensor].to(self.device), frame.step)
        self.channel.send(Frame(Kind.QUERY, frame.step, sent.tensor))
        answer = self.channel.receive(Expect(Allow(Kind.PREDICTION, torch.int64, (), rows=(rows, rows),
                                                   step=frame.step, values=(-1, self.limits.classes))))
        self.client.receive_prediction(Prediction(frame.step, answer.tensor))

    def end_epoch(self, frame: Frame) -> None:
        self.checkpoints.save(frame.step, _state(self.client))
        self.epoch = frame.step
        self.channel.send(Frame(Kind.EPOCH_SAVED, frame.step))


def run_client(settings: ClientSettings, run: Run, progress: bool = True) -> dict[str, Any]:
    """Run feature party `settings.party` until the server says BYE; returns its metrics (also written)."""
    config, party = settings.train, settings.party
    device = resolve_device(config.device)
    secret = read_secret(settings.secret_file)
    client = build_client(config, device, _whole_images(config), party)
    train, test = _features(config, party, "train"), _features(config, party, "test")
    checkpoints = EpochCheckpoints(run.path)
    host, port = parse_address(settings.connect, "--connect")
    body = introduction(config, party, len(train), len(test), checkpoints.epochs() if settings.resume else None)
    run.log(f"party {party} of {config.parties}: connecting to {host}:{port}")
    epoch, channel, failed, start = 0, None, True, time.perf_counter()
    try:
        with stop_on_sigterm():
            joined = join(host, port, secret, party, config.parties, body, settings.timeout)
            epoch = int(joined.terms["start_epoch"])
            if epoch:
                _restore(client, checkpoints.load(epoch))
            checkpoints.forget_after(epoch)
            limits = Limits(**joined.terms["limits"])
            group = process_group(gloo_store(joined.store, joined.session), party + 1, config.parties + 1,
                                  local_address_towards(host, port), settings.timeout)
            channel = Channel(group, 0, "the server", settings.timeout)
            run.log("session open" + (f", resuming after epoch {epoch}" if epoch else ""))
            answers = _Answers(client, channel, train, test, limits, checkpoints, device, epoch)
            steps = (int(joined.terms["epochs"]) - epoch) * -(-limits.train_size // limits.batch_size)
            with progress_bar(steps, f"party {party}: {config.arch} cut {config.cut_layer}", enabled=progress) as bar:
                while (frame := channel.receive(answers.expected())).kind is not Kind.BYE:
                    if frame.kind is Kind.BATCH:
                        answers.batch(frame)
                        bar.advance()
                    elif frame.kind is Kind.QUERY_REQUEST:
                        answers.query(frame)
                    else:
                        answers.end_epoch(frame)
                        epoch = answers.epoch
            failed = False
    except KeyboardInterrupt:
        _tell(channel, f"party {party} was interrupted")
        raise SplitlabError(f"interrupted; {saved_note(run, epoch)}") from None
    except SplitlabError as exc:
        if not isinstance(exc, PeerStopped):
            _tell(channel, f"party {party} stopped ({exc})")
        run.log(f"stopped: {exc}")
        raise SplitlabError(f"{exc}; {saved_note(run, epoch)}") from None
    except Exception as exc:                # a bug: the server still hears of it
        _tell(channel, f"party {party} failed ({type(exc).__name__})")
        raise
    finally:
        if channel is not None:
            close_channels([channel], failed)
    atomic_torch_save({"format": BOTTOM_FORMAT, "party": party, "model": client.model.state_dict()},
                      run.file("bottom.pt"))
    predicted = client.last_prediction.tensor.tolist() if client.last_prediction is not None else None
    metrics = {"party": party, "epochs": epoch, "rounds": answers.rounds, "seconds": time.perf_counter() - start,
               "traffic": channel.traffic.as_dict(), "targets_predicted": predicted,
               "torch_threads": torch.get_num_threads()}
    run.write_metrics(metrics)
    run.log(f"finished after epoch {epoch}")
    return metrics


def _tell(channel: Channel | None, reason: str) -> None:
    """Best effort: tell the server why this party stops (it may be gone already)."""
    if channel is None:
        return
    try:
        channel.send(abort(reason))
        channel.flush(2.0)
    except Exception:                   # noqa: BLE001 - nobody is left to tell
        pass


def load_bottom(path: Path) -> dict[str, torch.Tensor]:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != BOTTOM_FORMAT:
        raise SplitlabError(f"{path} is not a bottom model written by `splitlab client`")
    return blob["model"]

"""The label party's program (`splitlab serve`): listen, admit K feature parties, train, record what it received.

It holds the labels and the top model, never an image: its training data are sample indices with their
labels, and `RemoteParties` asks the clients for the activations of the indexed samples. The epoch loop is
the in-process one (`vfl.training.fit`); at each epoch's end the server writes that epoch's received
messages (`transcript/`), has every client save its state, then saves its own (`checkpoints/`), so Ctrl-C,
a killed peer or a silent one (`--timeout`) loses at most the unfinished epoch and `--resume` continues
from the last finished one. After training it asks for the evaluation targets' inference activations (the
first test sample of each class), which its role records like every other received message.

Its run directory holds only what it received or made: `transcript/`, `checkpoints/`, `top.pt` (the top
model), `metrics.json` (accuracy, history, seconds, traffic per epoch) and `run.log`.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable

import torch

from vfl import data as datasets
from vfl.defences import report
from vfl.errors import SplitlabError
from vfl.parties import CutLayout
from vfl.protocol import Role
from vfl.runs import Run, atomic_torch_save
from vfl.runtime import generator as seeded_generator
from vfl.runtime import resolve_device
from vfl.wire.settings import ServeSettings
from vfl.tasks import for_task
from vfl.training import FitState, TrainConfig, fit, query_targets, target_indices
from vfl.transcripts import FINAL, TranscriptFiles, epoch_file
from vfl.wire.checkpoints import EpochCheckpoints
from vfl.wire.handshake import Listener, parse_address
from vfl.wire.keys import Secret, read_secret
from vfl.runtime import terminate_as_interrupt
from vfl.wire.lifecycle import saved_note
from vfl.wire.remote import Limits, RemoteParties
from vfl.wire.tls import server_context
from vfl.wire.roles import build_role

TOP_FORMAT = "splitlab-top/1"


def check_data_seed(party: int, body: dict[str, Any], dataset: str, seed: int, draw: str, drawn: str) -> None:
    """Refuse a party whose declared `data_seed` is not the one this side draws `dataset`'s split from
    (`vfl.data.split_seed`): with another, the two sides' samples would not be the same ones (or, for FSHA,
    the victim's private images would overlap the server's public ones). `drawn` names what the seed draws."""
    own = datasets.split_seed(dataset, seed, draw)
    if body.get("data_seed") != own:
        def source(value) -> str:
            return "its fixed split" if value is None else f"--seed {value}"
        raise SplitlabError(f"party {party} draws {dataset}'s {drawn} from {source(body.get('data_seed'))}, the "
                            f"server from {source(own)}; give every side the same --seed and --data-draw")


class _ClientTerms:
    """Checks each client's configuration against the server's; answers with the session's terms."""

    def __init__(self, settings: ServeSettings, shapes: list[tuple[int, ...]], limits: Limits, start_epoch: int):
        self.settings, self.shapes, self.limits, self.start_epoch = settings, shapes, limits, start_epoch

    def __call__(self, party: int, body: Any) -> dict[str, Any]:
        c = self.settings.train
        if not isinstance(body, dict):
            raise SplitlabError(f"party {party} sent a malformed configuration; run the same splitlab on both sides")
        if body.get("kind") != "split":
            raise SplitlabError(f"party {party} is a --kind {body.get('kind')} client; `splitlab serve` trains split "
                                "learning with --kind split clients")
        for key, option in (("dataset", "--dataset"), ("arch", "--arch"), ("cut_layer", "--cut-layer")):
            if body.get(key) != getattr(c, key):
                raise SplitlabError(f"party {party} runs {option} {body.get(key)}, the server {option} "
                                    f"{getattr(c, key)}; give both sides the same {option}")
        if body.get("aggregate", "concat") != c.aggregate:
            raise SplitlabError(f"party {party} runs --aggregate {body.get('aggregate')}, the server --aggregate "
                                f"{c.aggregate}; give every side the same --aggregate")
        if body.get("partition", "contiguous") != c.partition:
            raise SplitlabError(f"party {party} splits the columns by --partition {body.get('partition')}, the server "
                                f"by --partition {c.partition}; give every side the same --partition")
        check_data_seed(party, body, c.dataset, c.seed, c.data_draw, "train/test split (and a random partition)")
        if body.get("activation_shape") != list(self.shapes[party]):
            raise SplitlabError(f"party {party} would send activations shaped {body.get('activation_shape')}, the "
                                f"server's top model takes {list(self.shapes[party])} from it; run the same splitlab")
        if (body.get("train_size"), body.get("test_size")) != (self.limits.train_size, self.limits.test_size):
            raise SplitlabError(f"party {party} holds {body.get('train_size')}/{body.get('test_size')} train/test "
                                f"samples, the server {self.limits.train_size}/{self.limits.test_size}; the parties "
                                "must hold the same samples")
        if bool(body.get("resume")) != self.settings.resume:
            raise SplitlabError(f"the server {'resumes' if self.settings.resume else 'starts afresh'} but party "
                                f"{party} {'resumes' if body.get('resume') else 'starts afresh'}; pass --resume to "
                                "both sides or to neither")
        saved = body.get("epochs") if isinstance(body.get("epochs"), list) else []
        if self.start_epoch and self.start_epoch not in saved:
            raise SplitlabError(f"the server resumes after epoch {self.start_epoch} but party {party} has no "
                                f"checkpoint of it (it has {saved or 'none'}); start both sides again without --resume")
        return {"epochs": c.epochs, "batch_size": c.batch_size, "start_epoch": self.start_epoch,
                "limits": self.limits.as_dict()}


def admit(listener: Listener, secret: Secret, parties: int, terms: Callable[[int, Any], dict[str, Any]],
          layout: CutLayout, device: torch.device) -> tuple[RemoteParties, list[dict]]:
    """Admit `parties` clients (the handshake; `terms` checks each one's configuration and gives the session's
    terms) on the connections that then carry their tensors. Returns the clients as the server sees them and
    the configurations they declared."""
    channels, bodies = listener.accept(secret, parties, terms)
    return RemoteParties(channels, layout, device), bodies


def open_session(settings: ServeSettings, listener: Listener, layout: CutLayout, limits: Limits,
                 device: torch.device, start_epoch: int = 0) -> RemoteParties:
    """Admit the split-learning parties `settings` trains with (the handshake)."""
    terms = _ClientTerms(settings, list(layout.shapes), limits, start_epoch)
    return admit(listener, read_secret(settings.secret_file), settings.train.parties, terms, layout, device)[0]


def _labels(config: TrainConfig, split: str) -> datasets.ImageData:
    """The split's labels as the label party holds them: sample indices in place of the images."""
    data = for_task(datasets.load(config.dataset, split, config.data_root, seed=config.seed, draw=config.data_draw), config.task,
                    config.positive)
    return datasets.ImageData(data.name, split, torch.arange(len(data)), data.labels, data.provenance)


def _state(role: Role, generator: torch.Generator, state: FitState, traffic: list[dict]) -> dict[str, Any]:
    """What the server needs to go on after this epoch: the role's model and optimiser, the data order's
    generator, torch's stream, the loop's counters and what was measured so far."""
    saved: dict[str, Any] = {"generator": generator.get_state(), "rng": torch.get_rng_state(), "step": state.step,
                             "history": state.history, "epoch_seconds": state.epoch_seconds,
                             "cut_bytes": dict(state.cut_bytes), "traffic": traffic}
    if getattr(role, "model", None) is not None:
        saved["model"] = role.model.state_dict()
    if getattr(role, "optimizer", None) is not None:      # aggVFL's label party sums and trains nothing
        saved["optimizer"] = role.optimizer.state_dict()
    saved["defences"] = [d.state_dict() for d in getattr(role, "defences", ())]   # their noise streams go on
    return saved


def _restore(saved: dict[str, Any], role: Role, generator: torch.Generator) -> tuple[FitState, list[dict]]:
    if getattr(role, "model", None) is not None:
        role.model.load_state_dict(saved["model"])
    if getattr(role, "optimizer", None) is not None:
        role.optimizer.load_state_dict(saved["optimizer"])
    for defence, state in zip(getattr(role, "defences", ()), saved.get("defences", ())):
        defence.load_state_dict(state)
    generator.set_state(saved["generator"])
    torch.set_rng_state(saved["rng"])                   # a dedicated process: its global stream is its own
    # checkpoints written before the cut's bytes were saved count them from the resume on
    cut_bytes = dict(saved.get("cut_bytes", FitState().cut_bytes))
    return FitState(saved["epoch"], saved["step"], list(saved["history"]), list(saved["epoch_seconds"]),
                    cut_bytes), list(saved["traffic"])


def serve(settings: ServeSettings, run: Run, *, role: Role | None = None, listener: Listener | None = None,
          progress: bool = True, resumable: bool = True) -> dict[str, Any]:
    """Run the label party; returns its metrics (also written to the run directory). `role` replaces the
    one `settings.role` names (any `vfl.protocol.Role`); `listener` one already listening (`train --transport
    tcp` starts its clients once it knows the port); `resumable` False for a command that cannot resume (its
    errors then say where the run is, not how to resume it)."""
    config = settings.train
    device = resolve_device(config.device)
    train, test = _labels(config, "train"), _labels(config, "test")
    shapes = config.cut_shapes()          # activations, or aggVFL's class scores
    layout = CutLayout(shapes)
    role_name = settings.role if role is None else type(role).__name__
    if role is None:
        role = build_role(config, settings.role, device, layout.joined_shape, settings.choose_gradient)
    generator = seeded_generator(config.seed)
    checkpoints, transcripts = EpochCheckpoints(run), TranscriptFiles(run, role.seen)
    state, traffic = FitState(), []
    if settings.resume and checkpoints.epochs():
        state, traffic = _restore(checkpoints.load(checkpoints.epochs()[-1]), role, generator)
    if settings.resume:
        checkpoints.forget_after(state.epoch)
        transcripts.forget_after(state.epoch)
    limits = Limits(len(train), len(test), config.batch_size, config.classes)
    if listener is None:
        listener = listen(settings)
    run.log(f"listening on {listener.address} for {config.parties} part{'y' if config.parties == 1 else 'ies'}"
            + (f", resuming after epoch {state.epoch}" if state.epoch else ""))
    parties: RemoteParties | None = None
    failed, start = True, time.perf_counter()
    try:
        with terminate_as_interrupt():
            parties = open_session(settings, listener, layout, limits, device, state.epoch)
            parties.role = role
            run.log(f"session open: role {role_name}")
            last = parties.traffic.as_dict()

            def end_epoch(s: FitState) -> None:
                nonlocal last
                transcripts.write(epoch_file(s.epoch))
                parties.end_epoch(s.epoch)
                now = parties.traffic.as_dict()
                traffic.append({key: now[key] - last[key] for key in now})
                last = now
                checkpoints.save(s.epoch, _state(role, generator, s, traffic))
                run.write_metrics(_metrics(role_name, config, s, traffic, time.perf_counter() - start))

            on_device = datasets.ImageData(train.name, "train", train.images.to(device), train.labels.to(device),
                                           train.provenance)
            state = fit(parties, role, on_device, test, config, device, generator, state=state, run=run,
                        progress=progress, on_epoch=end_epoch)
            prediction = query_targets(parties, role, test, device, state.step)
            transcripts.write(FINAL)
            parties.finish(settings.timeout)
            failed = False
    except KeyboardInterrupt:
        if parties is not None:
            parties.abort("the server was interrupted")
        raise SplitlabError(f"interrupted; {saved_note(run, max(checkpoints.epochs(), default=0), resumable)}") \
            from None
    except SplitlabError as exc:
        if parties is not None:
            parties.abort(str(exc))             # each party shows it as "the server stopped: ..."
        run.log(f"stopped: {exc}")
        raise SplitlabError(f"{exc}; {saved_note(run, max(checkpoints.epochs(), default=0), resumable)}") from None
    except Exception as exc:                # a bug (in a role's callback, say): the parties still hear of it
        if parties is not None:
            parties.abort(f"the server failed ({type(exc).__name__})")
        raise
    finally:
        if parties is not None:
            parties.close(failed)
        listener.close()
    if getattr(role, "model", None) is not None:
        atomic_torch_save({"format": TOP_FORMAT, "model": role.model.state_dict()}, run.file("top.pt"))
    metrics = _metrics(role_name, config, state, traffic, time.perf_counter() - start)
    found = report(role)                          # what its defences did in this session
    if found:
        metrics["defence_report"] = found
    metrics["targets"] = {"indices": target_indices(test.labels), "predicted": prediction.tensor}
    run.write_metrics(metrics)
    run.log(f"finished: accuracy {metrics['accuracy']}")
    return metrics


def listen(settings: ServeSettings) -> Listener:
    """The server's listening socket as `settings` say (`--listen`, `--timeout`, the TLS options)."""
    return Listener(*parse_address(settings.listen, "--listen"), settings.timeout, server_context(settings.tls))


def _metrics(role: str, config: TrainConfig, state: FitState, traffic: list[dict], seconds: float) -> dict[str, Any]:
    """`seconds` counts this process's session only (a resumed run starts again from 0); `traffic_per_epoch`
    is what crossed the wire in each epoch, the epoch-end exchange included; `cut_bytes` the protocol's messages by
    sender, counted as in process (`FitState.cut_bytes`), so both transports report the same figure."""
    accuracy = state.history[-1]["test_accuracy"] if state.history else math.nan
    return {"accuracy": accuracy, "seconds": seconds, "history": state.history, "epoch_seconds": state.epoch_seconds,
            "role": role, "parties": config.parties, "traffic_per_epoch": traffic,
            "cut_bytes": dict(state.cut_bytes), "torch_threads": torch.get_num_threads()}


def load_top(path: Path) -> dict[str, torch.Tensor]:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != TOP_FORMAT:
        raise SplitlabError(f"{path} is not a top model written by `splitlab serve`")
    return blob["model"]

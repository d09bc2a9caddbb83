"""`splitlab serve` and `splitlab client`: the two programs of split learning over TCP, one per organisation.

    splitlab serve  --listen 127.0.0.1:29500 --secret-file secret --out runs/server
    splitlab client --connect 127.0.0.1:29500 --secret-file secret --out runs/client

Both take the training options of `splitlab train` that concern them (the server: epochs, batch size,
its optimiser; the client: its defence and optimiser; both: dataset, architecture, cut layer, parties,
seed), and the handshake refuses a pair whose dataset, architecture, cut layer or parties differ.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Optional

import typer

from vfl import data as datasets
from vfl.cli import (ARCH_OPTION, CUT_OPTION, DATASET_OPTION, DEFENCE_OPTION, EPOCHS_OPTION, RUN, RunOptions, emit,
                     handles_errors, table, with_run_options)
from vfl.errors import SplitlabError
from vfl.runs import Run, to_jsonable
from vfl.runtime import resolve_device
from vfl.training import TrainConfig
from vfl.wire.client import ClientSettings, run_client
from vfl.wire.server import ServeSettings, serve as serve_program

SECRET_OPTION = typer.Option(None, "--secret-file", help="File holding the secret both sides share (at least 16 "
                             "bytes, e.g. `head -c 32 /dev/urandom | base64`); a peer that cannot prove it is "
                             "refused before any tensor is exchanged.")
TIMEOUT_OPTION = typer.Option(60.0, "--timeout", help="Seconds to wait for the peer (to join, or to send its next "
                              "message) before giving up with an error.")
RESUME_OPTION = typer.Option(False, "--resume", help="Continue the run in --out from its last finished epoch "
                             "(model, optimiser, random streams and data order): give it to both sides.")
PARTIES_OPTION = typer.Option(1, "--parties", help="Feature parties, each holding a vertical strip of every image "
                              "(K=2: left and right halves); the server joins their activations.")
LR_OPTION = typer.Option(1e-3, "--lr", help="Learning rate of this side's optimiser.")
OPTIMIZER_OPTION = typer.Option("adam-amsgrad", "--optimizer", help="sgd, momentum, adam or adam-amsgrad.")
UNCHANGEABLE = ("dataset", "arch", "cut_layer", "epochs", "batch_size", "lr", "optimizer", "seed", "defence",
                "parties", "party", "role", "choose_gradient")
"""Options a resumed run must keep (the device, data root, address, timeout and secret may change)."""


def _flat(settings: Any) -> dict[str, Any]:
    record = dataclasses.asdict(settings)
    return {**record.pop("train"), **record}


def _check_same_options(command: str, settings: ServeSettings | ClientSettings, out: Path) -> None:
    """--resume: the run in `out` must have been started with the options that shape its numbers."""
    try:
        earlier = json.loads((out / "config.json").read_text())["config"][command]
        earlier = {**earlier.pop("train"), **earlier}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return                                  # not such a run: Run.reopen says so
    now = to_jsonable(_flat(settings))
    for key in UNCHANGEABLE:
        if key in now and earlier.get(key) != now[key]:
            raise SplitlabError(f"--resume: {out} was started with --{key.replace('_', '-')} {earlier.get(key)}, "
                                f"not {now[key]}; give the same options to continue it")


def _open_run(command: str, settings: ServeSettings | ClientSettings, opts: RunOptions) -> Run:
    """A new run directory, or with --resume the earlier one in --out (refused if started with other options)."""
    if not settings.resume:
        config = {command: settings, "device": str(resolve_device(settings.train.device)),
                  "dataset_provenance": datasets.dataset_spec(settings.train.dataset).source}
        return Run.create(command, config, opts.out, overwrite=opts.overwrite)
    if opts.overwrite:
        raise SplitlabError("--resume continues the run in --out; it cannot be combined with --overwrite")
    if opts.out is not None:
        _check_same_options(command, settings, Path(opts.out))
    return Run.reopen(command, opts.out)


@with_run_options(*RUN)
def serve(
    listen: str = typer.Option("127.0.0.1:29500", "--listen", help="HOST:PORT to listen on. 127.0.0.1 (the default) "
                               "admits clients of this machine only; port 0 picks a free one."),
    secret_file: Optional[Path] = SECRET_OPTION,
    role: str = typer.Option("honest", "--role", help="honest (trains the task), curious (also keeps every activation "
                             "it receives, inference queries included, with tensors in transcript/) or malicious "
                             "(returns the gradients --choose-gradient picks)."),
    choose_gradient: Optional[str] = typer.Option(None, "--choose-gradient", help="MODULE:FUNCTION: called with the "
                                                  "run's context, returns choose_gradient(H, step) -> G (--role "
                                                  "malicious; e.g. vfl.wire.roles:shrink_activations)."),
    timeout: float = TIMEOUT_OPTION,
    resume: bool = RESUME_OPTION,
    parties: int = PARTIES_OPTION,
    dataset: str = DATASET_OPTION,
    arch: str = ARCH_OPTION,
    cut_layer: int = CUT_OPTION,
    epochs: int = EPOCHS_OPTION,
    batch_size: int = typer.Option(64, "--batch-size", help="Mini-batch size (the server sets it for every party)."),
    lr: float = LR_OPTION,
    optimizer: str = OPTIMIZER_OPTION,
    opts: RunOptions = RunOptions(),
) -> None:
    """Run the label party (server) of split learning over TCP: admit the clients that prove the shared secret, train the top model, record what it received."""
    config = TrainConfig(dataset=dataset, arch=arch, cut_layer=cut_layer, epochs=epochs, batch_size=batch_size, lr=lr,
                         optimizer=optimizer, seed=opts.seed, device=opts.device, data_root=opts.root, parties=parties)
    settings = ServeSettings(config, listen, str(secret_file) if secret_file else None, timeout, role,
                             choose_gradient, resume)
    settings.validate()
    run = _open_run("serve", settings, opts)
    metrics = serve_program(settings, run, progress=not opts.as_json)

    def summary(console) -> None:
        console.print(table(f"serve {arch}, cut {cut_layer}, {dataset}, {parties} part{'y' if parties == 1 else 'ies'}",
                            metrics["history"], ["epoch", "loss", "train_accuracy", "test_accuracy"]))
        sent = sum(t["bytes_sent"] for t in metrics["traffic_per_epoch"])
        received = sum(t["bytes_received"] for t in metrics["traffic_per_epoch"])
        console.print(f"test accuracy {metrics['accuracy']:.4f} in {metrics['seconds']:.1f} s; received "
                      f"{received / 2**20:.1f} MiB, sent {sent / 2**20:.1f} MiB; run {run.path}")

    emit(run.record(metrics), opts.as_json, summary)


@with_run_options(*RUN)
def client(
    connect: str = typer.Option("127.0.0.1:29500", "--connect", help="HOST:PORT of `splitlab serve`."),
    secret_file: Optional[Path] = SECRET_OPTION,
    party: int = typer.Option(0, "--party", help="Which feature party this is, 0 to --parties - 1 (its strip)."),
    parties: int = PARTIES_OPTION,
    timeout: float = TIMEOUT_OPTION,
    resume: bool = RESUME_OPTION,
    dataset: str = DATASET_OPTION,
    arch: str = ARCH_OPTION,
    cut_layer: int = CUT_OPTION,
    lr: float = LR_OPTION,
    optimizer: str = OPTIMIZER_OPTION,
    defence: str = DEFENCE_OPTION,
    opts: RunOptions = RunOptions(),
) -> None:
    """Run a feature party (client) of split learning over TCP: connect to `splitlab serve`, prove the shared secret, train the bottom model on its features."""
    config = TrainConfig(dataset=dataset, arch=arch, cut_layer=cut_layer, lr=lr, optimizer=optimizer, seed=opts.seed,
                         device=opts.device, defence=defence, data_root=opts.root, parties=parties)
    settings = ClientSettings(config, party, connect, str(secret_file) if secret_file else None, timeout, resume)
    settings.validate()
    run = _open_run("client", settings, opts)
    metrics = run_client(settings, run, progress=not opts.as_json)
    t = metrics["traffic"]
    emit(run.record(metrics), opts.as_json, lambda c: c.print(
        f"party {party}: {metrics['rounds']} rounds, {metrics['epochs']} epochs in {metrics['seconds']:.1f} s; sent "
        f"{t['bytes_sent'] / 2**20:.1f} MiB in {t['frames_sent']} frames, received {t['bytes_received'] / 2**20:.1f} "
        f"MiB in {t['frames_received']}; run {run.path}"))


def register(app: typer.Typer) -> None:
    app.command("serve")(handles_errors(serve))
    app.command("client")(handles_errors(client))

"""`splitlab serve` and `splitlab client`: the two programs of split learning over TCP, one per organisation.

    splitlab serve  --listen 127.0.0.1:29500 --secret-file secret --out runs/server
    splitlab client --connect 127.0.0.1:29500 --secret-file secret --out runs/client
    splitlab keys   --secret-file secret --parties 2 --out keys      # each party's own key (party-K.key)

Both take the training options of `splitlab train` that concern them (the server: epochs, batch size,
its optimiser; the client: its defence and optimiser; both: dataset, architecture, cut layer, parties,
seed), and the handshake refuses a pair whose dataset, architecture, cut layer or parties differ.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import typer

from vfl import data as datasets
from vfl.cli_options import (RUN, RunOptions, command_from, parameters, renamed_parameters, run_options,
                             shared_parameters, shown_value, values)
from vfl.cli_output import emit, handles_errors, table
from vfl.errors import SplitlabError
from vfl.runs import Run, to_jsonable
from vfl.runtime import resolve_device
from vfl.fsha_victim import FSHA_DEFAULTS, FSHA_MEANING, NOT_FSHA, RENAMED, FshaCase
from vfl.training import TrainConfig
from vfl.validate import check_int
from vfl.wire.client import run_client
from vfl.wire.keys import party_key_text, read_secret, write_keys
from vfl.wire.server import listen, serve as serve_program
from vfl.options import take_renamed
from vfl.wire.settings import CLIENT_TRAIN, FSHA_CLIENT, FSHA_SHARED, SERVER_TRAIN, ClientSettings, ServeSettings

SPLIT_ONLY = (*NOT_FSHA, "party", "resume", "keep_received")
"""Options FSHA's victim (`--kind fsha`) does not take: the case's fields it has no use for (`NOT_FSHA`: it is one
party and trains on the dataset's classes), and a split client's own: its slot, and the checkpoints it keeps."""

UNCHANGEABLE = ("dataset", "task", "positive", "arch", "cut_layer", "epochs", "batch_size", "lr", "optimizer", "seed",
                "defence", "send_back", "parties", "partition", "aggregate", "party", "role", "choose_gradient")
"""Options a resumed run must keep (the device, data root, address, timeout and secret may change)."""
ADDED_LATER = {"partition": "contiguous", "aggregate": "concat"}
"""Options runs started before they existed do not record, and the value those runs had."""


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
        if key in now and earlier.get(key, ADDED_LATER.get(key)) != now[key]:
            raise SplitlabError(f"--resume: {out} was started with --{key.replace('_', '-')} {earlier.get(key)}, "
                                f"not {now[key]}; give the same options to continue it")


def _open_run(command: str, settings: ServeSettings | ClientSettings, opts: RunOptions) -> Run:
    """A new run directory, or with --resume the earlier one in --out (refused if started with other options)."""
    if not settings.resume:
        own = getattr(settings, "fsha", None) or settings.train
        record: Any = settings
        if own is not settings.train:                   # FSHA's victim: its own configuration, no training one
            record = {k: v for k, v in dataclasses.asdict(settings).items() if k != "train"}
        config = {command: record, "device": str(resolve_device(own.device)),
                  "dataset_provenance": datasets.dataset_spec(own.dataset).source}
        return Run.create(command, config, opts.out, overwrite=opts.overwrite)
    if opts.overwrite:
        raise SplitlabError("--resume continues the run in --out; it cannot be combined with --overwrite")
    if opts.out is not None:
        _check_same_options(command, settings, Path(opts.out))
    return Run.reopen(command, opts.out)


def _settings(cls: type, train: tuple[str, ...], given: dict[str, Any]):
    """The program's settings and run options from the generated options' values."""
    opts = run_options({k: given[k] for k in RUN if k in given})
    config = TrainConfig(seed=opts.seed, device=opts.device, data_root=opts.root, data_draw=opts.data_draw,
                         **{k: v for k, v in values(TrainConfig, given).items() if k in train})
    return cls(train=config, **values(cls, given)), opts


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _client_settings(given: dict[str, Any]) -> tuple[ClientSettings, RunOptions]:
    """The client's settings: a split-learning feature party's, or with --kind fsha FSHA's victim's (its dataset
    and architecture from the shared --dataset and --arch); an option of the other kind is refused, FSHA's earlier
    names of its options (`RENAMED`) too."""
    if (given.get("kind") or "split") != "fsha":
        stray = [k for k in (*FSHA_CLIENT, *RENAMED) if given.get(k) is not None]
        if stray:
            raise SplitlabError(f"{_flag(stray[0])} is an option of FSHA's victim; give --kind fsha or drop it")
        return _settings(ClientSettings, CLIENT_TRAIN, given)
    given = take_renamed(given, RENAMED)
    stray = [k for k in SPLIT_ONLY if given.get(k) not in (None, False)]
    if stray:
        raise SplitlabError(f"{_flag(stray[0])} is an option of a split-learning client (--kind split); FSHA's "
                            "victim does not take it")
    opts = run_options({k: given[k] for k in RUN if k in given})
    fsha = FshaCase(seed=opts.seed, device=opts.device, data_root=opts.root, data_draw=opts.data_draw,
                    **values(FshaCase, {k: given.get(k) for k in FSHA_SHARED + FSHA_CLIENT}))
    return ClientSettings(fsha=fsha, **values(ClientSettings, given)), opts


def _serve(given: dict[str, Any]) -> None:
    """Run the label party (server) of split learning over TCP: admit the clients that prove the shared secret,
    train the top model, record what it received."""
    settings, opts = _settings(ServeSettings, SERVER_TRAIN, given)
    c = settings.train
    listener = listen(settings)                 # before the run: a port in use leaves nothing behind
    try:
        run = _open_run("serve", settings, opts)
    except BaseException:
        listener.close()
        raise
    if not opts.as_json:
        typer.echo(f"listening on {listener.address}")    # the port --listen HOST:0 took, for the clients
    metrics = serve_program(settings, run, listener=listener, progress=not opts.as_json)

    def summary(console) -> None:
        console.print(table(f"serve {c.arch}, cut {c.cut_layer}, {c.dataset}, {c.parties} "
                            f"part{'y' if c.parties == 1 else 'ies'}", metrics["history"],
                            ["epoch", "loss", "train_accuracy", "test_accuracy"]))
        sent = sum(t["bytes_sent"] for t in metrics["traffic_per_epoch"])
        received = sum(t["bytes_received"] for t in metrics["traffic_per_epoch"])
        console.print(f"test accuracy {metrics['accuracy']:.4f} in {metrics['seconds']:.1f} s; received "
                      f"{received / 2**20:.1f} MiB, sent {sent / 2**20:.1f} MiB; run {run.path}")

    emit(run.record(metrics), opts.as_json, summary)


def _client(given: dict[str, Any]) -> None:
    """Run a feature party (client) of split learning over TCP: connect to `splitlab serve`, prove the shared
    secret, train the bottom model on its features."""
    settings, opts = _client_settings(given)
    run = _open_run("client", settings, opts)
    metrics = run_client(settings, run, progress=not opts.as_json)
    t = metrics["traffic"]
    emit(run.record(metrics), opts.as_json, lambda console: console.print(
        f"party {settings.party}: {metrics['rounds']} rounds, {metrics['epochs']} epochs in {metrics['seconds']:.1f} "
        f"s; sent {t['bytes_sent'] / 2**20:.1f} MiB in {t['frames_sent']} frames, received "
        f"{t['bytes_received'] / 2**20:.1f} MiB in {t['frames_received']}; run {run.path}"))


def _per_kind(generated: list) -> list:
    """The client's training options, with FSHA's meaning and default beside a split client's where they differ
    (`--cut-layer` is FSHA's split level, 4 unless given; `vfl.fsha_victim.FSHA_MEANING`)."""
    for p in generated:
        if p.name in FSHA_DEFAULTS:
            split = p.default.show_default
            meaning = f" With --kind fsha: {FSHA_MEANING[p.name]}" if p.name in FSHA_MEANING else ""
            p.default.help += f"{meaning} Default: {split} (--kind split), {shown_value(FSHA_DEFAULTS[p.name])} " \
                              "(--kind fsha)."
            p.default.show_default = False
    return generated


_CLIENT_TRAINING = _per_kind(parameters(TrainConfig, only=CLIENT_TRAIN, panel="Training"))
serve = command_from(_serve, [parameters(ServeSettings), parameters(TrainConfig, only=SERVER_TRAIN, panel="Training"),
                              shared_parameters(RUN)], name="serve", doc=_serve.__doc__)
client = command_from(_client, [parameters(ClientSettings), _CLIENT_TRAINING,
                                parameters(FshaCase, only=FSHA_CLIENT, panel="FSHA victim (--kind fsha)"),
                                renamed_parameters(_CLIENT_TRAINING, RENAMED), shared_parameters(RUN)],
                      name="client", doc=_client.__doc__)


def keys(
    secret_file: Path = typer.Option(..., "--secret-file", help="The shared secret: the server's --secret-file."),
    parties: int = typer.Option(1, "--parties", help="How many feature parties: writes party-0.key to party-(K-1).key."),
    out: Path = typer.Option(..., "--out", help="Folder to write the keys into (created if absent; an existing key "
                             "file is never overwritten)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """Write each feature party's own key, derived from the shared secret; party k's key proves slot k and no
    other, so give each party its own file only."""
    check_int("--parties", parties, low=1, high=64)
    shared = read_secret(secret_file).shared()
    paths = write_keys(out, [party_key_text(shared, k) for k in range(parties)])
    emit({"command": "keys", "parties": parties, "keys": [str(p) for p in paths]}, as_json,
         lambda console: console.print("\n".join(f"party {k}: {p} (give it to party {k} only; `splitlab client "
                                                 f"--party {k} --secret-file {p.name}`)" for k, p in enumerate(paths))))


def register(app: typer.Typer) -> None:
    app.command("serve")(handles_errors(serve))
    app.command("client")(handles_errors(client))
    app.command("keys")(handles_errors(keys))

"""The split-learning commands of `splitlab`: train, evaluate, models, datasets, defences.

Commands stay thin: build a validated config from the generated options, create the run directory, call
the library, print (`vfl.cli_output`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer

from vfl import data as datasets
from vfl.cli_options import (RUN, RunOptions, command_from, parameters, run_options, shared_parameters, shown_value,
                              values, with_run_options)
from vfl.cli_output import emit, handles_errors, table
from vfl.download import DEFAULT_TIMEOUT, TIMEOUT_HELP, check_timeout
from vfl.errors import SplitlabError
from vfl.models import describe, describe_hfl
from vfl.options import Validated, choice, option
from vfl.preflight import inputs_checked
from vfl.protocol import evaluate as evaluate_split
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, load_checkpoint, load_data, save_trained, train_split, training_metrics

@dataclass(frozen=True, kw_only=True)
class Transport(Validated):
    """Where the two parties of `splitlab train` run and what the server keeps."""
    transport: str = option("local", "local (both sides in this process) or tcp (the server here, each party a "
                            "`splitlab client` process on 127.0.0.1).", choice(("local", "tcp")))
    role: str = option("honest", "honest, or curious: the server also keeps every activation it receives and "
                       "writes them to transcript/.", choice(("honest", "curious")))


def _train(given: dict[str, Any]) -> None:
    opts = run_options({k: given[k] for k in RUN if k in given})
    config = TrainConfig(**values(TrainConfig, given))
    where = Transport(**values(Transport, given))
    if where.transport == "tcp":
        from vfl.wire.launch import check_hosted, check_local_parties

        check_hosted(config)
        check_local_parties(config.parties)
    train_data, test_data = load_data(config)       # missing or broken data is an input refused with the others
    inputs_checked()
    run = Run.create("train", {"train": config, "transport": where.transport, "role": where.role,
                               "device": str(resolve_device(config.device)),
                               "dataset_provenance": train_data.provenance,
                               "feature_partition": config.feature_partition()}, opts.out, overwrite=opts.overwrite)
    wire: dict[str, Any] = {}
    if where.transport == "tcp":
        from vfl.wire.launch import train_over_tcp

        trained, wire = train_over_tcp(config, run, where.role, progress=not opts.as_json)
    else:
        trained = train_split(config, train_data, test_data, run, progress=not opts.as_json, role=where.role,
                              transcript_dir=run if where.role == "curious" else None)
    checkpoint, curves = save_trained(run, trained)
    metrics = {**training_metrics(trained), **wire}
    run.write_metrics(metrics)

    def summary(console) -> None:
        console.print(table(f"train {config.arch}, cut {config.cut_layer}, {config.dataset}", trained.history,
                            ["epoch", "loss", "train_accuracy", "test_accuracy"]))
        console.print(f"test accuracy {trained.accuracy:.4f} after {config.epochs} epochs in {trained.seconds:.1f} s; "
                      f"checkpoint {checkpoint}; curves {curves}")

    emit(run.record(metrics, checkpoint=str(checkpoint)), opts.as_json, summary)


train = command_from(_train, [parameters(TrainConfig), parameters(Transport),
                              shared_parameters(("out", "overwrite", "as_json"))], name="train",
                     doc="Train a split model with the explicit client/server protocol and save a checkpoint.")


@with_run_options("device", "data_root", "as_json")
def evaluate(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="A checkpoint.pt written by `splitlab train`."),
    opts: RunOptions = RunOptions(),
) -> None:
    """Re-measure a checkpoint's test accuracy on its dataset (no run directory is written)."""
    trained = load_checkpoint(checkpoint, opts.device, opts.root)
    test = load_data(trained.config)[1]
    accuracy = evaluate_split(trained.client, trained.server, test.images, test.labels, resolve_device(opts.device))
    emit({"command": "evaluate", "checkpoint": str(checkpoint), "config": trained.config,
          "metrics": {"accuracy": accuracy}}, opts.as_json,
         lambda c: c.print(f"{trained.config.arch} cut {trained.config.cut_layer} on {trained.config.dataset}: "
                           f"test accuracy {accuracy:.4f}"))


@with_run_options("as_json")
def models(opts: RunOptions = RunOptions()) -> None:
    """List every split architecture with its cut layers and client/server/total parameter counts,
    then the horizontal-FL models (whole model on every client)."""
    rows, hfl_rows = describe(), describe_hfl()

    def show(console) -> None:
        console.print(table("split-learning architectures and cut layers", rows,
                            ["arch", "cut_layer", "input", "activation", "client_params", "server_params",
                             "total_params"]))
        console.print(table("horizontal-FL models (1x28x28 input, 10 classes)", hfl_rows,
                            ["arch", "input", "total_params", "source"]))

    emit({"command": "models", "architectures": rows, "hfl_models": hfl_rows}, opts.as_json, show)


@with_run_options("data_root", "as_json")
def datasets_command(
    download: Optional[str] = typer.Option(None, "--download", help="Fetch this dataset's missing files (torchvision's, "
                                           "or a tabular set's: criteo, german-credit) "
                                           "into the data root (the only command that fetches data; $HTTPS_PROXY "
                                           "and $HTTP_PROXY are honoured)."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", metavar="SECONDS", help=TIMEOUT_HELP),
    source: Optional[str] = typer.Option(None, "--from", metavar="PATH|URL", help="With --download of a tabular set "
                                         "(criteo, german-credit): read its file from this path or URL (as "
                                         "published: a .tar.gz holding it, a .gz, or the file) instead of its "
                                         "address."),
    opts: RunOptions = RunOptions(),
) -> None:
    """List each dataset, its source and whether it is available here."""
    data_root, as_json = opts.data_root, opts.as_json
    check_timeout(timeout)
    if source is not None and not download:
        raise SplitlabError("--from names the file of --download NAME; give --download too")
    if download:
        datasets.download(download, data_root, timeout=timeout, progress=not as_json, source=source)
    rows = []
    for name, spec in datasets.DATASETS.items():
        ok, reason = datasets.availability(name, data_root)
        rows.append({"dataset": name, "shape": list(spec.image_shape), "available": ok,
                     "source": spec.source, "status": "available" if ok else reason})
    emit({"command": "datasets", "data_root": str(data_root or datasets.default_data_root()), "datasets": rows},
         as_json, lambda c: c.print(table("datasets", rows, ["dataset", "shape", "available", "source"])))


@with_run_options("as_json")
def defences_command(opts: RunOptions = RunOptions()) -> None:
    """List every defence: its point of the protocol, the flag that takes it, its options and its paper."""
    from vfl.defences import registry

    rows = [{"defence": s.name, "point": s.point, "flag": s.flag,
             "options": ", ".join(f.name + ("" if f.default is dataclasses.MISSING else f"={shown_value(f.default)}")
                                  for f, _ in s.options()) or "-",
             "example": s.example, "paper": s.paper} for s in registry.specs()]
    failed = registry.failures()

    def show(console) -> None:
        console.print(table("defences (docs/defences.md: options' ranges, and which attack meets which)", rows,
                            ["defence", "point", "flag", "options", "example"]))
        for line in failed.values():
            console.print(line)

    emit({"command": "defences", "defences": rows, "failed_to_load": failed}, opts.as_json, show)


def build_app() -> typer.Typer:
    """The `splitlab` app with the split-learning commands; upper layers add theirs with `register`."""
    app = typer.Typer(help="splitlab: attacks and defences for split (vertical) federated learning.",
                      no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    app.command("train")(handles_errors(train))
    app.command("evaluate")(handles_errors(evaluate))
    app.command("models")(handles_errors(models))
    app.command("datasets")(handles_errors(datasets_command))
    app.command("defences")(handles_errors(defences_command))
    return app

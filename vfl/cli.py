"""The split-learning commands of `splitlab` (train, models, datasets) and the CLI's shared plumbing.

Commands stay thin: parse options, build a validated config, create the run directory, call the
library, print. `SplitlabError` becomes one line on stderr and exit code 2. With `--json` a command
prints exactly one JSON object (its result record) on stdout; progress bars go to stderr.
"""
from __future__ import annotations

import functools
import inspect
import json
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.table import Table

from vfl import data as datasets
from vfl.errors import SplitlabError, lookup
from vfl.models import describe, describe_hfl
from vfl.protocol import evaluate as evaluate_split
from vfl.runs import Run, closing_runs, dumps, to_jsonable
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, load_checkpoint, load_data, save_trained, train_split, training_metrics

TRANSPORTS = ("local", "tcp")

JSON_OPTION = typer.Option(False, "--json", help="Print the result record as one JSON object on stdout.")
OUT_OPTION = typer.Option(None, "--out", help="Run directory (default: runs/<command>/<timestamp>).")
DEVICE_OPTION = typer.Option("auto", "--device", help="auto (CUDA if present), cpu or cuda[:N].")
DATA_ROOT_OPTION = typer.Option(None, "--data-root", help="Folder with torchvision datasets "
                                "(default $SPLITLAB_DATA or ~/.cache/splitlab).")
SEED_OPTION = typer.Option(0, "--seed", help="Seed for model initialisation and data order.")
DATASET_OPTION = typer.Option("mnist5k", "--dataset", help="Dataset (see `splitlab datasets`).")
ARCH_OPTION = typer.Option("cnn", "--arch", help="Architecture (see `splitlab models`).")
CUT_OPTION = typer.Option(1, "--cut-layer", help="Cut layer: the client holds layers 0..cut.")
EPOCHS_OPTION = typer.Option(10, "--epochs", help="Training epochs.")
ITERATIONS_OPTION = typer.Option(None, "--iterations", help="Override the preset's iteration count (UnSplit rounds, "
                                 "FSHA protocol rounds, DLG/iDLG L-BFGS steps, Inverting Gradients, FedLeak, AWA and "
                                 "AGIC Adam steps, TGIAs-RO global rounds R_g).")
OVERWRITE_OPTION = typer.Option(False, "--overwrite", help="Empty a non-empty --out directory and write this run "
                                "there (without it, a non-empty --out is refused).")
LPIPS_OPTION = typer.Option(None, "--lpips-weights", help="AlexNet weights for LPIPS (default: the torch hub cache; "
                            "see `splitlab weights`).")
FID_OPTION = typer.Option(None, "--fid-weights", help="pt_inception weights for FID (default: the torch hub cache; "
                          "see `splitlab weights`).")
DEFENCE_OPTION = typer.Option("none", "--defence", help="Client defence spec: none, orthogonal[:seed=N], "
                              "semi-orthogonal:dim=D, patch-orthogonal[:patch=P], dp[:epsilon=E,delta=D,sensitivity=S] "
                              "(defaults 6, 0.5, estimated) or dp:sigma=S, "
                              "activation-noise:sigma=S, gradient-noise:sigma=S; join with +.")


@dataclass(frozen=True)
class RunOptions:
    """The options every command that writes a run shares, handed to the command as one value."""
    out: Optional[Path] = None
    overwrite: bool = False
    as_json: bool = False
    seed: int = 0
    device: str = "auto"
    data_root: Optional[Path] = None
    lpips_weights: Optional[Path] = None
    fid_weights: Optional[Path] = None

    @property
    def root(self) -> str | None:
        """The data root as the library takes it."""
        return str(self.data_root) if self.data_root else None


_RUN_OPTIONS = {  # name -> (type, typer option), in the order --help lists them
    "seed": (int, SEED_OPTION), "device": (str, DEVICE_OPTION), "data_root": (Optional[Path], DATA_ROOT_OPTION),
    "lpips_weights": (Optional[Path], LPIPS_OPTION), "fid_weights": (Optional[Path], FID_OPTION),
    "out": (Optional[Path], OUT_OPTION), "overwrite": (bool, OVERWRITE_OPTION), "as_json": (bool, JSON_OPTION),
}
RUN = ("seed", "device", "data_root", "out", "overwrite", "as_json")
"""The shared options of a command that writes a run; `RUN + METRIC_WEIGHTS` for one that scores images."""
METRIC_WEIGHTS = ("lpips_weights", "fid_weights")


def splice_parameters(fn: Callable, into: str, extra: list[inspect.Parameter],
                      collect: Callable[[dict[str, Any]], Any]) -> Callable:
    """`fn` as a typer command with its own parameters (annotations resolved), less `into`, followed by
    `extra`; the command hands the extra parameters' values to `fn` as `into=collect(values)`. One place
    that rewrites a command's signature for the shared decorators."""
    hints = typing.get_type_hints(fn)
    own = [p.replace(annotation=hints.get(p.name, p.annotation))
           for p in inspect.signature(fn).parameters.values() if p.name != into]
    names = [p.name for p in extra]

    @functools.wraps(fn)
    def command(*args, **kwargs):
        collected = collect({n: kwargs.pop(n) for n in names})
        return fn(*args, **{into: collected}, **kwargs)

    command.__signature__ = inspect.Signature(own + extra, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in own + extra}
    del command.__wrapped__                         # typer must read this signature, not fn's
    return command


def with_run_options(*names: str) -> Callable[[Callable], Callable]:
    """Give a command the shared options `names` (from `_RUN_OPTIONS`, listed after its own) and hand them
    to it as one `opts: RunOptions` argument: each shared option is declared once, here."""
    def decorate(fn: Callable) -> Callable:
        shared = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=_RUN_OPTIONS[n][1],
                                    annotation=_RUN_OPTIONS[n][0]) for n in names]
        return splice_parameters(fn, "opts", shared, lambda values: RunOptions(**values))
    return decorate


def handles_errors(fn: Callable) -> Callable:
    """Turn `SplitlabError` into a one-line message on stderr and exit code 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with closing_runs():
                return fn(*args, **kwargs)
        except SplitlabError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    return wrapper


def emit(record: dict[str, Any], as_json: bool, summary: Callable[[Console], None] | None = None) -> None:
    """Print the result: one JSON object with --json, else a human summary."""
    if as_json:
        sys.stdout.write(json.dumps(to_jsonable(record), allow_nan=False) + "\n")
        return
    console = Console(width=None if sys.stdout.isatty() else 160)
    if summary is not None:
        summary(console)
    else:
        console.print(dumps(record))


def table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> Table:
    out = Table(title=title)
    for column in columns:
        out.add_column(column)
    for row in rows:
        out.add_row(*[_cell(row.get(c)) for c in columns])
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return "x".join(map(str, value))
    return str(value)


@with_run_options(*RUN)
def train(
    dataset: str = DATASET_OPTION,
    arch: str = ARCH_OPTION,
    cut_layer: int = CUT_OPTION,
    epochs: int = EPOCHS_OPTION,
    batch_size: int = typer.Option(64, "--batch-size", help="Mini-batch size."),
    lr: float = typer.Option(1e-3, help="Learning rate of client and server."),
    optimizer: str = typer.Option("adam-amsgrad", help="sgd, momentum, adam or adam-amsgrad."),
    defence: str = DEFENCE_OPTION,
    parties: int = typer.Option(1, "--parties", help="Feature parties, each holding a vertical strip of every image "
                                "(K=2: left and right halves); the server joins their activations."),
    transport: str = typer.Option("local", "--transport", help="local (both sides in this process) or tcp (the "
                                  "server here, each party a `splitlab client` process on 127.0.0.1)."),
    role: str = typer.Option("honest", "--role", help="honest, or curious: the server also keeps every activation "
                             "it receives and writes them to transcript/."),
    opts: RunOptions = RunOptions(),
) -> None:
    """Train a split model with the explicit client/server protocol and save a checkpoint."""
    config = TrainConfig(dataset=dataset, arch=arch, cut_layer=cut_layer, epochs=epochs, batch_size=batch_size,
                         lr=lr, optimizer=optimizer, seed=opts.seed, device=opts.device, defence=defence,
                         data_root=opts.root, parties=parties)
    config.validate()
    lookup(dict.fromkeys(TRANSPORTS), transport, "transport")
    lookup(dict.fromkeys(("honest", "curious")), role, "server role")
    train_data, test_data = load_data(config)
    run = Run.create("train", {"train": config, "transport": transport, "role": role,
                               "device": str(resolve_device(opts.device)),
                               "dataset_provenance": train_data.provenance}, opts.out, overwrite=opts.overwrite)
    wire: dict[str, Any] = {}
    if transport == "tcp":
        from vfl.wire.launch import train_over_tcp          # torch.distributed only when asked for

        trained, wire = train_over_tcp(config, run, role, progress=not opts.as_json)
    else:
        trained = train_split(config, train_data, test_data, run, progress=not opts.as_json, role=role,
                              transcript_dir=run.path if role == "curious" else None)
    checkpoint, curves = save_trained(run, trained)
    metrics = {**training_metrics(trained), **wire}
    run.write_metrics(metrics)

    def summary(console) -> None:
        console.print(table(f"train {config.arch}, cut {config.cut_layer}, {config.dataset}", trained.history,
                            ["epoch", "loss", "train_accuracy", "test_accuracy"]))
        console.print(f"test accuracy {trained.accuracy:.4f} after {config.epochs} epochs in {trained.seconds:.1f} s; "
                      f"checkpoint {checkpoint}; curves {curves}")

    emit(run.record(metrics, checkpoint=str(checkpoint)), opts.as_json, summary)


def evaluate(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="A checkpoint.pt written by `splitlab train`."),
    device: str = DEVICE_OPTION,
    data_root: Optional[Path] = DATA_ROOT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Re-measure a checkpoint's test accuracy on its dataset (no run directory is written)."""
    trained = load_checkpoint(checkpoint, device, str(data_root) if data_root else None)
    test = load_data(trained.config)[1]
    accuracy = evaluate_split(trained.client, trained.server, test.images, test.labels, resolve_device(device))
    emit({"command": "evaluate", "checkpoint": str(checkpoint), "config": trained.config,
          "metrics": {"accuracy": accuracy}}, as_json,
         lambda c: c.print(f"{trained.config.arch} cut {trained.config.cut_layer} on {trained.config.dataset}: "
                           f"test accuracy {accuracy:.4f}"))


def models(as_json: bool = JSON_OPTION) -> None:
    """List every split architecture with its cut layers and client/server/total parameter counts,
    then the horizontal-FL models (whole model on every client)."""
    rows, hfl_rows = describe(), describe_hfl()

    def show(console) -> None:
        console.print(table("split-learning architectures and cut layers", rows,
                            ["arch", "cut_layer", "input", "activation", "client_params", "server_params",
                             "total_params"]))
        console.print(table("horizontal-FL models (1x28x28 input, 10 classes)", hfl_rows,
                            ["arch", "input", "total_params", "source"]))

    emit({"command": "models", "architectures": rows, "hfl_models": hfl_rows}, as_json, show)


def datasets_command(
    download: Optional[str] = typer.Option(None, "--download", help="Fetch this torchvision dataset into the data root."),
    data_root: Optional[Path] = DATA_ROOT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List each dataset, its source and whether it is available here."""
    if download:
        datasets.download(download, data_root)
    rows = []
    for name, spec in datasets.DATASETS.items():
        ok, reason = datasets.availability(name, data_root)
        rows.append({"dataset": name, "shape": list(spec.image_shape), "available": ok,
                     "source": spec.source, "status": "available" if ok else reason})
    emit({"command": "datasets", "data_root": str(data_root or datasets.default_data_root()), "datasets": rows},
         as_json, lambda c: c.print(table("datasets", rows, ["dataset", "shape", "available", "source"])))


def build_app() -> typer.Typer:
    """The `splitlab` app with the split-learning commands; upper layers add theirs with `register`."""
    app = typer.Typer(help="splitlab: attacks and defences for split (vertical) federated learning.",
                      no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    app.command("train")(handles_errors(train))
    app.command("evaluate")(handles_errors(evaluate))
    app.command("models")(handles_errors(models))
    app.command("datasets")(handles_errors(datasets_command))
    return app

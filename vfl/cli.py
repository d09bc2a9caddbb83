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
from vfl.cli_options import Output, command_from, parameters, values
from vfl.download import DEFAULT_TIMEOUT, TIMEOUT_HELP, check_timeout
from vfl.errors import SplitlabError
from vfl.options import Runtime
from vfl.models import describe, describe_hfl
from vfl.protocol import evaluate as evaluate_split
from vfl.runs import Run, closing_runs, dumps, to_jsonable
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, load_checkpoint, load_data, save_trained, train_split, training_metrics

@dataclass(frozen=True)
class RunOptions:
    """The options every command that writes a run shares (declared on `Runtime` and `Output`), handed to
    the command as one value."""
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


RUN = ("seed", "device", "data_root", "out", "overwrite", "as_json")
"""The shared options of a command that writes a run; `RUN + METRIC_WEIGHTS` for one that scores images."""
METRIC_WEIGHTS = ("lpips_weights", "fid_weights")
_PATHS = {"out", "data_root", "lpips_weights", "fid_weights"}


def shared_parameters(names: tuple[str, ...], panel: str | None = None) -> list[inspect.Parameter]:
    """The typer parameters of these shared options, in the order given, generated from their declarations."""
    generated = {p.name: p for cls in (Runtime, Output) for p in parameters(cls, panel=panel)}
    return [generated[n] for n in names]


def _run_options(values: dict[str, Any]) -> RunOptions:
    given = {k: (Path(v) if k in _PATHS else v) for k, v in values.items() if v is not None}
    return RunOptions(**given)


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
    """Give a command the shared options `names` (listed after its own) and hand them to it as one `opts:
    RunOptions` argument."""
    def decorate(fn: Callable) -> Callable:
        return splice_parameters(fn, "opts", shared_parameters(names), _run_options)
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


def _train(given: dict[str, Any]) -> None:
    opts = _run_options({k: given[k] for k in RUN if k in given})
    config = TrainConfig(**values(TrainConfig, given))
    train_data, test_data = load_data(config)
    run = Run.create("train", {"train": config, "device": str(resolve_device(config.device)),
                               "dataset_provenance": train_data.provenance}, opts.out, overwrite=opts.overwrite)
    trained = train_split(config, train_data, test_data, run, progress=not opts.as_json)
    checkpoint, curves = save_trained(run, trained)
    metrics = training_metrics(trained)
    run.write_metrics(metrics)

    def summary(console) -> None:
        console.print(table(f"train {config.arch}, cut {config.cut_layer}, {config.dataset}", trained.history,
                            ["epoch", "loss", "train_accuracy", "test_accuracy"]))
        console.print(f"test accuracy {trained.accuracy:.4f} after {config.epochs} epochs in {trained.seconds:.1f} s; "
                      f"checkpoint {checkpoint}; curves {curves}")

    emit(run.record(metrics, checkpoint=str(checkpoint)), opts.as_json, summary)


train = command_from(_train, [parameters(TrainConfig), shared_parameters(("out", "overwrite", "as_json"))], name="train",
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
    download: Optional[str] = typer.Option(None, "--download", help="Fetch this torchvision dataset's missing files "
                                           "into the data root (the only command that fetches data; $HTTPS_PROXY "
                                           "and $HTTP_PROXY are honoured)."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", metavar="SECONDS", help=TIMEOUT_HELP),
    opts: RunOptions = RunOptions(),
) -> None:
    """List each dataset, its source and whether it is available here."""
    data_root, as_json = opts.data_root, opts.as_json
    check_timeout(timeout)
    if download:
        datasets.download(download, data_root, timeout=timeout, progress=not as_json)
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

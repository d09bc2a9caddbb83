"""`splitlab sweep`: a grid of ordinary `splitlab` commands, run on Ray (or in process), resumable,
aggregated over seeds.

A sweep file (TOML) names one command, its fixed options, the axes to cross and optional zipped
axes; option names are the command's CLI options without the dashes, booleans are flags:

    command = "attack unsplit"
    description = "UnSplit on CNN and MLP clients over seeds"
    [fixed]
    preset = "quick"
    epochs = 1
    [axes]                      # crossed, first axis outermost
    arch = ["cnn", "mlp"]
    seed = [0, 1, 2]
    [zip]                       # advanced together (equal lengths), crossed with the axes
    cut-layer = [1, 2]
    lambda-tv = [1.0, 10.0]
    [paper.axes]                # --paper-size: a key named under [paper] replaces that key wherever it was
    dataset = ["mnist", "fashion-mnist"]
    [report]                    # optional: metrics in the report and the x axis of its figure
    metrics = ["image_mse_minmax", "accuracy"]
    x = "cut-layer"

A cell is the command with one value per axis. It runs in process through the typer app with
`--out CELL_DIR --json`, so its numbers are exactly the single command's. Its identity is a hash
of its resolved argument list; its directory `cells/<hash>-<name>` is finished once it holds
`metrics.json` and `cell.json` (written atomically, last). Re-running skips finished cells and
re-runs any other; results are recomputed from the cell files, so killing the sweep loses no
finished cell. Ray is imported only here, when cells run on it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import signal
import socket
import sys
import time
import tomllib
import traceback
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

from vfl.errors import SplitlabError
from vfl.runs import atomic_write_text, dumps, to_jsonable
from vfl.validate import check_int

Value = str | int | float | bool
TOP_KEYS = ("command", "description", "fixed", "axes", "zip", "paper", "report")
PAPER_KEYS = ("fixed", "axes", "zip")
REPORT_KEYS = ("metrics", "x")
RESERVED = {"out": "the sweep sets --out to the cell directory", "json": "the sweep always adds --json",
            "help": "not an experiment option"}
RAY_HINT = "ray is not installed; install it with: pip install 'ray>=2.9'"


# ---------------------------------------------------------------------------------------------- files

@dataclass(frozen=True)
class Cell:
    """One run of the command: every option resolved to one value."""

    command: tuple[str, ...]
    options: tuple[tuple[str, Value], ...]      # fixed and swept options, sorted by name
    swept: tuple[tuple[str, Value], ...]        # the swept options in axis order

    @property
    def key(self) -> str:
        pairs = [[name, _arg_text(value)] for name, value in self.options]
        blob = json.dumps({"command": list(self.command), "options": pairs}, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    @property
    def name(self) -> str:
        text = "_".join(f"{k}-{_arg_text(v)}" for k, v in self.swept) or "cell"
        return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text)[:80].strip("_")

    @property
    def dirname(self) -> str:
        return f"{self.key}-{self.name}"

    def args(self) -> list[str]:
        out: list[str] = []
        for name, value in self.options:
            if value is True:
                out.append(f"--{name}")
            elif value is not False:
                out += [f"--{name}", _arg_text(value)]
        return out

    def argv(self, cell_dir: Path) -> list[str]:
        return [*self.command, *self.args(), "--out", str(cell_dir), "--json"]


def _arg_text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


@dataclass
class Sweep:
    """A parsed sweep file at one size (CPU or paper)."""

    name: str
    source: str
    command: tuple[str, ...]
    description: str = ""
    fixed: dict[str, Value] = field(default_factory=dict)
    axes: dict[str, list[Value]] = field(default_factory=dict)
    zipped: dict[str, list[Value]] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    paper_size: bool = False
    has_paper: bool = False

    @property
    def swept_keys(self) -> list[str]:
        return [*self.axes, *self.zipped]

    def cells(self) -> list[Cell]:
        """Cross the axes (first outermost) and advance the zipped lists together (innermost)."""
        zip_len = len(next(iter(self.zipped.values()))) if self.zipped else 1
        zip_rows = [[(k, v[i]) for k, v in self.zipped.items()] for i in range(zip_len)]
        out = []
        for combo in itertools.product(*[[(k, v) for v in values] for k, values in self.axes.items()], zip_rows):
            swept = tuple(combo[:-1]) + tuple(combo[-1])
            options = tuple(sorted({**self.fixed, **dict(swept)}.items()))
            out.append(Cell(self.command, options, swept))
        return out

    def command_line(self) -> str:
        fixed = Cell(self.command, tuple(sorted(self.fixed.items())), ()).args()
        return " ".join(["splitlab", *self.command, *fixed])


def _fail(source: str, message: str) -> SplitlabError:
    return SplitlabError(f"{source}: {message}")


def _scalar(source: str, where: str, key: str, value: Any) -> Value:
    if not isinstance(value, (str, int, float, bool)):
        raise _fail(source, f"{where} {key} must be a string, number or boolean, got {value!r}")
    if isinstance(value, float) and value != value:
        raise _fail(source, f"{where} {key} is not a number")
    return value


def _option_name(source: str, where: str, key: str) -> str:
    if not isinstance(key, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", key):
        raise _fail(source, f"{where} key {key!r} must be a CLI option name without dashes, like cut-layer")
    if key in RESERVED:
        raise _fail(source, f"{where} key {key!r} is not allowed ({RESERVED[key]})")
    return key


def _table(source: str, where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise _fail(source, f"[{where}] must be a table")
    return value


def _lists(source: str, where: str, table: dict, distinct: bool = True) -> dict[str, list[Value]]:
    out = {}
    for key, values in _table(source, where, table).items():
        _option_name(source, f"[{where}]", key)
        if not isinstance(values, list):
            raise _fail(source, f"[{where}] {key} must be a list of values")
        if not values:
            raise _fail(source, f"[{where}] {key} is an empty list; give at least one value")
        values = [_scalar(source, f"[{where}]", key, v) for v in values]
        seen = set()
        for v in values if distinct else ():
            if (type(v), v) in seen:
                raise _fail(source, f"[{where}] {key} repeats the value {v!r}")
            seen.add((type(v), v))
        out[key] = values
    return out


def _fixed(source: str, where: str, table: dict) -> dict[str, Value]:
    return {_option_name(source, f"[{where}]", k): _scalar(source, f"[{where}]", k, v)
            for k, v in _table(source, where, table).items()}


def parse_sweep(text: str, name: str, source: str, paper_size: bool = False) -> Sweep:
    """Parse sweep-file text; every mistake is a one-line `SplitlabError` naming the file."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _fail(source, f"not valid TOML: {exc}") from None
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise _fail(source, f"unknown key {unknown[0]!r}; a sweep file has: {', '.join(TOP_KEYS)}")
    command = data.get("command")
    if not isinstance(command, str) or not command.split():
        raise _fail(source, "missing command (for example command = \"attack unsplit\")")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _fail(source, "description must be a string")
    fixed = _fixed(source, "fixed", data.get("fixed", {}))
    axes = _lists(source, "axes", data.get("axes", {}))
    zipped = _lists(source, "zip", data.get("zip", {}), distinct=False)
    paper = _table(source, "paper", data.get("paper", {}))
    bad = [k for k in paper if k not in PAPER_KEYS]
    if bad:
        raise _fail(source, f"unknown key {bad[0]!r} in [paper]; it has: {', '.join(PAPER_KEYS)}")
    paper_parts = (_fixed(source, "paper.fixed", paper.get("fixed", {})),
                   _lists(source, "paper.axes", paper.get("axes", {})),
                   _lists(source, "paper.zip", paper.get("zip", {}), distinct=False))
    if paper_size:
        for part in paper_parts:                     # a key named under [paper] replaces it wherever it was
            for key in part:
                for section in (fixed, axes, zipped):
                    section.pop(key, None)
        for section, part in zip((fixed, axes, zipped), paper_parts):
            section.update(part)
    for a, b, names in ((fixed, axes, "[fixed] and [axes]"), (fixed, zipped, "[fixed] and [zip]"),
                        (axes, zipped, "[axes] and [zip]")):
        both = [k for k in a if k in b]
        if both:
            raise _fail(source, f"{both[0]} is in both {names}; name each option once")
    lengths = {k: len(v) for k, v in zipped.items()}
    if len(set(lengths.values())) > 1:
        raise _fail(source, "[zip] lists must have equal lengths, got "
                    + ", ".join(f"{k} {n}" for k, n in lengths.items()))
    report = _table(source, "report", data.get("report", {}))
    bad = [k for k in report if k not in REPORT_KEYS]
    if bad:
        raise _fail(source, f"unknown key {bad[0]!r} in [report]; it has: {', '.join(REPORT_KEYS)}")
    if "metrics" in report and (not isinstance(report["metrics"], list)
                                or not all(isinstance(m, str) for m in report["metrics"])):
        raise _fail(source, "[report] metrics must be a list of metric names")
    if "x" in report and report["x"] not in [*axes, *zipped]:
        raise _fail(source, f"[report] x = {report['x']!r} is not a swept option")
    sweep = Sweep(name=name, source=source, command=tuple(command.split()), description=description,
                  fixed=fixed, axes=axes, zipped=zipped, report=report, paper_size=paper_size,
                  has_paper=any(paper_parts))
    keys = [c.key for c in sweep.cells()]
    if len(set(keys)) != len(keys):
        raise _fail(source, "two cells have the same options; make each axis value distinct")
    return sweep


def shipped() -> dict[str, str]:
    """The papers' grids shipped with the package: name -> TOML text."""
    folder = resources.files("splitlab") / "sweeps"
    return {p.name[:-5]: p.read_text() for p in sorted(folder.iterdir(), key=lambda p: p.name)
            if p.name.endswith(".toml")}


def load_sweep(path: Optional[Path] = None, paper: Optional[str] = None, paper_size: bool = False) -> Sweep:
    if (path is None) == (paper is None):
        raise SplitlabError("give a sweep FILE or --paper NAME (see `splitlab sweep --list`)")
    if paper is not None:
        files = shipped()
        if paper not in files:
            raise SplitlabError(f"unknown shipped sweep {paper!r}; choose one of: {', '.join(files)}")
        sweep = parse_sweep(files[paper], paper, f"{paper}.toml", paper_size)
    else:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SplitlabError(f"cannot read sweep file {path}: {exc.strerror or exc}") from None
        sweep = parse_sweep(text, Path(path).stem, str(path), paper_size)
    if paper_size and not sweep.has_paper:
        raise SplitlabError(f"{sweep.source} has no [paper] table; drop --paper-size")
    return sweep


def check_options(sweep: Sweep) -> None:
    """The command and every option name exist in the CLI, flags take booleans (exit 2 before running)."""
    import typer.main

    from splitlab.cli import app

    command: Any = typer.main.get_command(app)
    for i, word in enumerate(sweep.command):
        subs = getattr(command, "commands", None)
        if not subs or word not in subs:
            where = " ".join(sweep.command[:i]) or "splitlab"
            raise _fail(sweep.source, f"unknown command {' '.join(sweep.command)!r}; {where} has: "
                        f"{', '.join(sorted(subs or []))}")
        command = subs[word]
    if getattr(command, "commands", None):
        raise _fail(sweep.source, f"{' '.join(sweep.command)!r} is a group; name one of its commands: "
                    f"{', '.join(sorted(command.commands))}")
    params = {}
    for param in command.params:
        for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
            if opt.startswith("--"):
                params[opt[2:]] = param
    for key in [*sweep.fixed, *sweep.axes, *sweep.zipped]:
        if key not in params:
            choices = ", ".join(k for k in params if k not in RESERVED)
            raise _fail(sweep.source, f"`splitlab {' '.join(sweep.command)}` has no option --{key}; "
                        f"its options: {choices}")
        values = [sweep.fixed[key]] if key in sweep.fixed else (sweep.axes.get(key) or sweep.zipped[key])
        flag = bool(getattr(params[key], "is_flag", False))
        if flag != all(isinstance(v, bool) for v in values):
            raise _fail(sweep.source, f"--{key} " + ("is a flag: give true or false" if flag
                                                     else "takes a value, not true/false"))


# ---------------------------------------------------------------------------------------------- cells

def is_finished(cell_dir: Path) -> bool:
    """`metrics.json` and a `cell.json` saying ok (a failed cell is run again on resume)."""
    record = read_record(cell_dir)
    return (cell_dir / "metrics.json").is_file() and record is not None and record.get("status") == "ok"


def read_record(cell_dir: Path) -> Optional[dict]:
    try:
        return json.loads((cell_dir / "cell.json").read_text())
    except (OSError, ValueError):
        return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@contextlib.contextmanager
def _cell_lock(cell_dir: Path) -> Iterator[None]:
    """Held while a cell runs (`SWEEP_DIR/locks/<hash>.lock`): a Ray worker left running by a killed
    sweep finishes (or dies) before a new sweep may delete and re-run its cell."""
    path = cell_dir.parent.parent / "locks" / f"{cell_dir.name.split('-')[0]}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def run_cell(cell: Cell, cell_dir: Path, threads: Optional[int] = None,
             where: Optional[dict] = None) -> dict:
    """Run one cell in this process through the typer app; write `cell.json` last. Returns the record.

    `threads` sets torch's intra-op threads for the cell (restored after). KeyboardInterrupt passes.
    A cell found finished once its lock is held (by a worker of a killed sweep) is not run again.
    """
    with _cell_lock(cell_dir):
        if is_finished(cell_dir):
            return {**read_record(cell_dir), "finished_elsewhere": True}
        return _run_cell(cell, cell_dir, threads, where)


def _run_cell(cell: Cell, cell_dir: Path, threads: Optional[int], where: Optional[dict]) -> dict:
    import torch

    from splitlab.cli import app

    if cell_dir.exists():                                # an unfinished cell: start it again
        shutil.rmtree(cell_dir)
    cell_dir.mkdir(parents=True)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    out, err = io.StringIO(), io.StringIO()
    status, error = "ok", None
    started = time.time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = app(cell.argv(cell_dir), prog_name="splitlab", standalone_mode=False)
        code = 0 if code is None else code
        if code == 130:                                  # typer turned a Ctrl-C into exit code 130
            raise KeyboardInterrupt
        if code != 0:
            message = _last_line(err.getvalue())
            status, error = "failed", (message.removeprefix("error: ") if message else f"exit code {code}")
        elif not (cell_dir / "metrics.json").is_file():
            status, error = "failed", "the command wrote no metrics.json"
        elif json.loads((cell_dir / "metrics.json").read_text()).get("interrupted") is True:
            status, error = "failed", "interrupted"      # a command that caught the signal itself (FSHA)
    except KeyboardInterrupt:
        raise
    except Exception as exc:                             # noqa: BLE001 - a cell's failure is its record
        status = "failed"
        if hasattr(exc, "format_message"):               # a click usage error (bad option value)
            error = exc.format_message()
        else:
            error = _last_line("".join(traceback.format_exception_only(type(exc), exc)))
        err.write(traceback.format_exc())
    finally:
        torch.set_num_threads(before)
    record = {
        "cell": cell.key, "name": cell.name, "command": list(cell.command), "args": cell.args(),
        "swept": dict(cell.swept), "status": status, "error": error,
        "seconds": round(time.time() - started, 3), "torch_threads": threads or before,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "where": {"hostname": socket.gethostname(), "pid": os.getpid(), **(where or {})},
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    atomic_write_text(cell_dir / "output.log", out.getvalue() + err.getvalue())
    atomic_write_text(cell_dir / "cell.json", dumps(record) + "\n")   # last: marks the cell finished
    if error == "interrupted":
        raise KeyboardInterrupt
    return record


def _ray_task(cell: Cell, cell_dir: str, threads: int) -> dict:
    """A Ray task: run the cell on this worker and say where it ran."""
    import ray

    context = ray.get_runtime_context()
    where = {"executor": "ray", "node_id": context.get_node_id(), "worker_id": context.get_worker_id()}
    return run_cell(cell, Path(cell_dir), threads=threads, where=where)


# ------------------------------------------------------------------------------------------ executors

class Display:
    """Cells done / running / failed, elapsed and estimated remaining, on stderr (rich)."""

    def __init__(self, total: int, skipped: int, enabled: bool, after_cell=None):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.console = Console(file=sys.stderr)          # bound now: cells' own output is captured apart
        self.running = self.failed = self.done = self.elsewhere = 0
        self.total, self.enabled, self.after_cell = total, enabled, after_cell
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[state]}"), TimeElapsedColumn(),
                                 TextColumn("remaining"), TimeRemainingColumn(), console=self.console,
                                 redirect_stdout=False, redirect_stderr=False, disable=not enabled)
        self.task = self.progress.add_task(f"cells ({skipped} already finished)" if skipped else "cells",
                                           total=total, state=self._state())

    def _state(self) -> str:
        return f"running {self.running}, failed {self.failed}"

    def __enter__(self) -> "Display":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def started(self, cell: Cell) -> None:
        self.running += 1
        self.progress.update(self.task, state=self._state())

    def finished(self, record: dict) -> None:
        self.running -= 1
        self.done += 1
        self.failed += record["status"] != "ok"
        self.elsewhere += bool(record.get("finished_elsewhere"))
        self.progress.update(self.task, advance=1, state=self._state())
        if self.after_cell is not None:
            self.after_cell()
        if self.enabled:
            note = f"ok in {record['seconds']:.1f} s" if record["status"] == "ok" else f"FAILED: {record['error']}"
            self.progress.console.print(f"[{self.done}/{self.total}] {record['name']}: {note}", markup=False,
                                        highlight=False)


def run_local(pending: list[tuple[Cell, Path]], threads: Optional[int], display: Display) -> None:
    for cell, cell_dir in pending:
        display.started(cell)
        display.finished(run_cell(cell, cell_dir, threads=threads, where={"executor": "local"}))


def import_ray():
    try:
        import ray
    except ImportError:
        raise SplitlabError(RAY_HINT) from None
    return ray


@dataclass
class RayPlan:
    concurrency: int
    threads: int
    cpus: int
    nodes: list[str]
    inherited_threads: Optional[int] = None
    """OMP_NUM_THREADS the local instance's workers inherited at start (None: a joined cluster's)."""


def import_ray_for(address: Optional[str]):
    """Import ray (a one-line install hint if missing) with the environment it reads at import."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
            (Path.home() / ".ray" / "auth_token").is_file()
        if token and "RAY_AUTH_MODE" not in os.environ:  # as `ray start` does when a token is there
            os.environ["RAY_AUTH_MODE"] = "token"
    return import_ray()


def start_ray(ray, address: Optional[str], concurrency: Optional[int], threads: Optional[int]):
    """Start a local Ray instance (or join `address`); resolve concurrency and threads per task."""
    import logging

    common = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address:
        try:
            ray.init(address=address, **common)
        except Exception as exc:                         # noqa: BLE001 - cannot reach the cluster
            hint = ("; the cluster uses token authentication: give its token in RAY_AUTH_TOKEN or ~/.ray/auth_token"
                    if "auth" in str(exc).lower() else "")
            raise SplitlabError(f"cannot join the Ray cluster at {address}: "
                                f"{type(exc).__name__}{hint}") from None
        inherited = None
    else:
        local = os.cpu_count() or 1
        inherited = threads or max(1, local // (concurrency or local))
        # Workers inherit the driver's environment: with OMP_NUM_THREADS set here the tasks need no
        # runtime_env, and Ray's pre-started workers serve them instead of new ones (~1.4 s saved).
        previous = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(inherited)
        try:
            ray.init(num_cpus=local, include_dashboard=False, **common)
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS")
            else:
                os.environ["OMP_NUM_THREADS"] = previous
    alive = [n for n in ray.nodes() if n.get("Alive")]
    cpus = int(sum(n.get("Resources", {}).get("CPU", 0) for n in alive)) or 1
    node_max = int(max((n.get("Resources", {}).get("CPU", 0) for n in alive), default=1)) or 1
    concurrency = concurrency or cpus
    threads = threads or max(1, cpus // concurrency)
    if threads > node_max:
        ray.shutdown()
        raise SplitlabError(f"--threads {threads} is more than the largest Ray node's {node_max} CPUs")
    return RayPlan(concurrency, threads, cpus, [n["NodeID"] for n in alive], inherited)


def run_ray(ray, plan: RayPlan, pending: list[tuple[Cell, Path]], display: Display) -> None:
    """At most `plan.concurrency` cells in flight, each a Ray task with `plan.threads` CPUs and threads."""
    env = {} if plan.inherited_threads == plan.threads else \
        {"runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(plan.threads)}}}
    task = ray.remote(_ray_task).options(num_cpus=plan.threads, max_retries=0, **env)
    queue, inflight = list(pending), {}
    try:
        while queue or inflight:
            while queue and len(inflight) < plan.concurrency:
                cell, cell_dir = queue.pop(0)
                inflight[task.remote(cell, str(cell_dir), plan.threads)] = (cell, cell_dir)
                display.started(cell)
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                cell, cell_dir = inflight.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as exc:                 # noqa: BLE001 - the worker died (OOM, node lost)
                    record = _lost(cell, cell_dir, _last_line(str(exc)) or type(exc).__name__)
                display.finished(record)
    except BaseException:
        for ref in inflight:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise


def _lost(cell: Cell, cell_dir: Path, error: str) -> dict:
    """Record a cell whose Ray task died without writing its own record."""
    record = {"cell": cell.key, "name": cell.name, "command": list(cell.command), "args": cell.args(),
              "swept": dict(cell.swept), "status": "failed", "error": f"ray task lost: {error}",
              "seconds": None, "torch_threads": None, "where": {"executor": "ray"},
              "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "metrics.json").unlink(missing_ok=True)
    atomic_write_text(cell_dir / "cell.json", dumps(record) + "\n")
    return record


# ------------------------------------------------------------------------------------------------ CLI

class _Stop(KeyboardInterrupt):
    """SIGTERM arrived: stop like Ctrl-C (a KeyboardInterrupt, so a cell's own code lets it through)."""


def _on_sigterm(signum, frame):
    raise _Stop()


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """`kill PID` stops the sweep like Ctrl-C (installed again after ray.init, which sets its own)."""
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _locked(sweep_dir: Path) -> Iterator[None]:
    """One sweep process per directory at a time (the lock dies with the process, even on kill -9)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SplitlabError(f"another sweep is running into {sweep_dir}; wait for it or use another --out") from None
        yield


def _list_rows() -> list[dict]:
    rows = []
    for name, text in shipped().items():
        cpu = parse_sweep(text, name, f"{name}.toml")
        paper = parse_sweep(text, name, f"{name}.toml", paper_size=True) if cpu.has_paper else cpu
        rows.append({"name": name, "command": " ".join(cpu.command), "cells": len(cpu.cells()),
                     "paper_cells": len(paper.cells()), "description": cpu.description})
    return rows


def sweep_command(
    file: Optional[Path] = typer.Argument(None, help="A sweep file (TOML); or --paper NAME."),
    paper: Optional[str] = typer.Option(None, "--paper", help="Run a shipped grid by name (see --list)."),
    list_: bool = typer.Option(False, "--list", help="List the shipped grids and exit."),
    paper_size: bool = typer.Option(False, "--paper-size", help="Use the file's paper-sized axes (its "
                                    "paper table: the paper's datasets, seeds and settings; for a GPU)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the cells (and which are finished); run and "
                                 "write nothing."),
    executor: str = typer.Option("ray", "--executor", help="ray (cells as Ray tasks) or local (in this "
                                 "process, one after another)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Ray tasks at once (default: the "
                                              "Ray instance's CPUs)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Torch threads per cell (default with Ray: "
                                          "max(1, CPUs // concurrency); local: torch's default)."),
    address: Optional[str] = typer.Option(None, "--address", help="Join this Ray cluster (HOST:PORT) instead "
                                          "of starting a local instance."),
    out: Optional[Path] = typer.Option(None, "--out", help="Sweep directory (default runs/sweep/<name>); "
                                       "the same --out resumes."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the live progress display."),
    as_json: bool = typer.Option(False, "--json", help="Print the sweep's record as one JSON object."),
) -> None:
    """Run a grid of `splitlab` commands (a sweep file or a shipped paper grid) on Ray or in process;
    resumable; writes results.csv, summary.csv (mean, std, n over seeds) and report.md."""
    from vfl.cli import emit, table

    if list_:
        rows = _list_rows()
        emit({"command": "sweep --list", "sweeps": rows}, as_json, lambda c: c.print(table(
            "shipped sweeps (splitlab sweep --paper NAME [--paper-size])", rows,
            ["name", "command", "cells", "paper_cells", "description"])))
        return
    if executor not in ("ray", "local"):
        raise SplitlabError(f"unknown executor {executor!r}; choose one of: ray, local")
    if concurrency is not None:
        concurrency = check_int("--concurrency", concurrency, low=1, high=100_000)
    if threads is not None:
        threads = check_int("--threads", threads, low=1, high=4096)
    if executor == "local" and (concurrency is not None or address is not None):
        raise SplitlabError("--concurrency and --address need --executor ray")
    sweep = load_sweep(file, paper, paper_size)
    check_options(sweep)
    cells = sweep.cells()
    sweep_dir = Path(out) if out is not None else Path("runs") / "sweep" / (sweep.name + ("-paper" if paper_size else ""))
    dirs = [sweep_dir / "cells" / c.dirname for c in cells]
    finished = [is_finished(d) for d in dirs]

    if dry_run:
        rows = [{"#": i + 1, "cell": c.key, **{k: _arg_text(v) for k, v in c.swept},
                 "state": "finished" if f else "to run", "dir": str(d)} for i, (c, d, f) in
                enumerate(zip(cells, dirs, finished))]
        emit({"command": "sweep", "dry_run": True, "sweep": sweep.name, "sweep_dir": str(sweep_dir),
              "command_line": sweep.command_line(), "cells": rows}, as_json, lambda c: (
            c.print(table(f"{sweep.name}: {len(cells)} cells, {sum(finished)} finished", rows,
                          ["#", "cell", *sweep.swept_keys, "state"])),
            c.print(f"each cell: {sweep.command_line()} " + " ".join(f"--{k} ..." for k in sweep.swept_keys),
                    markup=False, highlight=False),
            c.print(f"sweep directory {sweep_dir} (nothing written)", markup=False, highlight=False)))
        return

    from splitlab.sweep_report import aggregate, write_results

    pending = [(c, d) for c, d, f in zip(cells, dirs, finished) if not f]
    ray = import_ray_for(address) if executor == "ray" and pending else None
    interrupted = False
    plan = display = None
    with _locked(sweep_dir), _sigterm_stops():
        atomic_write_text(sweep_dir / "sweep.toml", _source_text(file, paper))
        started = time.time()
        try:
            if ray is not None:
                plan = start_ray(ray, address, concurrency, threads)
                signal.signal(signal.SIGTERM, _on_sigterm)
            meta = {"sweep": sweep.name, "source": sweep.source, "paper_size": paper_size,
                    "command_line": sweep.command_line(), "executor": executor, "address": address,
                    "concurrency": plan.concurrency if plan else 1,
                    "torch_threads": plan.threads if plan else threads, "ray_nodes": plan.nodes if plan else None,
                    "cells": len(cells), "already_finished": sum(finished)}
            atomic_write_text(sweep_dir / "sweep.json", dumps(meta) + "\n")
            display = Display(len(pending), sum(finished), enabled=progress,
                              after_cell=lambda: write_results(sweep, cells, sweep_dir))
            with display:
                if plan is not None:
                    run_ray(ray, plan, pending, display)
                else:
                    run_local(pending, threads, display)
        except KeyboardInterrupt:                        # Ctrl-C or kill (SIGTERM)
            interrupted = True
        finally:
            if ray is not None and ray.is_initialized():
                with contextlib.suppress(Exception):
                    ray.shutdown()
        summary = aggregate(sweep, cells, sweep_dir)
    seconds = time.time() - started
    counts = summary["counts"]
    ran = display.done - display.elsewhere if display is not None else 0
    record = {"command": "sweep", "sweep": sweep.name, "sweep_dir": str(sweep_dir), "cells": len(cells),
              "ran": ran, "skipped": sum(finished), **counts,
              "seconds": round(seconds, 1), "interrupted": interrupted,
              "failures": summary["failures"], "report": str(sweep_dir / "report.md")}

    def show(c) -> None:
        for line in summary["lines"]:
            c.print(line, markup=False, highlight=False)
        c.print(f"{len(cells)} cells: {counts['ok']} ok, {counts['failed']} failed, {counts['pending']} not run; "
                f"ran {ran}, {sum(finished)} were already finished; {seconds:.1f} s; {sweep_dir / 'report.md'}",
                markup=False, highlight=False)

    emit(to_jsonable(record), as_json, show)
    if interrupted:
        typer.echo("interrupted: finished cells are kept; run the same command again to resume", err=True)
        raise typer.Exit(130)
    if counts["ok"] != len(cells):
        raise typer.Exit(1)


def _source_text(file: Optional[Path], paper: Optional[str]) -> str:
    return shipped()[paper] if paper is not None else Path(file).read_text()


def register(app: typer.Typer) -> None:
    """Add `splitlab sweep` to the app."""
    from vfl.cli import handles_errors

    app.command("sweep")(handles_errors(sweep_command))

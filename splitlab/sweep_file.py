"""A sweep file and its grid of cells.

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
    curves = ["trajectory.psnr"]  # lists of numbers kept in results.csv, one column per entry (KEY.1, KEY.2, ...)

A cell is the command with one value per axis; its identity is a hash of its resolved arguments.
A grid may have at most `MAX_CELLS` cells (and its file `MAX_FILE_BYTES`): the size is computed from
the list lengths, before any cell is built, so a mistyped grid of millions of cells is refused at once.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from vfl.errors import SplitlabError
from vfl.files import read_bounded

Value = str | int | float | bool
TOP_KEYS = ("command", "description", "fixed", "axes", "zip", "paper", "report")
PAPER_KEYS = ("fixed", "axes", "zip", "estimate")
ESTIMATE_KEYS = ("gpu_hours", "basis")
REPORT_KEYS = ("metrics", "x", "curves")
RESERVED = {"out": "the sweep sets --out to the cell directory", "json": "the sweep always adds --json",
            "help": "not an experiment option"}
MAX_CELLS = 2_000
"""The most cells one sweep may have: every cell's argv is parsed before anything runs (about 1 ms
each), the dry run lists them all, and the report reads every cell directory after each cell."""
MAX_FILE_BYTES = 1_000_000
"""A sweep file is a few kilobytes; a larger one is refused before the (slow) TOML parse."""


@dataclass(frozen=True)
class Cell:
    """One run of the command: every option resolved to one value."""

    command: tuple[str, ...]
    options: tuple[tuple[str, Value], ...]      # fixed and swept options, sorted by name
    swept: tuple[tuple[str, Value], ...]        # the swept options in axis order

    @property
    def key(self) -> str:
        pairs = [[name, arg_text(value)] for name, value in self.options]
        blob = json.dumps({"command": list(self.command), "options": pairs}, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    @property
    def name(self) -> str:
        text = "_".join(f"{k}-{arg_text(v)}" for k, v in self.swept) or "cell"
        return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text)[:80].strip("_")

    @property
    def dirname(self) -> str:
        return f"{self.key}-{self.name}"

    def args(self) -> list[str]:
        """The options as CLI arguments; a flag is given when true and left out when false."""
        out: list[str] = []
        for name, value in self.options:
            if value is True:
                out.append(f"--{name}")
            elif value is not False:
                out += [f"--{name}", arg_text(value)]
        return out

    def argv(self, cell_dir: Path) -> list[str]:
        return [*self.command, *self.args(), "--out", str(cell_dir), "--json"]

    def has(self, where: dict[str, set[str]]) -> bool:
        """Whether every key's swept value is one of the given texts (`arg_text` form; numbers by value)."""
        swept = dict(self.swept)
        return all(key in swept and any(same_text(swept[key], text) for text in texts)
                   for key, texts in where.items())


def same_text(value: Value, text: str) -> bool:
    """A swept value against a user's text: equal as text, or as numbers (`1e-3` is `0.001`)."""
    text = text.strip()
    if isinstance(value, bool):
        return arg_text(value) == text.lower()
    if arg_text(value) == text:
        return True
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(text), float(value), rel_tol=1e-12, abs_tol=0.0)
        except ValueError:
            return False
    return False


def parse_where(sweep: "Sweep", pairs: list[str]) -> dict[str, set[str]]:
    """`--where KEY=V1,V2` as key -> accepted texts (a key given twice accepts the values of both; different keys
    must all hold), checked against the sweep: an unknown key, or a value no cell has, is a one-line error."""
    where: dict[str, set[str]] = {}
    cells = sweep.cells()
    for pair in pairs:
        key, sep, values = pair.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key or not values.strip():
            raise SplitlabError(f"--where {pair!r}: write KEY=VALUE or KEY=V1,V2 (a swept option of the sweep)")
        if key not in sweep.swept_keys:
            raise SplitlabError(f"--where {key}: not swept by {sweep.name}; swept: {', '.join(sweep.swept_keys)}")
        whole = any(c.has({key: {values}}) for c in cells)       # a value with commas of its own (a defence)
        texts = {values.strip()} if whole else {v.strip() for v in values.split(",") if v.strip()}
        for text in texts:
            if not any(c.has({key: {text}}) for c in cells):
                raise SplitlabError(f"--where {key}={text}: no cell of {sweep.name} has it")
        where.setdefault(key, set()).update(texts)
    return where


def arg_text(value: Value) -> str:
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
    estimate: dict[str, Any] = field(default_factory=dict)
    """The paper-size grid's time on a GPU as the file estimates it: gpu_hours (None: no GPU path) and its basis."""
    text: str = field(default="", repr=False)   # the file as read (kept in the sweep directory)

    @property
    def swept_keys(self) -> list[str]:
        return [*self.axes, *self.zipped]

    @property
    def _zip_len(self) -> int:
        return len(next(iter(self.zipped.values()))) if self.zipped else 1

    @property
    def size(self) -> int:
        """The number of cells, from the list lengths alone."""
        return math.prod(len(values) for values in self.axes.values()) * self._zip_len

    def cells(self) -> list[Cell]:
        """Cross the axes (first outermost) and advance the zipped lists together (innermost)."""
        zip_rows = [[(k, v[i]) for k, v in self.zipped.items()] for i in range(self._zip_len)]
        out = []
        for combo in itertools.product(*[[(k, v) for v in values] for k, values in self.axes.items()], zip_rows):
            swept = tuple(combo[:-1]) + tuple(combo[-1])
            options = tuple(sorted({**self.fixed, **dict(swept)}.items()))
            out.append(Cell(self.command, options, swept))
        return out

    def command_line(self) -> str:
        fixed = Cell(self.command, tuple(sorted(self.fixed.items())), ()).args()
        return " ".join(["splitlab", *self.command, *fixed])


def file_error(source: str, message: str) -> SplitlabError:
    """A mistake in the sweep file: one line naming the file."""
    return SplitlabError(f"{source}: {message}")


def _scalar(source: str, where: str, key: str, value: Any) -> Value:
    if not isinstance(value, (str, int, float, bool)):
        raise file_error(source, f"{where} {key} must be a string, number or boolean, got {value!r}")
    if isinstance(value, float) and value != value:
        raise file_error(source, f"{where} {key} is not a number")
    return value


def _option_name(source: str, where: str, key: str) -> str:
    if not isinstance(key, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", key):
        raise file_error(source, f"{where} key {key!r} must be a CLI option name without dashes, like cut-layer")
    if key in RESERVED:
        raise file_error(source, f"{where} key {key!r} is not allowed ({RESERVED[key]})")
    return key


def _table(source: str, where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise file_error(source, f"[{where}] must be a table")
    return value


def _lists(source: str, where: str, table: dict, distinct: bool = True) -> dict[str, list[Value]]:
    out = {}
    for key, values in _table(source, where, table).items():
        _option_name(source, f"[{where}]", key)
        if not isinstance(values, list):
            raise file_error(source, f"[{where}] {key} must be a list of values")
        if not values:
            raise file_error(source, f"[{where}] {key} is an empty list; give at least one value")
        values = [_scalar(source, f"[{where}]", key, v) for v in values]
        seen = set()
        for v in values if distinct else ():
            if (type(v), v) in seen:
                raise file_error(source, f"[{where}] {key} repeats the value {v!r}")
            seen.add((type(v), v))
        out[key] = values
    return out


def _fixed(source: str, where: str, table: dict) -> dict[str, Value]:
    return {_option_name(source, f"[{where}]", k): _scalar(source, f"[{where}]", k, v)
            for k, v in _table(source, where, table).items()}


def _estimate(source: str, table: Any) -> dict[str, Any]:
    """[paper.estimate]: gpu_hours (a number >= 0, or absent when the command has no GPU path) and its basis."""
    table = _table(source, "paper.estimate", table)
    bad = [k for k in table if k not in ESTIMATE_KEYS]
    if bad:
        raise file_error(source, f"unknown key {bad[0]!r} in [paper.estimate]; it has: {', '.join(ESTIMATE_KEYS)}")
    if not table:
        return {}
    hours = table.get("gpu_hours")
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float)) or not 0 <= hours < 1e6):
        raise file_error(source, "[paper.estimate] gpu_hours must be a number of hours >= 0")
    if not isinstance(table.get("basis"), str) or not table["basis"].strip():
        raise file_error(source, "[paper.estimate] needs a basis: where the time comes from")
    return {"gpu_hours": hours, "basis": table["basis"].strip()}


def parse_sweep(text: str, name: str, source: str, paper_size: bool = False) -> Sweep:
    """Parse sweep-file text; every mistake is a one-line `SplitlabError` naming the file."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise file_error(source, f"not valid TOML: {exc}") from None
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise file_error(source, f"unknown key {unknown[0]!r}; a sweep file has: {', '.join(TOP_KEYS)}")
    command = data.get("command")
    if not isinstance(command, str) or not command.split():
        raise file_error(source, "missing command (for example command = \"attack unsplit\")")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise file_error(source, "description must be a string")
    fixed = _fixed(source, "fixed", data.get("fixed", {}))
    axes = _lists(source, "axes", data.get("axes", {}))
    zipped = _lists(source, "zip", data.get("zip", {}), distinct=False)
    paper = _table(source, "paper", data.get("paper", {}))
    bad = [k for k in paper if k not in PAPER_KEYS]
    if bad:
        raise file_error(source, f"unknown key {bad[0]!r} in [paper]; it has: {', '.join(PAPER_KEYS)}")
    estimate = _estimate(source, paper.get("estimate", {}))
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
            raise file_error(source, f"{both[0]} is in both {names}; name each option once")
    lengths = {k: len(v) for k, v in zipped.items()}
    if len(set(lengths.values())) > 1:
        raise file_error(source, "[zip] lists must have equal lengths, got "
                    + ", ".join(f"{k} {n}" for k, n in lengths.items()))
    report = _table(source, "report", data.get("report", {}))
    bad = [k for k in report if k not in REPORT_KEYS]
    if bad:
        raise file_error(source, f"unknown key {bad[0]!r} in [report]; it has: {', '.join(REPORT_KEYS)}")
    if "metrics" in report and (not isinstance(report["metrics"], list)
                                or not all(isinstance(m, str) for m in report["metrics"])):
        raise file_error(source, "[report] metrics must be a list of metric names")
    if "curves" in report and (not isinstance(report["curves"], list)
                               or not all(isinstance(m, str) for m in report["curves"])):
        raise file_error(source, "[report] curves must be a list of metric names (lists in metrics.json)")
    if "x" in report and report["x"] not in [*axes, *zipped]:
        raise file_error(source, f"[report] x = {report['x']!r} is not a swept option")
    sweep = Sweep(name=name, source=source, command=tuple(command.split()), description=description,
                  fixed=fixed, axes=axes, zipped=zipped, report=report, paper_size=paper_size,
                  has_paper=any(paper_parts), estimate=estimate, text=text)
    if sweep.size > MAX_CELLS:
        raise file_error(source, f"the grid has {sweep.size:,} cells, over the bound of {MAX_CELLS:,} cells per "
                    "sweep; split it into smaller sweeps (each its own --out)")
    keys = [c.key for c in sweep.cells()]
    if len(set(keys)) != len(keys):
        raise file_error(source, "two cells have the same options; make each axis value distinct")
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
        data = read_bounded(path, limit=MAX_FILE_BYTES, what="sweep file")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SplitlabError(f"cannot read sweep file {path}: not UTF-8 text") from None
        sweep = parse_sweep(text, Path(path).stem, str(path), paper_size)
    if paper_size and not sweep.has_paper:
        raise SplitlabError(f"{sweep.source} has no [paper] table; drop --paper-size")
    return sweep

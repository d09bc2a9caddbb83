"""A cell on disk and running one.

A cell runs in process through the typer app with `--out CELL_DIR --json`, so its numbers are
exactly the single command's. Its directory `cells/<hash>-<name>` is finished once it holds
`metrics.json` and a `cell.json` saying ok (written atomically, last). A failed or half-written
cell is run again on resume; a lock per cell keeps a Ray worker left running by a killed sweep
and a new sweep from running the same cell at once.
"""
from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import socket
import time
import traceback
from pathlib import Path
from typing import Iterator, Optional

from splitlab.sweep_file import Cell
from vfl.errors import SplitlabError
from vfl.files import read_bounded
from vfl.runs import RECORD_BYTES, atomic_write_text, dumps


def is_finished(cell_dir: Path) -> bool:
    """`metrics.json` and a `cell.json` saying ok (a failed cell is run again on resume)."""
    record = read_record(cell_dir)
    return (cell_dir / "metrics.json").is_file() and record is not None and record.get("status") == "ok"


def read_record(cell_dir: Path) -> Optional[dict]:
    try:
        return json.loads(read_bounded(cell_dir / "cell.json", limit=RECORD_BYTES, what="cell record"))
    except (SplitlabError, ValueError):
        return None


def last_line(text: str) -> str:
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
            message = last_line(err.getvalue())
            status, error = "failed", (message.removeprefix("error: ") if message else f"exit code {code}")
        elif not (cell_dir / "metrics.json").is_file():
            status, error = "failed", "the command wrote no metrics.json"
        elif json.loads(read_bounded(cell_dir / "metrics.json", limit=RECORD_BYTES,
                                     what="cell metrics")).get("interrupted") is True:
            status, error = "failed", "interrupted"      # a command that caught the signal itself (FSHA)
    except KeyboardInterrupt:
        raise
    except Exception as exc:                             # noqa: BLE001 - a cell's failure is its record
        status = "failed"
        if hasattr(exc, "format_message"):               # a click usage error (bad option value)
            error = exc.format_message()
        else:
            error = last_line("".join(traceback.format_exception_only(type(exc), exc)))
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


def lost_record(cell: Cell, cell_dir: Path, error: str) -> dict:
    """Record a cell whose Ray task died without writing its own record."""
    record = {"cell": cell.key, "name": cell.name, "command": list(cell.command), "args": cell.args(),
              "swept": dict(cell.swept), "status": "failed", "error": f"ray task lost: {error}",
              "seconds": None, "torch_threads": None, "where": {"executor": "ray"},
              "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "metrics.json").unlink(missing_ok=True)
    atomic_write_text(cell_dir / "cell.json", dumps(record) + "\n")
    return record


def run_local(pending: list[tuple[Cell, Path]], threads: Optional[int], display) -> None:
    """The local executor: the cells one after another in this process."""
    for cell, cell_dir in pending:
        display.started(cell)
        display.finished(run_cell(cell, cell_dir, threads=threads, where={"executor": "local"}))

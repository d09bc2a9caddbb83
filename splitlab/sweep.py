"""`splitlab sweep`: a grid of ordinary `splitlab` commands, run on Ray (or in process), resumable,
aggregated over seeds.

The command only orders the steps; each concern has its module:

    sweep_file      the sweep file (TOML), its grid of cells and the bound on their number
    sweep_validate  every cell's argv through its command's own parser; the sweep directory
    sweep_cells     a cell's directory, its lock, running one cell; the local executor
    sweep_ray       the Ray executor: a private local instance or a bounded join of a cluster
    sweep_display   the live progress display
    sweep_report    results.csv, summary.csv and report.md, recomputed from the cell files

Everything that can be refused is refused before anything is written (exit 2, one line): the
file, every cell, the sweep directory, Ray's start or join. Re-running skips finished cells and
re-runs any other; results are recomputed from the cell files, so killing the sweep loses no
finished cell.
"""
from __future__ import annotations

import contextlib
import fcntl
import signal
import time
from pathlib import Path
from typing import Iterator, Optional

import typer

from splitlab.sweep_cells import is_finished, run_local
from splitlab.sweep_display import Display
from splitlab.sweep_file import MAX_CELLS, arg_text, load_sweep, parse_sweep, parse_where, shipped
from splitlab.sweep_ray import CONNECT_TIMEOUT_S, JOIN_TIMEOUT_S, RayPlan, parse_address, run_ray, start_ray, \
    stop_ray
from splitlab.sweep_report import aggregate, write_results
from splitlab.sweep_validate import check_cells, check_sweep_dir
from vfl.errors import SplitlabError
from vfl.runs import atomic_write_text, dumps, to_jsonable
from vfl.validate import check_int


class _Stop(KeyboardInterrupt):
    """SIGTERM arrived: stop like Ctrl-C (a KeyboardInterrupt, so a cell's own code lets it through)."""


def _on_sigterm(signum, frame):
    raise _Stop()


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """`kill PID` stops the sweep like Ctrl-C (installed again after ray.init, which sets its own)."""
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def locked(sweep_dir: Path) -> Iterator[None]:
    """One sweep process per directory at a time (the lock dies with the process, even on kill -9)."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        fh = open(sweep_dir / ".lock", "w")
    except OSError as exc:
        raise SplitlabError(f"cannot write the sweep directory {sweep_dir}: {exc.strerror or exc}") from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SplitlabError(f"another sweep is running into {sweep_dir}; wait for it or use another "
                                "--out") from None
        yield


def _list_rows() -> list[dict]:
    rows = []
    for name, text in shipped().items():
        cpu = parse_sweep(text, name, f"{name}.toml")
        paper = parse_sweep(text, name, f"{name}.toml", paper_size=True) if cpu.has_paper else cpu
        hours = cpu.estimate.get("gpu_hours")
        rows.append({"name": name, "command": " ".join(cpu.command), "cells": cpu.size,
                     "paper_cells": paper.size, "paper_gpu_hours": "-" if hours is None else f"~{hours:g}",
                     "description": cpu.description})
    return rows


def start_ray_plan(address: Optional[str], concurrency: Optional[int], threads: Optional[int]) -> RayPlan:
    """Ray starts (or joins) before the sweep directory is touched, so a failure writes nothing."""
    try:
        plan = start_ray(address, concurrency, threads)
    except KeyboardInterrupt:
        typer.echo("interrupted while Ray started; nothing was written", err=True)
        raise typer.Exit(130) from None
    signal.signal(signal.SIGTERM, _on_sigterm)           # ray.init installed its own handler
    return plan


def run_cells(plan: Optional[RayPlan], pending: list, threads: Optional[int], display: Display) -> bool:
    """Run the pending cells on Ray or in process; True if Ctrl-C or SIGTERM stopped them."""
    try:
        with display:
            if plan is not None:
                run_ray(plan, pending, display)
            else:
                run_local(pending, threads, display)
        return False
    except KeyboardInterrupt:
        return True
    finally:
        stop_ray()                                       # before the report: no worker still writes a cell


def sweep_command(
    file: Optional[Path] = typer.Argument(None, help=f"A sweep file (TOML; at most {MAX_CELLS:,} cells); or "
                                          "--paper NAME."),
    paper: Optional[str] = typer.Option(None, "--paper", help="Run a shipped grid by name (see --list)."),
    list_: bool = typer.Option(False, "--list", help="List the shipped grids and exit."),
    paper_size: bool = typer.Option(False, "--paper-size", help="Use the file's paper-sized axes (its "
                                    "paper table: the paper's datasets, seeds and settings; for a GPU)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check and list the cells (and which are finished); "
                                 "run and write nothing."),
    executor: str = typer.Option("ray", "--executor", help="ray (cells as Ray tasks on a private local Ray "
                                 "instance, or the cluster of --address) or local (in this process, one after "
                                 "another)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Ray tasks at once (default: the "
                                              "Ray instance's CPUs)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Torch threads per cell (default with Ray: "
                                          "max(1, CPUs // concurrency); local: torch's default)."),
    address: Optional[str] = typer.Option(None, "--address", help=f"Join this Ray cluster (the head's "
                                          f"HOST:PORT) instead of starting a private local instance. The head "
                                          f"must answer within {CONNECT_TIMEOUT_S:g} s and the join finish "
                                          f"within {JOIN_TIMEOUT_S:g} s, else exit 2 with nothing written."),
    where: list[str] = typer.Option([], "--where", help="Run only the cells with these swept values: "
                                    "KEY=V1,V2 (repeatable: a key given twice takes the values of both, different "
                                    "keys must all hold). The same --out without it runs the rest."),
    out: Optional[Path] = typer.Option(None, "--out", help="Sweep directory (default runs/sweep/<name>); "
                                       "the same --out resumes."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the live progress display."),
    as_json: bool = typer.Option(False, "--json", help="Print the sweep's record as one JSON object."),
) -> None:
    """Run a grid of `splitlab` commands (a sweep file or a shipped paper grid) on Ray or in process;
    resumable; writes results.csv, summary.csv (mean, std, n over seeds) and report.md."""
    from vfl.cli_output import emit, table

    if list_:
        given = [flag for flag, value in (("FILE", file), ("--paper", paper), ("--paper-size", paper_size),
                                          ("--dry-run", dry_run), ("--where", where), ("--out", out),
                                          ("--concurrency", concurrency), ("--threads", threads),
                                          ("--address", address), ("--executor", executor != "ray")) if value]
        if given:
            raise SplitlabError(f"--list lists the shipped grids and runs nothing, so {given[0]} does not apply; "
                                "drop one or the other")
        rows = _list_rows()
        emit({"command": "sweep --list", "sweeps": rows}, as_json, lambda c: c.print(table(
            "shipped sweeps (splitlab sweep --paper NAME [--paper-size])", rows,
            ["name", "command", "cells", "paper_cells", "paper_gpu_hours", "description"])))
        return
    if executor not in ("ray", "local"):
        raise SplitlabError(f"unknown executor {executor!r}; choose one of: ray, local")
    if concurrency is not None:
        concurrency = check_int("--concurrency", concurrency, low=1, high=100_000)
    if threads is not None:
        threads = check_int("--threads", threads, low=1, high=4096)
    if executor == "local" and (concurrency is not None or address is not None):
        raise SplitlabError("--concurrency and --address need --executor ray")
    if address is not None:
        parse_address(address)
    sweep = load_sweep(file, paper, paper_size)
    chosen = parse_where(sweep, where)
    cells = [c for c in sweep.cells() if c.has(chosen)]
    if not cells:
        raise SplitlabError(f"no cell of {sweep.name} has every --where value at once: " + "; ".join(where))
    default_dir = Path("runs") / "sweep" / (sweep.name + ("-paper" if paper_size else ""))
    sweep_dir = Path(out) if out is not None else default_dir
    check_sweep_dir(sweep_dir)
    check_cells(sweep, cells, sweep_dir)
    dirs = [sweep_dir / "cells" / c.dirname for c in cells]
    finished = [is_finished(d) for d in dirs]

    if dry_run:
        rows = [{"#": i + 1, "cell": c.key, **{k: arg_text(v) for k, v in c.swept},
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

    pending = [(c, d) for c, d, f in zip(cells, dirs, finished) if not f]
    # the report covers this run's cells and every other finished cell of the grid: a narrowed run (--where)
    # adds to what the sweep directory holds, it does not hide it
    reported = [c for c in sweep.cells() if c.has(chosen) or is_finished(sweep_dir / "cells" / c.dirname)]
    with sigterm_stops():
        try:
            plan = start_ray_plan(address, concurrency, threads) if executor == "ray" and pending else None
            with locked(sweep_dir):
                atomic_write_text(sweep_dir / "sweep.toml", sweep.text)
                started = time.time()
                meta = {"sweep": sweep.name, "source": sweep.source, "paper_size": paper_size,
                        "command_line": sweep.command_line(), "executor": executor, "address": address,
                        "concurrency": plan.concurrency if plan else 1,
                        "torch_threads": plan.threads if plan else threads, "ray_nodes": plan.nodes if plan else None,
                        "cells": len(cells), "where": {k: sorted(v) for k, v in chosen.items()} or None,
                        "already_finished": sum(finished)}
                atomic_write_text(sweep_dir / "sweep.json", dumps(meta) + "\n")
                display = Display(len(pending), sum(finished), enabled=progress,
                                  after_cell=lambda: write_results(sweep, reported, sweep_dir))
                interrupted = run_cells(plan, pending, threads, display)
                summary = aggregate(sweep, reported, sweep_dir, counted=cells)
        finally:
            stop_ray()
    seconds = time.time() - started
    counts = summary["counts"]
    ran = display.done - display.elsewhere
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


def register(app: typer.Typer) -> None:
    """Add `splitlab sweep` to the app."""
    from vfl.cli_output import handles_errors

    app.command("sweep")(handles_errors(sweep_command))

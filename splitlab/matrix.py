"""`splitlab matrix`: every defence against every attack, at each of the defence's strengths, over seeds, as one
resumable sweep; writes the privacy-utility frontiers, the DCS scores and a ranking.

The command orders the steps; each has its module:

    matrix_grid    the matrix file, its arms (each defence at each declared strength), its checks, its sweeps
    matrix_score   DCS, T-DCS, C-DCS, intervals over seeds, shared ranks
    matrix_report  matrix.csv, scores.csv, the frontier figures, report.md
    matrix_worst   --worst-case: the attack's own options searched against each arm

The cells run on the sweep machinery (`splitlab.sweep`: Ray or in process, a finished cell is never run again), all
(task, attack) sweeps of the matrix in one pool, into one directory.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Optional

import typer

from splitlab.matrix_grid import Matrix, load_matrix, shipped
from splitlab.sweep import locked, run_cells, sigterm_stops, start_ray_plan
from splitlab.sweep_cells import is_finished
from splitlab.sweep_display import Display
from splitlab.sweep_ray import parse_address, stop_ray
from splitlab.sweep_validate import check_cells, check_sweep_dir
from vfl.errors import SplitlabError
from vfl.runs import atomic_write_text, dumps, to_jsonable
from vfl.validate import check_int


def matrix_command(
    file: Optional[Path] = typer.Argument(None, help="A matrix file (TOML), or --grid NAME."),
    grid: Optional[str] = typer.Option(None, "--grid", help="A shipped matrix: " + ", ".join(
        ["quick (a laptop CPU, minutes)", "cpu (CPU-hours)", "paper (the papers' sizes, for a GPU)"]) + "."),
    paper_size: bool = typer.Option(False, "--paper-size", help="Use the file's [paper] table (seeds, tasks, "
                                    "strengths)."),
    worst_case: int = typer.Option(0, "--worst-case", help="Search each attack's own options (within their "
                                   "declared ranges) for N trials per arm, on the first seed, and score each arm "
                                   "against the strongest attack found beside the default one (0: no search)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the matrix and count its cells; run nothing."),
    executor: str = typer.Option("ray", "--executor", help="ray (a private local Ray instance, or --address) or "
                                 "local (in this process)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Ray tasks at once."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Torch threads per cell."),
    address: Optional[str] = typer.Option(None, "--address", help="Join this Ray cluster (HOST:PORT)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Matrix directory (default runs/matrix/<name>); the "
                                       "same --out resumes."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the live progress display."),
    as_json: bool = typer.Option(False, "--json", help="Print the matrix's record as one JSON object."),
) -> None:
    """Benchmark defences against attacks: tasks x attacks x defences x strengths x seeds as one resumable sweep;
    writes report.md, matrix.csv, scores.csv (DCS, T-DCS, C-DCS, ranks) and a privacy-utility frontier per task
    and attack."""
    from splitlab.matrix_report import write_report
    from splitlab.matrix_worst import worst_case_search
    from vfl.cli_output import emit

    if executor not in ("ray", "local"):
        raise SplitlabError(f"unknown executor {executor!r}; choose one of: ray, local")
    if executor == "local" and (concurrency is not None or address is not None):
        raise SplitlabError("--concurrency and --address need --executor ray")
    if concurrency is not None:
        concurrency = check_int("--concurrency", concurrency, low=1, high=100_000)
    if threads is not None:
        threads = check_int("--threads", threads, low=1, high=4096)
    worst_case = check_int("--worst-case", worst_case, low=0, high=1000)
    if address is not None:
        parse_address(address)
    matrix = load_matrix(file, grid, paper_size)
    sweep_dir = Path(out) if out is not None else Path("runs") / "matrix" / (matrix.name + ("-paper" if paper_size
                                                                                            else ""))
    check_sweep_dir(sweep_dir)
    check_same_matrix(sweep_dir, matrix)
    sweeps = matrix.sweeps()
    for sweep in sweeps.values():                 # every cell through its command's parser and checks
        check_cells(sweep, sweep.cells(), sweep_dir)
    # task by task, each seed by seed: a matrix stopped early holds its first tasks whole at their first seeds (a
    # ranking with intervals), not every pair at some seeds
    tasks = list(matrix.tasks)
    order = [((tasks.index(task), matrix.seeds.index(dict(c.swept)["seed"])), c)
             for (task, _), s in sweeps.items() for c in s.cells()]
    cells = [c for _, c in sorted(order, key=lambda pair: pair[0])]
    finished = [is_finished(sweep_dir / "cells" / c.dirname) for c in cells]
    if dry_run:
        record = {"command": "matrix", "dry_run": True, "matrix": matrix.name, "cells": len(cells),
                  "finished": sum(finished), "arms": [a.label for a in matrix.arms], "tasks": list(matrix.tasks),
                  "attacks": matrix.attacks, "seeds": matrix.seeds, "matrix_dir": str(sweep_dir)}
        emit(record, as_json, lambda c: c.print(
            f"{matrix.name}: {len(cells)} cells ({sum(finished)} finished): tasks {', '.join(matrix.tasks)}; attacks "
            f"{', '.join(matrix.attacks)}; arms {', '.join(a.label for a in matrix.arms)}; seeds "
            f"{', '.join(map(str, matrix.seeds))}; nothing written", markup=False, highlight=False))
        return
    pending = [(c, sweep_dir / "cells" / c.dirname) for c, f in zip(cells, finished) if not f]
    started = time.time()
    with sigterm_stops():
        try:
            plan = start_ray_plan(address, concurrency, threads) if executor == "ray" and pending else None
            with locked(sweep_dir):
                # again under the lock: another matrix command may have claimed the new directory since the check
                # above (that one refuses before Ray starts; this one before anything is written)
                check_same_matrix(sweep_dir, matrix)
                atomic_write_text(sweep_dir / "matrix.toml", matrix.text)
                atomic_write_text(sweep_dir / "matrix.json", dumps({
                    "matrix": matrix.name, "source": matrix.source, "paper_size": paper_size, "executor": executor,
                    "address": address, "cells": len(cells), "already_finished": sum(finished),
                    "worst_case": worst_case}) + "\n")
                display = Display(len(pending), sum(finished), enabled=progress,
                                  after_cell=every(max(1, len(pending) // REPORTS),
                                                   lambda: write_report(matrix, sweep_dir)))
                interrupted = run_cells(plan, pending, threads, display)
                worst = None
                if worst_case and not interrupted:
                    worst, interrupted = worst_case_search(matrix, sweep_dir, worst_case, threads, progress)
                summary = write_report(matrix, sweep_dir, worst)
        finally:
            stop_ray()
    seconds = time.time() - started
    record = {"command": "matrix", "matrix": matrix.name, "matrix_dir": str(sweep_dir), "cells": len(cells),
              "ok": summary["cells_ok"], "failed": summary["cells_failed"], "skipped": sum(finished),
              "ran": display.done - display.elsewhere,
              "seconds": round(seconds, 1), "interrupted": interrupted, "report": str(sweep_dir / "report.md"),
              "ranking": [{"task": r["task"], "rank": r["rank"], "arm": r["arm"],
                           "c_dcs": None if r["c_dcs"] is None else round(r["c_dcs"].mean, 4)}
                          for r in summary["scores"]],
              "unjudged": [{"task": u["task"], "attack": u["attack"], "metric": u["metric"],
                            "undefended": round(u["undefended"].mean, 4), "trivial": round(u["trivial"], 4)}
                           for u in summary["unjudged"]]}

    def show(c) -> None:
        for r in record["ranking"]:
            c.print(f"{r['task']}: rank {r['rank']} {r['arm']} C-DCS {r['c_dcs']}", markup=False, highlight=False)
        for u in record["unjudged"]:
            c.print(f"{u['task']} x {u['attack']}: undefended {u['metric']} {u['undefended']} against its trivial "
                    f"{u['trivial']}, not clearly away from it: its cells cannot judge a defence", markup=False,
                    highlight=False)
        c.print(f"{len(cells)} cells: {record['ok']} ok, {record['failed']} failed; {sum(finished)} were already "
                f"finished; {seconds:.1f} s; {record['report']}", markup=False, highlight=False)

    emit(to_jsonable(record), as_json, show)
    if interrupted:
        typer.echo("interrupted: finished cells are kept; run the same command again to resume", err=True)
        raise typer.Exit(130)
    if record["ok"] != len(cells):
        raise typer.Exit(1)


REPORTS = 20
"""How many times a run rewrites its report as cells finish (each reads every cell and draws every frontier: after
every cell of a thousand-cell matrix that would cost more than the cells); the last report is written at the end."""


def every(n: int, action: Callable[[], None]) -> Callable[[], None]:
    """`action` on every n-th call."""
    calls = [0]

    def call() -> None:
        calls[0] += 1
        if calls[0] % n == 0:
            action()
    return call


def check_same_matrix(sweep_dir: Path, matrix: Matrix) -> None:
    """Refuse a directory that holds another matrix (its definition would be overwritten, its cells mixed in); the
    same matrix (file text and --paper-size) resumes there."""
    toml, record = sweep_dir / "matrix.toml", sweep_dir / "matrix.json"
    if not toml.is_file():
        return
    try:
        saved = json.loads(record.read_text()) if record.is_file() else {}
    except (OSError, ValueError):
        saved = {}
    if toml.read_text() != matrix.text or bool(saved.get("paper_size", matrix.paper_size)) != matrix.paper_size:
        raise SplitlabError(f"--out {sweep_dir} holds another matrix ({saved.get('matrix', 'its matrix.toml')}"
                            f"{', paper size' if saved.get('paper_size') else ''}); give a new --out, or run that "
                            "matrix's own file to resume it")


def register(app: typer.Typer) -> None:
    """Add `splitlab matrix` to the app."""
    from vfl.cli_output import handles_errors

    app.command("matrix")(handles_errors(matrix_command))


__all__ = ["matrix_command", "register", "shipped"]

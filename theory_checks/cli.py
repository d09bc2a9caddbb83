"""The `splitlab theory` command."""
from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from theory_checks.convergence import example1_figure, example1_runs
from theory_checks.suite import CHECKS, parse_dtype, run_checks, select_checks
from vfl.cli import JSON_OPTION, OUT_OPTION, emit, handles_errors, table
from vfl.runs import Run

EXAMPLE1 = "example1-adam-rotation"
COLUMNS = ["check", "claim", "measured", "tolerance", "expected", "verdict", "matched"]


def theory(
    only: Optional[List[str]] = typer.Option(None, "--only", help="Run only this check (repeatable). Names: "
                                             + ", ".join(CHECKS) + "."),
    dtype: str = typer.Option("float64", "--dtype", help="float64 (tolerance 1e-10) or float32 (tolerance 1e-5)."),
    out: Optional[Path] = OUT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run the orthogonal-invariance lemmas of JAST through the real protocol; exit 0 only if every
    check matched its expected verdict (holds / breaks), 1 otherwise, 2 on bad input."""
    names = select_checks(only)
    torch_dtype = parse_dtype(dtype)
    run = Run.create("theory", {"checks": names, "dtype": dtype}, out)
    start = time.perf_counter()
    suite = run_checks(names, dtype=torch_dtype)
    figures = []
    if EXAMPLE1 in names:
        figures.append(str(run.save_figure("example1_adam_rotation.png", example1_figure(example1_runs(torch_dtype)))))
    seconds = time.perf_counter() - start
    matched = sum(r.matched for r in suite.results)
    metrics = {"dtype": dtype, "all_matched": suite.all_matched, "matched": matched, "total": len(suite.results),
               "seconds": seconds, "check_seconds": suite.seconds, "checks": list(suite.results)}
    run.write_metrics(metrics)
    run.log(f"theory: {matched}/{len(suite.results)} checks matched their expected verdict in {seconds:.1f} s")

    def summary(console: Console) -> None:
        rows = [{"check": r.name, "claim": r.claim, "measured": r.measured, "tolerance": r.tolerance,
                 "expected": r.expected, "verdict": r.observed, "matched": "yes" if r.matched else "NO"}
                for r in suite.results]
        console.print(table(f"JAST invariance lemmas through the split protocol ({dtype})", rows, COLUMNS))
        for r in suite.results:
            if "finding" in r.details:
                console.print(r.details["finding"])
        console.print(f"{matched}/{len(suite.results)} checks matched their expected verdict in {seconds:.1f} s; "
                      f"run directory {run.path}" + (f"; figure {figures[0]}" if figures else ""))

    emit(run.record(metrics, figures=figures), as_json, summary)
    if not suite.all_matched:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `theory` to the `splitlab` app."""
    app.command("theory")(handles_errors(theory))

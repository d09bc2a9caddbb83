"""`splitlab claims`: how much of each paper the lab reproduces, claim by claim.

Without `--run` it reads the results shipped with the lab (no torch is imported, so it answers in about a
second); `--run ID|PAPER` runs the sweeps behind those claims again (on a private local Ray instance by
default, resumable: the same `--out` continues) and judges the claims on the new results.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from splitlab.claims import PAPERS, claims_for, scoreboard
from splitlab.claims.model import CHECKS, MEANINGS, VERDICTS
from splitlab.claims.results import provenance, read_csv
from vfl.errors import SplitlabError

__all__ = ["claims_command", "register", "count", "EXECUTORS"]

EXECUTORS = ("ray", "local")


def count(pairs) -> dict:
    """Per paper: the experiments' verdicts and the exact checks' verdicts, counted apart."""
    counts = {paper: {"experiments": {v: 0 for v in VERDICTS}, "exact checks": {v: 0 for v in CHECKS}}
              for paper in PAPERS}
    for claim, verdict in pairs:
        counts[claim.paper]["exact checks" if claim.exact else "experiments"][verdict.verdict] += 1
    return counts


def _record(pairs) -> dict:
    rows = [{"id": c.id, "paper": c.paper, "kind": c.kind, "where": c.where, "claim": c.claim,
             "paper_numbers": c.paper_numbers, "verdict": v.verdict, "lab": v.lab, "images": v.images,
             "reason": v.reason,
             "measure": None if c.measure is None else {"sweep": c.measure.sweep, "how": c.measure.how},
             "values": dict(v.values)} for c, v in pairs]
    return {"command": "claims", "counts": count(pairs), "meanings": MEANINGS, "claims": rows}


def summary_line(counts: dict) -> str:
    """The whole ledger in one sentence: the experiments' verdicts, then the exact checks."""
    total = {v: sum(c["experiments"][v] for c in counts.values()) for v in VERDICTS}
    checks = {v: sum(c["exact checks"][v] for c in counts.values()) for v in CHECKS}
    claims = sum(total.values()) + sum(checks.values())
    return (f"{claims} claims: {sum(total.values())} experiments (" + ", ".join(f"{total[v]} {v}" for v in VERDICTS)
            + f"), {sum(checks.values())} exact checks (" + ", ".join(f"{checks[v]} {v}" for v in CHECKS if checks[v]
                                                                     or v == "holds") + ")")


def _show(record: dict, console: Console) -> None:
    table = Table(title="Claims by paper: experiments by verdict, exact checks apart")
    for column in ("paper", *VERDICTS, "exact checks (hold / all)", "total"):
        table.add_column(column)
    for paper, counts in record["counts"].items():
        experiments, checks = counts["experiments"], counts["exact checks"]
        if sum(experiments.values()) + sum(checks.values()):
            table.add_row(paper, *[str(experiments[v]) for v in VERDICTS],
                          f"{checks['holds']} / {sum(checks.values())}",
                          str(sum(experiments.values()) + sum(checks.values())))
    claims = Table(title="Claims (the paper's numbers beside the lab's)", show_lines=True)
    for column in ("claim", "verdict", "paper", "lab", "why"):
        claims.add_column(column, overflow="fold")
    for row in record["claims"]:
        lab = row["lab"] + (f"; {row['images']}" if row["images"] else "")
        kind = " (exact check)" if row["kind"] == "exact check" else ""
        claims.add_row(f"{row['id']}\n{row['claim']}", row["verdict"] + kind, row["paper_numbers"], lab,
                       row["reason"])
    console.print(claims)
    console.print(table)


def _deviations(paper: Optional[str], as_json: bool) -> None:
    from splitlab.claims.deviations import declared

    papers = [paper] if paper in PAPERS else [c.paper for c in claims_for(paper)[:1]] if paper else list(PAPERS)
    found = {p: declared(p) for p in papers}
    if as_json:
        sys.stdout.write(json.dumps({"command": "claims", "deviations": {
            p: [{"source": src, "what": d.what, "paper": d.paper, "lab": d.lab, "why": d.why,
                 "presets": list(d.presets)} for src, d in rows] for p, rows in found.items()}}) + "\n")
        return
    console = Console(width=None if sys.stdout.isatty() else 200)
    for p, rows in found.items():
        table = Table(title=f"{PAPERS[p]}: declared deviations", show_lines=True)
        for column in ("source", "what", "paper", "lab", "why", "presets"):
            table.add_column(column, overflow="fold")
        for src, d in rows:
            table.add_row(src, d.what, d.paper, d.lab, d.why, ", ".join(d.presets) or "all")
        console.print(table)
    typer.echo(f"{sum(len(r) for r in found.values())} declared deviations; per attack in docs/attacks/")


def _where(selections: list) -> list[str]:
    """`--where` arguments that keep a sweep's cells to those the selections read: for each key every selection
    names, the values they name (a superset of their union; a key some selection leaves open stays open)."""
    from splitlab.sweep_file import arg_text

    keys = set.intersection(*(set(s.where) for s in selections)) if selections else set()

    def values(wanted) -> set[str]:           # a tuple names alternatives
        return {arg_text(v) for v in (wanted if isinstance(wanted, tuple) else (wanted,))}
    return [f"--where={key}={value}" for key in sorted(keys)
            for value in sorted(set().union(*(values(s.where[key]) for s in selections)))]


def _rerun(selector: str, out: Optional[Path], executor: str, concurrency: Optional[int], quiet: bool):
    """Run the cells behind the chosen claims (resumable) and return a results reader over them. A sweep that
    refuses or is interrupted has said why in its one line; this exits with its code and adds nothing."""
    from splitlab.cli import app

    measured = [c.measure for c in claims_for(selector) if c.measure is not None]
    sweeps = sorted({m.sweep for m in measured})
    if not sweeps:
        raise SplitlabError(f"{selector}: no measured claim to run again (all are not attempted)")
    root = out or Path("runs") / "claims" / selector
    for name in sweeps:                 # the sweep command itself: its checks, Ray, resume and report
        where = _where([s for m in measured if m.sweep == name for s in m.selections])
        args = ["sweep", "--paper", name, "--out", str(root / name), "--executor", executor, *where,
                *(["--concurrency", str(concurrency)] if concurrency is not None else []),
                *([] if sys.stderr.isatty() else ["--no-progress"])]   # a live display needs a terminal
        # with --json, stdout carries the claims' one JSON object only: the sweep's table (in its report.md) is
        # not printed, so what reaches stderr is a refusal's or an interruption's one line
        with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
            code = app(args, prog_name="splitlab", standalone_mode=False)
        if code in (2, 130):
            raise typer.Exit(code)
        if code not in (None, 0):
            raise SplitlabError(f"the sweep {name} did not finish every cell (exit {code}; see "
                                f"{root / name / 'report.md'}); run the same command again to resume it")

    def results(sweep: str):
        path = root / sweep / "results.csv"
        return read_csv(path) if path.is_file() else None
    return results


def _check_options(run: Optional[str], paper: Optional[str], out: Optional[Path], executor: Optional[str],
                   concurrency: Optional[int], deviations: bool) -> None:
    """Refuse options that do nothing here, before anything runs or is written."""
    given = [name for name, value in (("--out", out), ("--executor", executor), ("--concurrency", concurrency))
             if value is not None]
    if deviations and run is not None:
        raise SplitlabError("--deviations lists declarations; it runs nothing (drop --run)")
    if run is None and given:
        raise SplitlabError(f"{', '.join(given)} say{'s' * (len(given) == 1)} how to run the sweeps again: "
                            "only with --run ID|PAPER")
    if run is not None and paper is not None:
        raise SplitlabError("--run chooses the claims it runs (an id or a paper); --paper only narrows the "
                            "listing: give one of them")
    if executor is not None and executor not in EXECUTORS:
        raise SplitlabError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")
    if concurrency is not None and concurrency < 1:
        raise SplitlabError(f"--concurrency must be at least 1, got {concurrency}")
    if concurrency is not None and executor == "local":
        raise SplitlabError("--concurrency needs --executor ray (local runs one cell at a time)")


def claims_command(
    run: Optional[str] = typer.Option(None, "--run", help="Run the sweeps behind this claim id or paper again "
                                      "and judge it on the new results (resumable with the same --out)."),
    paper: Optional[str] = typer.Option(None, "--paper", help="Only this paper's claims (or one claim id): "
                                        + ", ".join(PAPERS) + "."),
    out: Optional[Path] = typer.Option(None, "--out", help="With --run: where the sweeps go (default "
                                       "runs/claims/<id or paper>)."),
    executor: Optional[str] = typer.Option(None, "--executor", help="With --run: ray (a private local instance, "
                                           "the default) or local."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="With --run: cells at once."),
    deviations: bool = typer.Option(False, "--deviations", help="List how the lab departs from the papers "
                                    "instead (model, setting, metric, protocol), as each attack declares it."),
    as_json: bool = typer.Option(False, "--json", help="Print the result record as one JSON object on stdout."),
) -> None:
    """How much of each paper the lab reproduces: every headline claim with the paper's numbers beside the lab's
    and a verdict computed from measured runs."""
    try:
        _check_options(run, paper, out, executor, concurrency, deviations)
        if deviations:
            return _deviations(paper, as_json)
        if run is not None:
            claims_for(run)                       # an unknown id or paper: refused before any sweep starts
            pairs = list(scoreboard(run, _rerun(run, out, executor or "ray", concurrency, as_json)))
        else:
            pairs = list(scoreboard(paper))
    except SplitlabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    record = _record(pairs)
    record["results"] = {c.measure.sweep: provenance(c.measure.sweep) for c, _ in pairs if c.measure is not None}
    if as_json:
        sys.stdout.write(json.dumps(record) + "\n")
        return
    _show(record, Console(width=None if sys.stdout.isatty() else 200))
    typer.echo(summary_line(record["counts"]) + "; what each verdict means and per-claim detail in docs/claims.md")


def register(app: typer.Typer) -> None:
    app.command("claims")(claims_command)

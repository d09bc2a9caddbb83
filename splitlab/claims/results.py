"""The measured results shipped with the lab: one sweep's results.csv per file in `splitlab/results/`, beside a
small JSON of where it came from (the commit, the command, the threads, the wall time), so the ledger's
verdicts can be recomputed on a fresh install without running anything.

    ship(sweep_dir, "fedleak-baselines")   # copy a finished sweep's results.csv and record its provenance
    rows("fedleak-baselines")              # its rows, or None when the lab ships no results for it
    earlier("fedleak-defences")            # an earlier, partial run's kept values and where they come from

`earlier/` holds what is left of runs whose cell files are gone (partial grids, earlier versions of the lab):
the values docs/results.md printed from them, per seed where it printed them, else a setting's mean, std and
count (`cells_summarised`), each file beside a JSON naming the commit and the section they come from. The
ledger judges a claim on them only while its sweep has no shipped results, and says so.
"""
from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitlab.sweep_images import IMAGES, images_of
from vfl.errors import SplitlabError

__all__ = ["RESULTS", "rows", "provenance", "ship", "read_csv", "earlier", "Earlier"]

RESULTS = Path(__file__).resolve().parent.parent / "results"


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def rows(sweep: str, root: Path = RESULTS) -> list[dict[str, Any]] | None:
    path = root / f"{sweep}.csv"
    return read_csv(path) if path.is_file() else None


def provenance(sweep: str, root: Path = RESULTS) -> dict[str, Any] | None:
    path = root / f"{sweep}.json"
    return json.loads(path.read_text()) if path.is_file() else None


@dataclass(frozen=True)
class Earlier:
    """An earlier run's kept values: rows as in results.csv (or summaries), and where they come from."""
    rows: list[dict[str, Any]]
    meta: dict[str, Any]

    @property
    def source(self) -> str:
        return f"earlier run, commit {self.meta['commit']}, not shipped: {self.meta['what']}"


def earlier(sweep: str, root: Path = RESULTS) -> Earlier | None:
    path = root / "earlier" / f"{sweep}.csv"
    if not path.is_file():
        return None
    return Earlier(read_csv(path), json.loads(path.with_suffix(".json").read_text()))


def _code(sweep_dir: Path) -> dict[str, Any]:
    """The commits (and whether the tree was dirty) and package versions the cells ran with, from their
    config.json files: a sweep resumed after a change of code has cells from more than one commit."""
    seen: dict[str, set] = {"git": set(), "torch": set(), "python": set()}
    for config in sorted(sweep_dir.glob("cells/*/config.json")):
        environment = json.loads(config.read_text()).get("environment", {})
        found = {"git": environment.get("git"), "torch": environment.get("packages", {}).get("torch"),
                 "python": environment.get("python")}
        for key, value in found.items():
            if value is not None:
                seen[key].add(json.dumps(value, sort_keys=True))
    return {key: [json.loads(v) for v in sorted(values)] if len(values) > 1 else json.loads(next(iter(values)))
            for key, values in seen.items() if values}


def ship(sweep_dir: Path, name: str, root: Path = RESULTS) -> Path:
    """Copy a sweep's results.csv into the shipped results, with its provenance (from the sweep's cells)."""
    from vfl.runs import atomic_write_text

    results = sweep_dir / "results.csv"
    if not results.is_file():
        raise SplitlabError(f"{sweep_dir} holds no results.csv; run the sweep to the end first")
    record = json.loads((sweep_dir / "sweep.json").read_text()) if (sweep_dir / "sweep.json").is_file() else {}
    if record.get("paper_size"):
        raise SplitlabError(f"{sweep_dir} is a --paper-size sweep; the shipped results are the CPU-sized grids")
    table = read_csv(results)
    if not table or any(r.get("status") != "ok" for r in table):
        raise SplitlabError(f"{sweep_dir}: every cell must be ok before its results are shipped")
    if table and IMAGES not in table[0]:          # written before results.csv carried it: from the cells
        found = [images_of(sweep_dir / r.get("dir", "")) for r in table]
        if any(found):
            table = [{**r, IMAGES: f} for r, f in zip(table, found)]
    records = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("cells/*/cell.json"))]
    seconds = sum(float(r.get("seconds") or 0) for r in records)
    meta = {"sweep": name, "cells": len(table), **_code(sweep_dir), "shipped": time.strftime("%Y-%m-%d"),
            "command": f"splitlab sweep --paper {name}", "cell_seconds": round(seconds, 1),
            "torch_threads": sorted({r.get("torch_threads") for r in records if r.get("torch_threads")})}
    meta_file = sweep_dir / "sweep.json"
    if meta_file.is_file():
        meta["sweep_record"] = json.loads(meta_file.read_text())
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(root / f"{name}.csv", buffer.getvalue())
    atomic_write_text(root / f"{name}.json", json.dumps(meta, indent=2) + "\n")
    return root / f"{name}.csv"

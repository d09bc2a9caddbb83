"""Combine `splitlab bounds --batch B` runs into the batch-size figure (the paper's Figure 9b / App. C.2).

    splitlab bounds --batch 2 --out runs/bounds/b2      # and --batch 4, --batch 8 (or the bounds-batch sweep)
    python scripts/bounds_batch.py runs/bounds/b2 runs/bounds/b4 runs/bounds/b8 --out runs/bounds/batch.png
    python scripts/bounds_batch.py runs/sweep/bounds-batch --out runs/sweep/bounds-batch/batch.png

Each argument is a run directory of `splitlab bounds` or a sweep directory (its cells/*/ runs are read).
Runs with the same B (several seeds) are averaged. Writes the figure (bound, mean and best error per image at
T against B, per attack, log y) and prints one row per B and attack: L_R, the fit error, the bound and the
errors at T, all per image (||X - R(w_T)||^2 / B over d = 64 pixels).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from theory_checks.bounds.figures import batch_figure
from vfl.runs import Run

KEYS = ("L_R", "fit_mse", "err_w_star", "bound_T", "bound_T_over_d", "mean_error_T", "best_error_T")


def runs_in(path: Path) -> list[Path]:
    if (path / "metrics.json").is_file():
        return [path]
    cells = sorted(p.parent for p in path.glob("cells/*/metrics.json"))
    if not cells:
        raise SystemExit(f"error: {path} is neither a bounds run nor a sweep with finished cells")
    return cells


def mean_record(records: list[dict]) -> dict:
    """One metrics-like record per B: each attack's KEYS averaged over the runs (seeds)."""
    first = records[0]
    names = [n for n in first["attacks"] if all(n in r["attacks"] for r in records)]
    attacks = {n: {k: statistics.fmean(r["attacks"][n][k] for r in records) for k in KEYS} for n in names}
    flags = {"all_mean_below_bound": all(r["all_mean_below_bound"] for r in records),
             "idlg_below_dlg_by_bound": statistics.fmean(bool(r["idlg_below_dlg_by_bound"]) for r in records)
             if all(r["idlg_below_dlg_by_bound"] is not None for r in records) else None}
    return {"config": first["config"], "attacks": attacks, "runs": len(records), **flags}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("batch.png"))
    args = parser.parse_args()
    by_batch: dict[int, list[dict]] = {}
    for path in args.paths:
        for run in runs_in(path):
            metrics = json.loads((run / "metrics.json").read_text())
            by_batch.setdefault(int(metrics["config"].get("batch", 1)), []).append(metrics)
    if len(by_batch) < 2:
        raise SystemExit(f"error: the runs hold {len(by_batch)} batch size(s); give runs of at least two")
    results = {b: mean_record(records) for b, records in sorted(by_batch.items())}
    figure = Run(args.out.parent, "bounds batch figure").save_figure(args.out.name, batch_figure(results))
    print("B  runs attack   " + " ".join(f"{k:>14}" for k in KEYS) + "  all_mean<=bound iDLG<DLG")
    for b, result in results.items():
        for name, values in result["attacks"].items():
            print(f"{b:<2} {result['runs']:>4} {name:<8} " + " ".join(f"{values[k]:>14.4g}" for k in KEYS)
                  + f"  {result['all_mean_below_bound']!s:>15} {result['idlg_below_dlg_by_bound']}")
    print(f"figure {figure}")


if __name__ == "__main__":
    main()

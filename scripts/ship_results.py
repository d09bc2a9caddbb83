"""Ship finished sweeps' results with the lab, so `splitlab claims` judges the claims on them.

    python scripts/ship_results.py runs/sweep/fedleak-baselines [more sweep directories ...]

Copies each sweep's results.csv into splitlab/results/NAME.csv beside NAME.json (the commit, torch version
and threads the cells ran with, the summed cell time, the sweep's own record), then rewrites the generated
docs (docs/claims.md among them) and prints the claims whose verdicts the shipped sweeps decide.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from splitlab import docs
from splitlab.claims import LEDGER, judge
from splitlab.claims.results import ship


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", type=Path, nargs="+", help="finished sweep directories (each with sweep.json)")
    args = parser.parse_args()
    names = []
    for sweep_dir in args.sweeps:
        record = sweep_dir / "sweep.json"
        if not record.is_file():
            raise SystemExit(f"{sweep_dir}: no sweep.json; give a directory `splitlab sweep` wrote")
        name = json.loads(record.read_text())["sweep"]
        print(f"shipped {ship(sweep_dir, name)}")
        names.append(name)
    for page in docs.write():
        print(f"wrote docs/{page}")
    for claim in LEDGER:
        if claim.measure is not None and claim.measure.sweep in names:
            verdict = judge(claim)
            print(f"{claim.id:40s} {verdict.verdict:14s} {verdict.lab}")


if __name__ == "__main__":
    main()

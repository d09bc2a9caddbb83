"""UnSplit on tabular data against its trivial baselines, over seeds (each seed its own train/test split, victim and
clone): per dataset, its per-feature MSE beside the training mean's and its categorical accuracy beside the
majority category's, one row per seed and the mean over seeds.

    python scripts/unsplit_tabular.py --sweep runs/sweep/unsplit-tabular     # the table of a finished sweep's cells
    python scripts/unsplit_tabular.py --datasets wdbc,adult --seeds 0,1,2 --out runs/unsplit-tabular
    python scripts/unsplit_tabular.py --datasets wdbc,adult --seeds 0,1,2 --iterations 400 --out runs/unsplit-tabular \
        --reuse                # the same victims (their checkpoints under --out), attacked with more iterations

The shipped numbers are the grid `splitlab sweep --paper unsplit-tabular` (the same commands and defaults as here:
the preset's 200 rounds, cut 1, the first 64 test rows, wdbc ten epochs of batch 64, adult one of batch 256); `--sweep`
prints its table. Each run is `splitlab attack unsplit --preset unsplit.tabular` (the command is printed); its run
directory holds metrics.json with every number.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

import torch
from typer.testing import CliRunner

from splitlab.claims.stats import interval
from splitlab.cli import app


def attack(args: list[str], out: Path) -> dict:
    print("splitlab " + " ".join(args) + f" --out {out}", flush=True)
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--overwrite"])
    if result.exit_code != 0:
        raise SystemExit(f"failed: {result.output.strip().splitlines()[-1]}")
    return json.loads((out / "metrics.json").read_text())


def run(options) -> list[tuple[str, str, dict]]:
    torch.set_num_threads(1)
    epochs = dict(item.split("=") for item in options.epochs.split(","))
    batch = dict(item.split("=") for item in options.batch_size.split(","))
    iterations = [] if options.iterations is None else ["--iterations", str(options.iterations)]
    rows = []
    for dataset in options.datasets.split(","):
        for seed in options.seeds.split(","):
            victim = options.out / f"{dataset}-seed{seed}"
            common = ["attack", "unsplit", "--preset", "unsplit.tabular", *iterations, "--rows", str(options.rows),
                      "--seed", seed, "--device", "cpu", "--json"]
            if options.reuse:
                m = attack([*common, "--checkpoint", str(victim / "checkpoint.pt")],
                           options.out / f"{dataset}-seed{seed}-it{options.iterations or 'preset'}")
            else:
                m = attack([*common, "--dataset", dataset, "--arch", options.arch, "--cut-layer", options.cut_layer,
                            "--epochs", epochs.get(dataset, "10"), "--batch-size", batch.get(dataset, "64")],
                           victim)
            rows.append((dataset, seed, m))
    return rows


def swept(sweep: Path) -> list[tuple[str, str, dict]]:
    """(dataset, seed, metrics) of every finished cell of a sweep directory, in the grid's order."""
    rows = []
    for cell in sorted((sweep / "cells").glob("*/cell.json")):
        record = json.loads(cell.read_text())
        if record["status"] == "ok":
            swept_values = record["swept"]
            rows.append((swept_values["dataset"], str(swept_values["seed"]),
                         json.loads((cell.parent / "metrics.json").read_text())))
    if not rows:
        raise SystemExit(f"{sweep}: no finished cells")
    return sorted(rows, key=lambda row: (row[0] != "wdbc", row[0], int(row[1])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="wdbc,adult")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--arch", default="tabular-mlp")
    parser.add_argument("--cut-layer", default="1")
    parser.add_argument("--epochs", default="wdbc=10,adult=1", help="dataset=epochs, comma-separated")
    parser.add_argument("--batch-size", default="wdbc=64,adult=256", help="dataset=batch size, comma-separated")
    parser.add_argument("--iterations", type=int, default=None, help="default: the preset's")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--out", type=Path, help="where the runs go (not with --sweep)")
    parser.add_argument("--reuse", action="store_true", help="attack the victims trained by an earlier call")
    parser.add_argument("--sweep", type=Path, help="print the table of this finished sweep's cells; run nothing")
    options = parser.parse_args()
    if (options.sweep is None) == (options.out is None):
        parser.error("give --out (run the attacks) or --sweep (a finished sweep's table), not both")
    rows = swept(options.sweep) if options.sweep else run(options)
    datasets = list(dict.fromkeys(dataset for dataset, _, _ in rows))
    print(f"\n| dataset | seed | task accuracy | feature MSE | training mean | categorical accuracy | majority | "
          f"MSE Z |\n|---|---|---|---|---|---|---|---|")

    def share(value):
        return "-" if value is None else f"{value:.3f}"
    def spread(found: list[dict], *key: str) -> str:
        values = [functools.reduce(dict.get, key, m) for m in found]
        if None in values:
            return "-"
        return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values) if len(values) > 1 else 0:.4f}"
    for dataset, seed, m in rows:
        print(f"| {dataset} | {seed} | {m['accuracy']:.4f} | {m['feature_mse']:.4f} | "
              f"{m['baselines']['mean']['feature_mse']:.4f} | {share(m['categorical_accuracy'])} | "
              f"{share(m['baselines']['majority']['categorical_accuracy'])} | {m['activation_mse']:.3g} |")
    for dataset in datasets:
        found = [m for d, _, m in rows if d == dataset]
        print(f"| {dataset} | mean ± std | {spread(found, 'accuracy')} | {spread(found, 'feature_mse')} | "
              f"{spread(found, 'baselines', 'mean', 'feature_mse')} | {spread(found, 'categorical_accuracy')} | "
              f"{spread(found, 'baselines', 'majority', 'categorical_accuracy')} | - |")
    print()

    def paired(values: list[float], digits: int) -> str:
        mean, low, high = interval(values)
        return (f"{mean:+.{digits}f} (95% CI {low:+.{digits}f} to {high:+.{digits}f}; per seed "
                f"{', '.join(f'{v:+.{digits}f}' for v in values)})")
    for dataset in datasets:
        found = [m for d, _, m in rows if d == dataset]
        gap = [m["feature_mse"] - m["baselines"]["mean"]["feature_mse"] for m in found]
        line = f"{dataset}: feature MSE minus the training mean's {paired(gap, 4)} (below 0: UnSplit beats the mean)"
        if found[0]["categorical_accuracy"] is not None:
            lift = [m["categorical_accuracy"] - m["baselines"]["majority"]["categorical_accuracy"] for m in found]
            line += f"; categorical accuracy minus the majority's {paired(lift, 3)}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""UnSplit on tabular data against its trivial baselines, over seeds (each seed its own train/test split, victim and
clone): per dataset, its per-feature MSE beside the training mean's and its categorical accuracy beside the
majority category's, one row per seed and the mean over seeds.

    python scripts/unsplit_tabular.py --datasets wdbc,adult --seeds 0,1,2 --iterations 25 --out runs/unsplit-tabular
    python scripts/unsplit_tabular.py --datasets wdbc,adult --seeds 0,1,2 --iterations 100 --out runs/unsplit-tabular \
        --reuse                # the same victims (their checkpoints under --out), attacked with more iterations

Each run is `splitlab attack unsplit --preset unsplit.tabular` (the command is printed); its run directory holds
metrics.json with every number.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from typer.testing import CliRunner

from splitlab.cli import app


def attack(args: list[str], out: Path) -> dict:
    print("splitlab " + " ".join(args) + f" --out {out}", flush=True)
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--overwrite"])
    if result.exit_code != 0:
        raise SystemExit(f"failed: {result.output.strip().splitlines()[-1]}")
    return json.loads((out / "metrics.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="wdbc,adult")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--arch", default="tabular-mlp")
    parser.add_argument("--cut-layer", default="1")
    parser.add_argument("--epochs", default="wdbc=10,adult=1", help="dataset=epochs, comma-separated")
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reuse", action="store_true", help="attack the victims trained by an earlier call")
    options = parser.parse_args()
    torch.set_num_threads(1)
    epochs = dict(item.split("=") for item in options.epochs.split(","))
    rows = []
    for dataset in options.datasets.split(","):
        for seed in options.seeds.split(","):
            victim = options.out / f"{dataset}-seed{seed}"
            common = ["attack", "unsplit", "--preset", "unsplit.tabular", "--iterations", str(options.iterations),
                      "--rows", str(options.rows), "--seed", seed, "--device", "cpu", "--json"]
            if options.reuse:
                m = attack([*common, "--checkpoint", str(victim / "checkpoint.pt")],
                           options.out / f"{dataset}-seed{seed}-it{options.iterations}")
            else:
                m = attack([*common, "--dataset", dataset, "--arch", options.arch, "--cut-layer", options.cut_layer,
                            "--epochs", epochs.get(dataset, "10")], victim)
            rows.append((dataset, seed, m))
    print(f"\n| dataset | seed | task accuracy | feature MSE | training mean | categorical accuracy | majority | "
          f"MSE Z |\n|---|---|---|---|---|---|---|---|")

    def share(value):
        return "-" if value is None else f"{value:.3f}"
    for dataset, seed, m in rows:
        print(f"| {dataset} | {seed} | {m['accuracy']:.4f} | {m['feature_mse']:.4f} | "
              f"{m['baselines']['mean']['feature_mse']:.4f} | {share(m['categorical_accuracy'])} | "
              f"{share(m['baselines']['majority']['categorical_accuracy'])} | {m['activation_mse']:.3g} |")
    print()
    for dataset in options.datasets.split(","):
        found = [m for d, _, m in rows if d == dataset]
        gap = [m["feature_mse"] - m["baselines"]["mean"]["feature_mse"] for m in found]
        line = (f"{dataset}: feature MSE minus the training mean's {statistics.mean(gap):+.4f} "
                f"(per seed {', '.join(f'{g:+.4f}' for g in gap)}; below 0: UnSplit beats the mean)")
        if found[0]["categorical_accuracy"] is not None:
            lift = [m["categorical_accuracy"] - m["baselines"]["majority"]["categorical_accuracy"] for m in found]
            line += (f"; categorical accuracy minus the majority's {statistics.mean(lift):+.3f} "
                     f"(per seed {', '.join(f'{g:+.3f}' for g in lift)})")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

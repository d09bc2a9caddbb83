"""Combine FSHA run directories into the paper's figures.

    python scripts/fsha_figures.py RESNET_RUN MLP_RUN --out figures/fsha_mnist

writes `OUT_grid.png` (Figures 3-4: private images, then each run's reconstructions, one row per
run, on the dataset's [0,1] scale) and `OUT_curves.png` (Figure 5: encoder-decoder and reconstruction
error of every run), and prints the training-interval reconstruction error of each run at every logged
iteration (MSE on [-1, 1]) plus, where both a resnet and an mlp run are given, their ratio at the last
iteration both reached.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from attacks.figures import image_grid
from attacks.split.fsha.evaluation import curves_figure
from vfl.runs import Run


def _load(run_dir: Path) -> tuple[str, list[dict], dict]:
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        metrics = json.loads(metrics_file.read_text())
        log = metrics["extras"]["log"]
        label = f"{metrics['arch']} L{metrics['level']}"
    else:                                               # a run still in progress: read its log lines
        victim = json.loads((run_dir / "config.json").read_text())["config"]["victim"]
        log = []
        for line in (run_dir / "run.log").read_text().splitlines():
            if " iteration=" in line:
                fields = dict(item.split("=", 1) for item in line.split()[1:] if "=" in item)
                log.append({k: (int(v) if k == "iteration" else float(v)) for k, v in fields.items()})
        level = victim.get("cut_layer", victim.get("level"))      # runs before the case named it `level`
        label = f"{victim['arch']} L{level} (running)"
    grid_file = run_dir / "reconstruction.pt"
    grid = torch.load(grid_file, map_location="cpu", weights_only=True) if grid_file.exists() else {}
    return label, log, grid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("fsha"))
    args = parser.parse_args()
    for run in args.runs:
        if not (run / "config.json").is_file():
            parser.error(f"{run} is not a run directory of `splitlab attack fsha` (no config.json)")
    loaded = [_load(run) for run in args.runs]
    figures = Run(args.out.parent, "fsha figures")
    figures.save_figure(f"{args.out.name}_curves.png", curves_figure([(label, log) for label, log, _ in loaded]))
    rows = [(label, grid["reconstructions"].clamp(0, 1)) for label, _, grid in loaded if grid]
    if rows:
        originals = next(grid["originals"] for _, _, grid in loaded if grid)
        figures.save_figure(f"{args.out.name}_grid.png", image_grid([("private", originals), *rows]))
    for label, log, _ in loaded:
        print(label + ": " + ", ".join(f"{r['iteration']}: {r['reconstruction_mse']:.4f}" for r in log))
    by_arch = {label.split()[0]: {r["iteration"]: r["reconstruction_mse"] for r in log} for label, log, _ in loaded}
    if "resnet" in by_arch and "mlp" in by_arch:
        common = sorted(set(by_arch["resnet"]) & set(by_arch["mlp"]))
        if common:
            it = common[-1]
            print(f"at iteration {it}: mlp / resnet = {by_arch['mlp'][it]:.4f} / {by_arch['resnet'][it]:.4f} "
                  f"= {by_arch['mlp'][it] / by_arch['resnet'][it]:.2f}")


if __name__ == "__main__":
    main()

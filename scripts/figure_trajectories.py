"""Quality against the attack iteration from a sweep whose runs recorded a trajectory (`--trajectory N`).

    python scripts/figure_trajectories.py runs/sweep/awa-horizon [--out trajectories.png] [--metric ssim]

`--metric ssim_global` draws the whole-image SSIM the AWA paper prints, which trajectories record beside `ssim`.

Reads every finished cell's metrics.json, groups the cells by their swept values except the seed, and
draws the mean and one standard deviation over seeds of the metric at each recorded iteration: one panel
per setting (every swept key but preset, attack and seed), one line per preset. Prints the same numbers
as a table (mean ± std at every fifth recorded iteration and at the last).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure

LINES = ("preset", "attack")


def swept_keys(header: list[str]) -> list[str]:
    """results.csv puts the swept keys between `status` and `cell_seconds`."""
    return header[header.index("status") + 1:header.index("cell_seconds")]


def curves(sweep: Path, metric: str) -> dict[tuple, dict[tuple, list[tuple[list[int], list[float]]]]]:
    """panel -> line -> [(iterations, values) per seed]."""
    with open(sweep / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        keys = swept_keys(reader.fieldnames or [])
        rows = [r for r in reader if r["status"] == "ok"]
    panels: dict = defaultdict(lambda: defaultdict(list))
    for row in rows:
        trajectory = json.loads((sweep / row["dir"] / "metrics.json").read_text()).get("trajectory")
        if not trajectory:
            continue
        panel = tuple((k, row[k]) for k in keys if k not in LINES and k != "seed")
        line = next((row[k] for k in LINES if k in keys), "run")
        panels[panel][line].append((trajectory["iterations"], trajectory[metric]))
    if not panels:
        raise SystemExit(f"{sweep}: no finished cell recorded a trajectory (run the sweep with --trajectory N)")
    return panels


def summary(runs: list[tuple[list[int], list[float]]]) -> tuple[list[int], list[float], list[float]]:
    iterations = runs[0][0]
    columns = list(zip(*(values for _, values in runs)))
    means = [statistics.fmean(c) for c in columns]
    stds = [statistics.pstdev(c) for c in columns]
    return iterations, means, stds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--metric", default="ssim", choices=("ssim", "ssim_global", "psnr"))
    parser.add_argument("--out", type=Path, default=None, help="default: SWEEP/figures/trajectories_METRIC.png")
    args = parser.parse_args()
    panels = curves(args.sweep, args.metric)
    out = args.out or args.sweep / "figures" / f"trajectories_{args.metric}.png"
    figure = Figure(figsize=(3.6 * len(panels), 3.2))
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (panel, lines) in zip(axes, sorted(panels.items())):
        title = ", ".join(f"{k} {v}" for k, v in panel) or "all"
        print(f"\n{title}")
        for line, runs in sorted(lines.items()):
            iterations, means, stds = summary(runs)
            ax.plot(iterations, means, label=f"{line} ({len(runs)} seeds)")
            ax.fill_between(iterations, [m - s for m, s in zip(means, stds)], [m + s for m, s in zip(means, stds)],
                            alpha=0.2)
            shown = sorted(set(range(4, len(iterations), 5)) | {len(iterations) - 1})
            print(f"  {line:14s} " + "  ".join(f"{iterations[i]}: {means[i]:.3f}±{stds[i]:.3f}" for i in shown))
        ax.set(title=title, xlabel="iteration", ylabel=args.metric.upper())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

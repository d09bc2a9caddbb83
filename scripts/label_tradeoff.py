"""The privacy-utility trade-off of the label party's send-back defences (Li et al., ICLR 2022, Sec. 6): leak AUC
of norm and direction scoring against task accuracy, one curve per defence over its strength, means over seeds
with their spread. Reads the shipped results of the `label-defences-norm` and `label-defences-direction` grids
(or the sweep directories given), writes docs/figures/label-tradeoff.png and prints the means as a table.

    python scripts/label_tradeoff.py
    python scripts/label_tradeoff.py --sweeps runs/sweep/label-defences-norm runs/sweep/label-defences-direction
"""
from __future__ import annotations

import argparse
import math
import re
import statistics
from pathlib import Path

from matplotlib.figure import Figure

from splitlab.claims.results import RESULTS, read_csv

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = ("label-defences-norm", "label-defences-direction")
FAMILIES = {"none": ("no defence", "k", "o"), "max-norm": ("max_norm", "tab:orange", "s"),
            "marvell": ("Marvell (scale)", "tab:blue", "o"), "gradient-noise": ("iso noise (ratio)", "tab:red", "^")}


def summary(rows: list[dict]) -> dict[str, dict]:
    """defence -> mean and std over seeds of task accuracy and leak AUC (cells that finished)."""
    by: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("status", "ok") == "ok":
            by.setdefault(row["send-back"], []).append(row)
    out = {}
    for defence, cells in by.items():
        values = {k: [float(c[k]) for c in cells if c.get(k) not in (None, "")] for k in ("accuracy", "leak_auc")}
        out[defence] = {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
                        for k, v in values.items() if v}
    return out


def strength(defence: str) -> float:
    found = re.search(r"=([0-9.e+-]+)", defence)
    return float(found.group(1)) if found else math.nan


def draw(ax, table: dict[str, dict], attack: str) -> None:
    for family, (label, colour, marker) in FAMILIES.items():
        points = sorted((strength(d), s) for d, s in table.items() if d.split(":")[0] == family)
        if not points:
            continue
        xs = [s["accuracy"][0] for _, s in points]
        ys = [s["leak_auc"][0] for _, s in points]
        ax.errorbar(xs, ys, xerr=[s["accuracy"][1] for _, s in points], yerr=[s["leak_auc"][1] for _, s in points],
                    color=colour, marker=marker, lw=1.2, capsize=2, label=label)
        for (value, _), x, y in zip(points, xs, ys):
            if not math.isnan(value):
                ax.annotate(f"{value:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=colour)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="task accuracy (test)", ylabel=f"leak AUC of {attack} scoring", title=f"against {attack} scoring")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=Path, nargs=2, help="the norm and direction sweep directories")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "label-tradeoff.png")
    args = parser.parse_args()
    paths = [d / "results.csv" for d in args.sweeps] if args.sweeps else [RESULTS / f"{s}.csv" for s in SWEEPS]
    figure = Figure(figsize=(10, 4))
    for ax, path, attack in zip(figure.subplots(1, 2), paths, ("norm", "direction")):
        table = summary(read_csv(path))
        draw(ax, table, attack)
        print(f"\n{attack} scoring ({path}):\n| defence | task accuracy | leak AUC | seeds |\n|---|---|---|---|")
        for defence, s in sorted(table.items(), key=lambda kv: (kv[0].split(":")[0], strength(kv[0]))):
            print(f"| {defence} | {s['accuracy'][0]:.4f} ± {s['accuracy'][1]:.4f} | {s['leak_auc'][0]:.3f} ± "
                  f"{s['leak_auc'][1]:.3f} | {s['leak_auc'][2]} |")
    figure.suptitle("Send-back defences on binary mnist5k (digit 0 vs the rest): leak against utility, means over "
                    "seeds (bars: std)", fontsize=9)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=120, bbox_inches="tight")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

"""AWA's Figure 1 from a sweep's results: f(Q) of every Bayesian-optimisation trial and its running minimum.

    python scripts/figure_bo.py splitlab/results/awa-q.csv [--out docs/figures/awa-q-bo.png]

Reads the BO cells' `extras.bo.f_per_trial.N` columns (the sweep file names them under [report] curves) and
`extras.bo.random`, draws each seed's f(Q) per trial (points) and running minimum (line), with the boundary
between the random and the guided trials, and prints per seed the median f(Q) of the random and of the
guided trials and where the lowest f(Q) was found.
"""
from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from matplotlib.figure import Figure

PREFIX = "extras.bo.f_per_trial."


def trials(path: Path) -> dict[str, tuple[list[float], int]]:
    """seed -> (f(Q) per trial, the number of random trials), for every BO cell of the results file."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("status") == "ok" and r.get(PREFIX + "1") not in (None, "")]
    if not rows:
        raise SystemExit(f"{path}: no cell with {PREFIX}1 (name extras.bo.f_per_trial under [report] curves)")
    out = {}
    for r in rows:
        values = [float(r[k]) for k in sorted((k for k in r if k.startswith(PREFIX) and r[k] != ""),
                                              key=lambda k: int(k.rsplit(".", 1)[1]))]
        out[r["seed"]] = (values, int(float(r["extras.bo.random"])))
    return out


def running_min(values: list[float]) -> list[float]:
    best, out = float("inf"), []
    for v in values:
        best = min(best, v)
        out.append(best)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/figures/awa-q-bo.png"))
    args = parser.parse_args()
    runs = trials(args.results)
    figure = Figure(figsize=(5.2, 3.4))
    ax = figure.subplots()
    print("seed  random median  guided median  lowest at trial")
    for seed, (values, random) in sorted(runs.items(), key=lambda kv: int(kv[0])):
        x = range(1, len(values) + 1)
        line, = ax.plot(x, running_min(values), label=f"seed {seed}")
        ax.scatter(x, values, s=8, color=line.get_color(), alpha=0.6)
        print(f"{seed:>4}  {statistics.median(values[:random]):13.4f}  {statistics.median(values[random:]):13.4f}"
              f"  {values.index(min(values)) + 1:>15}")
    random = next(iter(runs.values()))[1]
    ax.axvline(random + 0.5, color="grey", linestyle=":", label=f"first {random} trials random")
    ax.set(xlabel="BO trial", ylabel="f(Q) (points) and its running minimum (lines)",
           title="AWA's Bayesian optimisation of Q, case (2, 2)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

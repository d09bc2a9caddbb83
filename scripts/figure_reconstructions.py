"""One figure of a sweep's reconstructions: each cell's reconstruction.png (its targets above its answer),
stacked, one row per setting at one seed, labelled with the setting and its PSNR / SSIM.

    python scripts/figure_reconstructions.py runs/sweep/fedleak-photos [--seed 0] [--out grid.png]

Settings are every swept value but the seed, in the order of the sweep's results.csv.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib.image as mpimg
from matplotlib.figure import Figure


def swept_keys(header: list[str]) -> list[str]:
    """results.csv puts the swept keys between `status` and `cell_seconds`."""
    return header[header.index("status") + 1:header.index("cell_seconds")]


def rows_at(sweep: Path, seed: str) -> tuple[list[str], list[dict]]:
    with open(sweep / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        keys = [k for k in swept_keys(reader.fieldnames or []) if k != "seed"]
        rows = [r for r in reader if r["status"] == "ok" and r.get("seed", seed) == seed
                and (sweep / r["dir"] / "reconstruction.png").is_file()]
    if not rows:
        raise SystemExit(f"{sweep}: no finished cell at seed {seed} with a reconstruction.png")
    return keys, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--out", type=Path, default=None, help="default: SWEEP/figures/reconstructions_seedN.png")
    args = parser.parse_args()
    keys, rows = rows_at(args.sweep, args.seed)
    images = [mpimg.imread(args.sweep / r["dir"] / "reconstruction.png") for r in rows]
    width = max(i.shape[1] for i in images)
    figure = Figure(figsize=(width / 100, sum(i.shape[0] for i in images) / 100 + 0.3 * len(images)))
    axes = figure.subplots(len(images), 1, squeeze=False)[:, 0]
    for ax, row, image in zip(axes, rows, images):
        ax.imshow(image)
        ax.set_axis_off()
        setting = ", ".join(f"{k} {row[k]}" for k in keys if row.get(k))
        scores = f"PSNR {float(row['psnr']):.2f} dB, SSIM {float(row['ssim']):.3f}" if row.get("psnr") else ""
        ax.set_title(f"{setting}: {scores} (seed {args.seed})", fontsize=8, loc="left")
    figure.tight_layout()
    out = args.out or args.sweep / "figures" / f"reconstructions_seed{args.seed}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    print(f"wrote {out} ({len(images)} settings)")


if __name__ == "__main__":
    main()

"""aggVFL and splitVFL with K feature parties over TCP against in process, on a tabular data set: for every
architecture, K and partition rule, one training run each way at a fixed seed, and whether their losses, accuracies
and the parties' weights agree bit for bit.

    python scripts/tabular_parity.py --dataset adult --parties 2,3,4 --partitions random,correlation --epochs 1
    python scripts/tabular_parity.py --dataset adult --archs tabular-embed,tabular-wide-deep --parties 3

Prints one row per case (and writes the runs under --out); exits 1 if any case differs.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from typer.testing import CliRunner

from splitlab.cli import app


def run(args: list[str], out: Path) -> tuple[list[dict], dict[str, torch.Tensor]]:
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    if result.exit_code != 0:
        raise SystemExit(f"{' '.join(args)} failed: {result.output.strip().splitlines()[-1]}")
    history = json.loads((out / "metrics.json").read_text())["history"]
    return history, torch.load(out / "checkpoint.pt", weights_only=False)["client"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult")
    parser.add_argument("--parties", default="2,3,4")
    parser.add_argument("--partitions", default="random,correlation")
    parser.add_argument("--aggregates", default="sum,concat")
    parser.add_argument("--archs", default="tabular-mlp", help="tabular architectures, comma-separated")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args()
    torch.set_num_threads(1)
    root = options.out or Path(tempfile.mkdtemp(prefix="tabular-parity-"))
    print("| arch | aggregate | K | partition | test accuracy (local) | test accuracy (tcp) | history bit-equal | "
          "weights bit-equal |\n|---|---|---|---|---|---|---|---|")
    failed = False
    cases = [(a, g, k, p) for a in options.archs.split(",") for g in options.aggregates.split(",")
             for k in map(int, options.parties.split(",")) for p in options.partitions.split(",")]
    for arch, aggregate, parties, partition in cases:
        args = ["train", "--dataset", options.dataset, "--arch", arch, "--cut-layer", "6",
                "--aggregate", aggregate, "--parties", str(parties), "--partition", partition, "--epochs",
                str(options.epochs), "--batch-size", str(options.batch_size), "--seed", str(options.seed),
                "--device", "cpu", "--json"]
        case = root / f"{arch}-{aggregate}-k{parties}-{partition}"
        (local_h, local_w), (tcp_h, tcp_w) = (run([*args, "--transport", t], case / t) for t in ("local", "tcp"))
        same_h = local_h == tcp_h
        same_w = local_w.keys() == tcp_w.keys() and all(torch.equal(local_w[k], tcp_w[k]) for k in local_w)
        failed |= not (same_h and same_w)
        print(f"| {arch} | {aggregate} | {parties} | {partition} | {local_h[-1]['test_accuracy']:.4f} | "
              f"{tcp_h[-1]['test_accuracy']:.4f} | {same_h} | {same_w} |", flush=True)
    print(f"runs under {root}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""TGIAs-RO's label step (Algorithm 1's Step I over the T = 10 temporal gradients) and GradInversion's rule on
the batches of the `tgias-labels-all` grid, without the image reconstruction its cells also run.

    python scripts/tgias_label_step.py run --index 458 509 --out labels.jsonl    # one JSON line per batch
    python scripts/tgias_label_step.py ship labels.jsonl [more.jsonl ...]         # into the shipped results

Each batch goes through the hfl experiment's own `prepare()` with the grid's settings, as its cell does (the
ConvNet at model seed 0, b = 8, the trace of `--observe rounds` for TGIAs-RO, the FedSGD upload for GI), then
runs the label step alone: `TGIAsRO.labels` (the labels the cell's attack would find before it reconstructs,
with the same seed) and GI's rule. The grid's cells add one round of image reconstruction whose images no claim
reads; about 75 CPU seconds a batch of the cell's cost is Step I, so this is the cheapest faithful way to run
it. `ship` adds a row per batch and rule to splitlab/results/tgias-labels-all.csv (batches it already holds are
left as they are) with the multiset label accuracy and the majority-class baseline, as the cells record them,
and names this command in the results' JSON.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import time
from pathlib import Path

import torch

from attacks.hfl.experiment import HFLConfig, prepare
from attacks.hfl.labels import yin_labels
from attacks.hfl.tgias.label_optimisation import LABEL_FEATURES
from attacks.metrics.scoring import label_accuracy, majority_baseline
from splitlab.claims.results import RESULTS, read_csv

SWEEP = "tgias-labels-all"
GRID = {"arch": "convnet", "batch_size": 8, "labels": "recovered", "iterations": 1, "seed": 0}
"""The grid's fixed settings (splitlab/sweeps/tgias-labels-all.toml)."""
RULES = {"tgias-ro": {"preset": "tgias-ro.paper", "observe": "rounds"},
         "gi": {"preset": "gi.quick", "observe": "fedsgd"}}


def label_step(index: int) -> list[dict]:
    """One record per rule for the batch of 8 images from `index`: the labels found, the true ones, the CPU time."""
    found = []
    for attack, settings in RULES.items():
        start = time.process_time()
        prepared = prepare(HFLConfig.of(attack=attack, index=index, **settings, **GRID))
        if attack == "gi":
            labels, rule = yin_labels(prepared.observation), "yin"
        else:
            labels, rule = prepared.attack.labels(prepared.observation, GRID["seed"])
        truth = prepared.truth.labels
        found.append({"index": index, "attack": attack, **settings, "images": prepared.images, "label_rule": rule,
                      "labels": sorted(labels.tolist()), "truth": sorted(truth.tolist()),
                      "label_accuracy": label_accuracy(labels, truth),
                      "majority": majority_baseline(truth.cpu())["label_accuracy"],
                      # GI's step takes about 0.03 CPU s (its rule alone under 1 ms): to 0.1 ms, not 0.1 s
                      "cpu_seconds": round(time.process_time() - start, 4)})
    return found


def row(record: dict, columns: list[str]) -> dict:
    """The record as a row of the grid's results, with the columns the cells write."""
    tgias = record["attack"] == "tgias-ro"
    values = {"cell": f"label-step-{record['index']}-{record['attack']}",
              "name": f"seed-0_index-{record['index']}_attack-{record['attack']}_preset-{record['preset']}_observe-"
                      f"{record['observe']}",
              "status": "ok", "seed": GRID["seed"], "index": record["index"], "attack": record["attack"],
              "preset": record["preset"], "observe": record["observe"], "cell_seconds": record["cpu_seconds"],
              "images": " ".join(map(str, record["images"])), "metrics.attack": record["attack"],
              "metrics.preset": record["preset"], "n_targets": GRID["batch_size"], "label_rule": record["label_rule"],
              "baselines.majority.label_accuracy": record["majority"], "label_accuracy": record["label_accuracy"],
              "extras.temporal": 10 if tgias else "", "extras.label_features": LABEL_FEATURES if tgias else "",
              "arch": GRID["arch"], "dataset": "mnist5k", "batch_size": GRID["batch_size"],
              "observation": record["observe"]}
    return {c: values.get(c, "") for c in columns}


def ship(records: list[dict], command: str) -> list[str]:
    """Add the records' rows to the shipped results (batches already there are kept); the names of those added."""
    csv_path, meta_path = RESULTS / f"{SWEEP}.csv", RESULTS / f"{SWEEP}.json"
    table = read_csv(csv_path)
    columns = list(table[0])
    held = {(r["index"], r["attack"]) for r in table}
    added = [row(r, columns) for r in records if (str(r["index"]), r["attack"]) not in held]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table + added)
    csv_path.write_text(buffer.getvalue())
    meta = json.loads(meta_path.read_text())
    meta["cells"] = len(table) + len(added)
    # The sweep's own record counts only the cells `splitlab sweep` ran; say where the rest come from.
    meta["cells_from"] = {"sweep": meta["sweep_record"]["cells"],
                          "label_step": sum(e["cells"] for e in meta.get("label_step", [])) + len(added)}
    meta.setdefault("label_step", []).append({
        "command": command, "rows": [r["name"] for r in added], "cells": len(added),
        "shipped": time.strftime("%Y-%m-%d"), "cpu_seconds": round(sum(float(r["cell_seconds"]) for r in added), 4),
        "what": "the label step alone (Step I and GI's rule), without the image reconstruction; image metrics "
                "left empty"})
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return [r["name"] for r in added]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="run the label step on batches of the grid")
    run.add_argument("--index", type=int, nargs="+", required=True)
    run.add_argument("--out", type=Path, required=True, help="JSON lines, one per batch and rule (appended)")
    add = sub.add_parser("ship", help="add the records to splitlab/results/tgias-labels-all.csv")
    add.add_argument("records", type=Path, nargs="+")
    args = parser.parse_args()
    if args.what == "run":
        torch.set_num_threads(1)
        for index in args.index:
            for record in label_step(index):
                print(json.dumps(record), flush=True)
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(record) + "\n")
        return
    records = [json.loads(line) for path in args.records for line in path.read_text().splitlines() if line]
    indices = " ".join(sorted({str(r["index"]) for r in records}, key=int))
    for name in ship(records, f"python scripts/tgias_label_step.py run --index {indices} --out F, then ship F"):
        print(f"added {name}")


if __name__ == "__main__":
    main()

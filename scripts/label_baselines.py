"""Add the majority-class baseline to shipped HFL results whose cells inferred their labels.

    python scripts/label_baselines.py fedleak-labels-distinct tgias-labels-all ...

Cells scored before `attacks.metrics.scoring` recorded `baselines.majority` for an image attack that infers
its labels lack it. It depends only on the batch's true labels, so it is computed from the images each cell
attacked (its `images` column, or the batch of `batch_size` from `index` for results written before that
column) and the dataset's labels; no attack runs. The results file gains `baselines.majority.label_accuracy`
on those rows, and its provenance JSON says what was added and how.
"""
from __future__ import annotations

import csv
import io
import json
import sys
import time

import torch

from attacks.metrics.scoring import majority_baseline
from splitlab.claims.results import RESULTS, read_csv
from vfl import data as datasets

COLUMN = "baselines.majority.label_accuracy"


def _indices(row: dict, n: int, shuffled: bool) -> list[int]:
    """The train-split indices the cell attacked: its `images`, else `batch_size` from `index` (0 where the
    grid left it), in the split's order as stored, or shuffled by the seed where the grid drew by seed
    (`attacks.hfl.experiment.image_order`)."""
    if row.get("images"):
        return [int(i) for i in row["images"].split()]
    start, batch = int(float(row.get("index") or 0)), int(float(row["batch_size"]))
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(row["seed"]))) if shuffled \
        else torch.arange(n)
    return order[start:start + batch].tolist()


def backfill(name: str) -> int:
    path = RESULTS / f"{name}.csv"
    rows = read_csv(path)
    labels = {d: datasets.load(d, "train").labels for d in {r["dataset"] for r in rows}}
    shuffled = "--images seed" in json.loads(path.with_suffix(".json").read_text()).get("sweep_record", {}).get(
        "command_line", "")
    done = 0
    for row in rows:
        if row.get("label_accuracy") in (None, "") or row.get("label_rule") in (None, "", "known"):
            row.setdefault(COLUMN, "")
            continue
        y = labels[row["dataset"]][torch.tensor(_indices(row, len(labels[row["dataset"]]), shuffled))]
        row[COLUMN] = repr(majority_baseline(y)["label_accuracy"])
        done += 1
    fields = list(rows[0]) + ([COLUMN] if COLUMN not in rows[0] else [])
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue())
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta["backfilled"] = {COLUMN: f"added {time.strftime('%Y-%m-%d')} by scripts/label_baselines.py from the cells' "
                                  "images and the dataset's labels (no attack re-run), on the rows whose attack "
                                  f"inferred its labels ({done} of {len(rows)})"}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return done


if __name__ == "__main__":
    for sweep in sys.argv[1:]:
        print(sweep, backfill(sweep))

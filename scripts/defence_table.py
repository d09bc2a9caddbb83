"""One table of the field's defences from their shipped grids: each defence against the attack it was made against,
without and with it, beside the trivial baseline and the defence's cost in task accuracy.

    python scripts/defence_table.py > table.md

Reads splitlab/results/field-defences-*.csv (written by `splitlab sweep --paper NAME`, every seed its own
train/test draw); prints mean ± sample standard deviation over the seeds of each arm.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from splitlab.claims.results import RESULTS, read_csv
from splitlab.claims.stats import value_of


@dataclass(frozen=True)
class Grid:
    name: str
    axis: str
    attack: str
    metrics: tuple[tuple[str, str], ...]
    """(column, words) of the attack's numbers, the first the one that decides."""
    baselines: tuple[tuple[str, str], ...]
    """(column, words) of the trivial answers beside them."""
    cost: str | None = None
    """The grid whose task accuracy is the defence's cost (None: this one)."""


GRIDS = (
    Grid("field-defences-labels", "send-back", "label-norm (wdbc)",
         (("leak_auc", "leak AUC"), ("label_accuracy", "label acc.")),
         (("baselines.majority.leak_auc", "chance AUC"), ("baselines.majority.label_accuracy", "majority acc."))),
    Grid("field-defences-nopeek", "defence", "unsplit (mnist5k)",
         (("image_mse", "image MSE"), ("psnr", "PSNR dB")),
         (("baselines.mean.image_mse", "mean image MSE"), ("baselines.zero.image_mse", "zero image MSE"))),
    Grid("field-defences-splitguard", "defence", "fsha (mnist5k)",
         (("image_mse", "image MSE"), ("defence_report.splitguard_detected", "flagged")),
         (("baselines.mean.image_mse", "mean image MSE"), ("baselines.zero.image_mse", "zero image MSE")),
         cost="field-defences-splitguard-honest"),
)


def _arms(grid: str, axis: str) -> dict[str, list[dict]]:
    arms: dict[str, list[dict]] = {}
    for row in read_csv(RESULTS / f"{grid}.csv"):
        if row.get("status") == "ok":
            arms.setdefault(row[axis], []).append(row)
    return arms


def _stat(rows: list[dict], column: str) -> str:
    found = [v for v in (value_of(r, column) for r in rows) if v is not None]
    if not found:
        return "–"
    mean = statistics.fmean(found)
    return f"{mean:.3f} ± {statistics.stdev(found):.3f}" if len(found) > 1 else f"{mean:.3f}"


def _numbers(rows: list[dict], pairs) -> str:
    return "; ".join(f"{words} {_stat(rows, column)}" for column, words in pairs)


def _cost(none: list[dict], defended: list[dict]) -> str:
    out = f"task acc. {_stat(none, 'accuracy')} → {_stat(defended, 'accuracy')}"
    if any(value_of(r, "task_auc") is not None for r in defended):
        out += f" (task AUC {_stat(none, 'task_auc')} → {_stat(defended, 'task_auc')})"
    if any(value_of(r, "defence_report.splitguard_detected") is not None for r in defended):
        out += f"; honest runs flagged {_stat(defended, 'defence_report.splitguard_detected')}"
    return out


def _cost_rows(grid: Grid, arm: str) -> tuple[list[dict], list[dict]]:
    if grid.cost is None:
        arms = _arms(grid.name, grid.axis)
        return arms["none"], arms[arm]
    arms = _arms(grid.cost, grid.axis)
    honest = next(a for a in arms if a != "none" and arm.startswith(a))     # the same defence, no stopping
    return arms["none"], arms[honest]


def table() -> str:
    lines = ["| defence | attack | undefended | defended | trivial baseline | task cost | n seeds |",
             "|---|---|---|---|---|---|---|"]
    for grid in GRIDS:
        arms = _arms(grid.name, grid.axis)
        for arm, rows in arms.items():
            if arm == "none":
                continue
            none = arms["none"]
            lines.append(f"| `{arm}` | {grid.attack} | {_numbers(none, grid.metrics)} | "
                         f"{_numbers(rows, grid.metrics)} | {_numbers(none + rows, grid.baselines)} | "
                         f"{_cost(*_cost_rows(grid, arm))} | {len({r['seed'] for r in rows})} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())

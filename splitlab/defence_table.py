"""One table of the catalogue's defences read from the shipped grids (splitlab/results/*.csv, nothing recomputed):
each defence against the attack it was made against, without and with it, beside the trivial baselines and the
defence's cost in task accuracy, with the command that gives each row.

The field-defences-* grids draw every seed's own train/test split (`data-draw = "seed"`), so their intervals vary
the data; a defence measured only on an older grid is listed apart, saying that its seeds vary the model and the
targets but not the split; a defence no shipped grid measures is listed with the command that would.
Numbers: mean [95% t-interval] over the seeds (`splitlab.claims.stats.interval`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from splitlab.claims.results import RESULTS, provenance, read_csv
from splitlab.claims.stats import interval, value_of
from splitlab.defence_matrix import pair

__all__ = ["Grid", "GRIDS", "table"]

LEAK = (("leak_auc", "leak AUC"), ("label_accuracy", "label acc."))
LEAK_BASELINES = (("baselines.majority.leak_auc", "chance AUC"),
                  ("baselines.majority.label_accuracy", "majority acc."))
IMAGES = (("image_mse", "MSE"), ("psnr", "PSNR dB"))
IMAGE_BASELINES = (("baselines.mean.image_mse", "mean image MSE"), ("baselines.zero.image_mse", "zero image MSE"))


@dataclass(frozen=True)
class Grid:
    name: str
    axis: str
    """The swept key that names the defence (its `none` arm is the undefended run)."""
    attack: str
    metrics: tuple[tuple[str, str], ...]
    """(column, words) of the attack's numbers."""
    baselines: tuple[tuple[str, str], ...]
    """(column, words) of the trivial answers beside them."""
    only: dict[str, str] = field(default_factory=dict)
    """Other swept keys held at one value (the grid's other axes)."""
    arms: tuple[str, ...] = ()
    """The defended arms to show (empty: every one)."""
    cost: str | None = ""
    """The grid whose task accuracy is the defence's cost ("": this one; None: the attack trains no task)."""


GRIDS = (
    Grid("field-defences-labels", "send-back", "label-norm, binary mnist5k", LEAK, LEAK_BASELINES),
    Grid("field-defences-nopeek", "defence", "unsplit, mnist5k", IMAGES, IMAGE_BASELINES),
    Grid("field-defences-splitguard", "defence", "fsha, mnist5k",
         (("image_mse", "MSE"), ("defence_report.splitguard_detected", "flagged"),
          ("defence_report.splitguard_first_detection_round", "round")),
         IMAGE_BASELINES, cost="field-defences-splitguard-honest"),
)
"""The field-defences grids: every seed its own data draw."""

OLDER = (
    Grid("jast-cut-layers", "defence", "unsplit (per-target clone), mnist5k, CNN cut 1", IMAGES, IMAGE_BASELINES,
         only={"cut-layer": "1"}),
    Grid("tgias-defences", "defence", "tgias-ro on uploads, mnist5k, 10 rounds", IMAGES, IMAGE_BASELINES,
         only={"temporal": "10"}, cost=None),
    Grid("fedleak-defences", "defence", "fedleak on one upload, mnist5k", IMAGES, IMAGE_BASELINES,
         arms=("upload-dp:epsilon=100", "quant:bits=1"), cost=None),
)
"""Defences the field-defences grids do not run, as an older shipped grid measures them (the fixed split)."""

UNMEASURED = {"orthogonal": "unsplit", "semi-orthogonal": "unsplit", "patch-orthogonal": "unsplit",
              "received-gradient-noise": "fsha"}
"""Catalogue defences no shipped grid runs, each with the attack it is made against (the command is the matrix's)."""

BOUNDED = ("leak_auc", "label_accuracy", "accuracy", "task_auc")
"""Metrics in [0, 1]: their intervals are cut to it."""


def _rows(grid: str) -> list[dict]:
    return [r for r in read_csv(RESULTS / f"{grid}.csv") if r.get("status") == "ok"]


def _arms(grid: Grid, name: str | None = None) -> dict[str, list[dict]]:
    arms: dict[str, list[dict]] = {}
    for row in _rows(name or grid.name):
        if all(str(row.get(k)) == v for k, v in grid.only.items()):
            arms.setdefault(str(row[grid.axis]), []).append(row)
    return arms


def _stat(rows: list[dict], column: str) -> str:
    found = [v for v in (value_of(r, column) for r in rows) if v is not None]
    if not found:
        return "-"
    if all(v in (0.0, 1.0) for v in found) and column.startswith("defence_report."):   # a yes or no per run
        return f"{int(sum(found))}/{len(found)}"
    mean, low, high = interval(found)
    if column in BOUNDED:
        low, high = max(low, 0.0), min(high, 1.0)
    return f"{mean:.3g}" if low == high else f"{mean:.3g} [{low:.3g}, {high:.3g}]"


def _numbers(rows: list[dict], pairs) -> str:
    return "; ".join(f"{words} {_stat(rows, column)}" for column, words in pairs)


def _cost(grid: Grid, arm: str, arms: dict[str, list[dict]]) -> str:
    if grid.cost is None:
        return "no task trained (an attack on uploads)"
    own = grid.cost == ""
    cost_arms = arms if own else _arms(grid, grid.cost)
    # the cost grid runs the same defence without stopping at an alarm
    defended = cost_arms.get(arm) or next((rows for a, rows in cost_arms.items() if a != "none" and arm.startswith(a)),
                                          [])
    out = f"task acc. {_stat(cost_arms['none'], 'accuracy')} → {_stat(defended, 'accuracy')}"
    if any(value_of(r, "task_auc") is not None for r in defended):
        out += f"; task AUC {_stat(cost_arms['none'], 'task_auc')} → {_stat(defended, 'task_auc')}"
    if not own:
        out += f" (honest runs of {grid.cost}; flagged {_stat(defended, 'defence_report.splitguard_detected')})"
    return out


def _command(grid: Grid, arm: str, rows: list[dict]) -> str:
    """Each cell's command line (the grid's fixed settings, then its swept ones), seeds as run."""
    base = provenance(grid.name)["sweep_record"]["command_line"]
    swept = {**grid.only, **({"data-draw": "seed"} if _draw(rows) == "its own draw" else {}), grid.axis: arm}
    seeds = ", ".join(sorted({str(r["seed"]) for r in rows}, key=int))
    return f"`{base} " + " ".join(f"--{k} {v}" for k, v in swept.items()) + f" --seed S` (S = {seeds})"


def _draw(rows: list[dict]) -> str:
    return "its own draw" if all(r.get("data-draw") == "seed" for r in rows) else "the fixed split"


def _lines(grids: tuple[Grid, ...]) -> list[str]:
    lines = ["| defence | attack | undefended | defended | trivial baselines | task cost | seeds (data) | command |",
             "|---|---|---|---|---|---|---|---|"]
    for grid in grids:
        if provenance(grid.name) is None:
            continue
        arms = _arms(grid)
        none = arms.get("none", [])
        for arm, rows in arms.items():
            if arm == "none" or (grid.arms and arm not in grid.arms):
                continue
            seeds = sorted({int(r["seed"]) for r in rows})
            lines.append(f"| `{arm}` | {grid.attack} | {_numbers(none, grid.metrics)} | "
                         f"{_numbers(rows, grid.metrics)} | {_numbers(none + rows, grid.baselines)} | "
                         f"{_cost(grid, arm, arms)} | {len(seeds)} ({_draw(rows + none)}) | {_command(grid, arm, rows)} |")
    return lines


def table() -> str:
    """The markdown: the field-defences grids, the older grids, and what no grid measures."""
    lines = ["Each seed of the field-defences grids trains on its own stratified train/test draw of the data "
             "(`--data-draw seed`); numbers are the mean and its 95% t-interval over the seeds; a label attack's "
             "trivial baseline is chance (AUC 0.5) and the majority class, an image attack's the mean and the zero "
             "image.", "", *_lines(GRIDS), "",
             "Catalogue defences the field-defences grids do not run, as an older shipped grid measures them: its "
             "seeds vary the model and the targets, not the train/test split.", "", *_lines(OLDER), "",
             "No shipped grid runs these against the attack they are made against (the command that would, seeds "
             "0-2):", ""]
    for name, attack in UNMEASURED.items():
        how = pair(attack, name).how
        lines.append(f"- `{name}` against {attack}: `splitlab attack {attack} {how} --data-draw seed --seed S`")
    return "\n".join(lines)

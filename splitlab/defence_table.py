"""One table of the catalogue's defences read from the shipped results (splitlab/results/, nothing recomputed):
each defence against the attack it was made against, without and with it, beside the trivial baselines and the
defence's cost in task accuracy, with the command that gives each row.

Two sources, both drawing every seed's own train/test split (so the intervals vary the data): the field-defences-*
grids (`data-draw = "seed"`), and the shipped CPU matrix (splitlab/results/matrix-cpu/seeds.csv, per cell) for the
defences it runs against the attacks they are made against. A row whose undefended attack is not above its trivial
baseline says so: it measures nothing about the defence. A defence neither source measures is listed with the
reason and the command that would.
Numbers: mean [95% t-interval] over the seeds (`splitlab.claims.stats.interval`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from splitlab.claims.results import RESULTS, provenance, read_csv
from splitlab.claims.stats import beats_trivial, interval, value_of
from splitlab.defence_matrix import pair
from splitlab.matrix_grid import load_matrix
from splitlab.matrix_score import clear_of_trivial
from vfl.fsha_victim import RENAMED

__all__ = ["Grid", "GRIDS", "MatrixRows", "MATRIX", "NOT_MEASURED", "table"]

LEAK = (("leak_auc", "leak AUC"), ("label_accuracy", "label acc."))
LEAK_BASELINES = (("baselines.majority.leak_auc", "chance AUC"),
                  ("baselines.majority.label_accuracy", "majority acc."))
IMAGES = (("image_mse", "MSE"), ("psnr", "PSNR dB"), ("ssim", "SSIM"))
IMAGE_BASELINES = (("baselines.mean.image_mse", "mean image MSE"), ("baselines.zero.image_mse", "zero image MSE"),
                   ("baselines.mean.ssim", "mean image SSIM"), ("baselines.zero.ssim", "zero image SSIM"))
UPLOAD_IMAGES = (("psnr", "PSNR dB"), ("label_accuracy", "label acc."))
UPLOAD_BASELINES = (("baselines.zero.psnr", "zero image PSNR dB"), ("baselines.mean.psnr", "mean image PSNR dB"))


@dataclass(frozen=True)
class Score:
    """The attack's headline metric and its trivial baselines: what "the undefended attack beats trivial" means."""
    metric: str
    baselines: tuple[str, ...]
    """The trivial answers' columns; the strongest of them in each row is the one to beat."""
    higher: bool = True
    """Whether a higher value is a stronger attack (PSNR, AUC) or a lower one (MSE)."""
    two_sided: bool = False
    """Whether the attacker may flip its rule (a leak AUC below chance leaks as much)."""


AUC_SCORE = (Score("leak_auc", ("baselines.majority.leak_auc",), two_sided=True),)
IMAGE_SCORE = (Score("image_mse", ("baselines.mean.image_mse", "baselines.zero.image_mse"), higher=False),
               Score("ssim", ("baselines.mean.ssim", "baselines.zero.ssim")))
"""A reconstruction is judged in MSE and SSIM both: the zero image's SSIM is high on digits (their black
background), its MSE is not, so an attack can beat the trivial images in one and not in the other."""
UPLOAD_SCORE = (Score("psnr", ("baselines.zero.psnr", "baselines.mean.psnr")),
                Score("ssim", ("baselines.mean.ssim", "baselines.zero.ssim")))


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
    score: tuple[Score, ...]
    """The metrics in which the undefended attack must beat its trivial baselines for the row to measure."""
    only: dict[str, str] = field(default_factory=dict)
    """Other swept keys held at one value (the grid's other axes)."""
    arms: tuple[str, ...] = ()
    """The defended arms to show (empty: every one)."""
    cost: str | None = ""
    """The grid whose task accuracy is the defence's cost ("": this one; None: the attack trains no task)."""


GRIDS = (
    Grid("field-defences-labels", "send-back", "label-norm, binary mnist5k", LEAK, LEAK_BASELINES, AUC_SCORE),
    Grid("field-defences-nopeek", "defence", "unsplit, mnist5k, SmallMLP cut 1", IMAGES, IMAGE_BASELINES, IMAGE_SCORE),
    Grid("field-defences-orthogonal", "defence", "unsplit, mnist5k, CNN cut 1 (jast preset)",
         IMAGES, IMAGE_BASELINES, IMAGE_SCORE),
    Grid("field-defences-splitguard", "defence", "fsha, mnist5k",
         (("image_mse", "MSE"), ("ssim", "SSIM"), ("defence_report.splitguard_detected", "flagged"),
          ("defence_report.splitguard_first_detection_round", "round")),
         IMAGE_BASELINES, IMAGE_SCORE, cost="field-defences-splitguard-honest"),
    Grid("field-defences-uploads", "defence", "dlg (quick) on one upload, mnist5k, LeNet", UPLOAD_IMAGES,
         UPLOAD_BASELINES, UPLOAD_SCORE, cost=None),
)
"""The field-defences grids: every seed its own data draw."""

MATRIX_NAME = "cpu"
MATRIX_SEEDS = RESULTS / "matrix-cpu" / "seeds.csv"
LABEL_ATTACKS = ("label-norm", "label-direction", "label-direct", "label-completion", "label-active", "label-unsplit")


@dataclass(frozen=True)
class MatrixRows:
    """A defence as the CPU matrix measures it: against these attacks, at these of its arms, on every task."""
    defence: str
    attacks: tuple[str, ...]
    arms: tuple[str, ...]
    """The matrix's arm labels to show (`received-gradient-noise:sigma=0.1`)."""


MATRIX = (
    MatrixRows("orthogonal", ("unsplit",), ("orthogonal",)),
    MatrixRows("input-dp", ("unsplit",), ("input-dp:epsilon=10.0", "input-dp:epsilon=6.0", "input-dp:epsilon=1.0")),
    MatrixRows("received-gradient-noise", LABEL_ATTACKS, ("received-gradient-noise:sigma=0.1",)),
)
"""The defences read from the CPU matrix (the strongest arm where it runs three strengths against six attacks)."""

NOT_MEASURED = {
    "semi-orthogonal": ("unsplit", "it changes the input size, so only a dense client (mlp, small-mlp) takes it, and "
                        "there UnSplit is no better than the mean image at the lab's CPU sizes (shipped jast-table1, "
                        "mlp: MSE equal to the mean image's; jast-small-mlp-unsplit: about twice it), so a row would "
                        "measure nothing"),
}
"""Catalogue defences no shipped result measures against the attack they are made against: (attack, why)."""

BOUNDED = ("leak_auc", "label_accuracy", "accuracy", "task_auc", "ssim")
"""Metrics in [0, 1]: their intervals are cut to it."""

NOTHING = " (undefended: not above its trivial baseline, so this row measures nothing about the defence)"


def _flag(failed: list[str], checked: int) -> str:
    """What a row says when its undefended attack is not clearly above its trivial baselines in some metric."""
    if not failed:
        return ""
    if len(failed) == checked:
        return NOTHING
    return f" (undefended: not clearly above its trivial baseline in {' or '.join(failed)})"


def _rows(grid: str) -> list[dict]:
    return [r for r in read_csv(RESULTS / f"{grid}.csv") if r.get("status") == "ok"]


def _arms(grid: Grid, name: str | None = None) -> dict[str, list[dict]]:
    arms: dict[str, list[dict]] = {}
    for row in _rows(name or grid.name):
        if all(str(row.get(k)) == v for k, v in grid.only.items()):
            arms.setdefault(str(row[grid.axis]), []).append(row)
    return arms


def _stat_of(found: list[float], column: str) -> str:
    if not found:
        return "-"
    if all(v in (0.0, 1.0) for v in found) and column.startswith("defence_report."):   # a yes or no per run
        return f"{int(sum(found))}/{len(found)}"
    mean, low, high = interval(found)
    if column in BOUNDED:
        low, high = max(low, 0.0), min(high, 1.0)
    return f"{mean:.3g}" if low == high else f"{mean:.3g} [{low:.3g}, {high:.3g}]"


def _stat(rows: list[dict], column: str) -> str:
    return _stat_of([v for v in (value_of(r, column) for r in rows) if v is not None], column)


def _numbers(rows: list[dict], pairs) -> str:
    return "; ".join(f"{words} {_stat(rows, column)}" for column, words in pairs)


def _not_beaten(rows: list[dict], scores: tuple[Score, ...]) -> str:
    failed = [s.metric.replace("image_mse", "MSE").replace("leak_auc", "leak AUC").replace("ssim", "SSIM")
              .replace("psnr", "PSNR") for s in scores if not _grid_beats(rows, s)]
    return _flag(failed, len(scores))


def _grid_beats(rows: list[dict], score: Score) -> bool:
    pick = max if score.higher else min
    paired = [(value_of(r, score.metric), [value_of(r, b) for b in score.baselines]) for r in rows]
    paired = [(v, pick(t for t in ts if t is not None)) for v, ts in paired
              if v is not None and any(t is not None for t in ts)]
    return beats_trivial([v for v, _ in paired], [t for _, t in paired], score.higher, score.two_sided)


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
    base = _current_spelling(provenance(grid.name)["sweep_record"]["command_line"])
    swept = {**grid.only, **({"data-draw": "seed"} if _draw(rows) == "its own draw" else {}), grid.axis: arm}
    return f"`{base} " + " ".join(f"--{k} {v}" for k, v in swept.items()) + f" --seed S` (S = {_seeds(rows)})"


def _current_spelling(command: str) -> str:
    """A shipped FSHA record's command with FSHA's earlier option names (`--level`, `--lr-client`) in today's
    spelling: the same run, in the words the command now documents. Other commands never took those names."""
    if not command.startswith("splitlab attack fsha "):
        return command
    for old, new in RENAMED.items():
        command = command.replace(f"--{old.replace('_', '-')} ", f"--{new.replace('_', '-')} ")
    return command


def _seeds(rows: list[dict]) -> str:
    return ", ".join(sorted({str(r["seed"]) for r in rows}, key=int))


def _draw(rows: list[dict]) -> str:
    return "its own draw" if all(r.get("data-draw") == "seed" for r in rows) else "the fixed split"


HEADER = ["| defence | attack | undefended | defended | trivial baselines | task cost | seeds (data) | command |",
          "|---|---|---|---|---|---|---|---|"]


def _lines(grids: tuple[Grid, ...]) -> list[str]:
    lines = list(HEADER)
    for grid in grids:
        if provenance(grid.name) is None:
            continue
        arms = _arms(grid)
        none = arms.get("none", [])
        nothing = _not_beaten(none, grid.score)
        for arm, rows in arms.items():
            if arm == "none" or (grid.arms and arm not in grid.arms):
                continue
            seeds = sorted({int(r["seed"]) for r in rows})
            # a trivial baseline depends on the seed's data only: read once a seed, from the undefended arm (the
            # defended arm's copy of it would count each draw twice and narrow the interval)
            lines.append(f"| `{arm}` | {grid.attack} | {_numbers(none, grid.metrics)}{nothing} | "
                         f"{_numbers(rows, grid.metrics)} | {_numbers(none, grid.baselines)} | "
                         f"{_cost(grid, arm, arms)} | {len(seeds)} ({_draw(rows + none)}) | {_command(grid, arm, rows)} |")
    return lines


def _matrix_cells() -> dict[tuple[str, str, str], list[dict]]:
    cells: dict[tuple[str, str, str], list[dict]] = {}
    for row in read_csv(MATRIX_SEEDS) if MATRIX_SEEDS.is_file() else []:
        cells.setdefault((row["task"], row["attack"], row["arm"]), []).append(row)
    return cells


def _matrix_command(task: str, attack: str, label: str, rows: list[dict]) -> str:
    """The matrix cell's own attack command (the task's options, the attack's, the arm's), seeds as run."""
    matrix = load_matrix(None, MATRIX_NAME)
    arm = next(a for a in matrix.task_arms(task, attack) if a.label == label)
    options = {**matrix.task_options(task, attack), **matrix.arm_options(task, attack, arm)}
    flags = " ".join(f"--{k} {v}" for k, v in options.items() if v != "none")
    return f"`splitlab attack {attack} {flags} --seed S` (S = {_seeds(rows)})"


def _matrix_seeds(rows: list[dict], none: list[dict]) -> str:
    failed = len(none) - len(rows)                      # seeds.csv holds the finished cells only
    return f"{len(rows)} (its own draw{f'; {failed} cell failed' if failed > 0 else ''})"


def _matrix_lines() -> list[str]:
    cells = _matrix_cells()
    lines = list(HEADER)
    tasks = list(dict.fromkeys(task for task, _, _ in cells))
    for spec in MATRIX:
        for task in tasks:
            for attack in spec.attacks:
                none = cells.get((task, attack, "no defence"), [])
                for label in spec.arms:
                    rows = cells.get((task, attack, label))
                    if not rows or not none:
                        continue
                    metric = rows[0]["metric"]
                    words = "leak AUC" if metric == "leak_auc" else metric.upper()
                    ap = lambda rs: [float(r["ap"]) for r in rs]                                   # noqa: E731
                    beats = clear_of_trivial(metric, ap(none), [float(r["ap_star"]) for r in none])
                    trivial = "chance AUC" if metric == "leak_auc" else "strongest trivial image SSIM"
                    cost = (f"task acc. {_stat_of([float(r['mp']) for r in none], 'accuracy')} → "
                            f"{_stat_of([float(r['mp']) for r in rows], 'accuracy')}")
                    lines.append(
                        f"| `{label}` | {attack}, binary {task} (CPU matrix) | {words} "
                        f"{_stat_of(ap(none), metric)}{'' if beats else NOTHING} | {words} {_stat_of(ap(rows), metric)}"
                        f" | {trivial} {_stat_of([float(r['ap_star']) for r in none], metric)} | {cost} | "
                        f"{_matrix_seeds(rows, none)} | {_matrix_command(task, attack, label, rows)} |")
    return lines


def table() -> str:
    """The markdown: the field-defences grids, the CPU matrix's rows, and what no shipped result measures."""
    lines = ["Each seed of the field-defences grids trains on its own stratified train/test draw of the data "
             "(`--data-draw seed`); numbers are the mean and its 95% t-interval over the seeds; a label attack's "
             "trivial baseline is chance (AUC 0.5) and the majority class, an image attack's the mean and the zero "
             "image. A row whose undefended attack is not above its strongest trivial baseline (the 95% interval "
             "of the per-seed gap includes 0) says so.", "", *_lines(GRIDS), "",
             "From the shipped CPU matrix (splitlab/results/matrix-cpu/seeds.csv: `splitlab matrix --grid cpu`, "
             "each seed its own draw: mnist5k by `--data-draw seed`, wdbc as every tabular set), the defences it "
             "runs against the attacks they are made against: the orthogonal transform and DP input noise against "
             "UnSplit (the CNN cut 1, two epochs, 100 rounds), received-gradient noise at its strongest sigma "
             "against the six label attacks (the SmallMLP cut 1, two epochs, on mnist5k; the tabular MLP, ten "
             "epochs, on wdbc). The attack's number is its matrix metric (leak AUC, or SSIM for UnSplit); the task "
             "cost the task accuracy.", "", *_matrix_lines(), "",
             "Not measured against the attack they are made against, with why (and the command that would, seeds "
             "0-2):", ""]
    for name, (attack, why) in NOT_MEASURED.items():
        how = pair(attack, name).how
        lines.append(f"- `{name}` against {attack}: {why}. `splitlab attack {attack} {how} --data-draw seed "
                     "--seed S`")
    return "\n".join(lines)

"""The matrix's report, recomputed from the cell files: matrix.csv (one row per task, attack and arm: attack and task
metric over seeds, DCS with its interval, cost), scores.csv (per task and arm: T-DCS per attack type, C-DCS, the
shared rank, cost), report.md, and one privacy-utility frontier per task and attack (frontier-TASK-ATTACK.png)."""
from __future__ import annotations

import csv
import io
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Optional

from splitlab.matrix_grid import NONE, Matrix
from splitlab.matrix_score import ATTACK_METRICS, RANGES, TASK_METRIC, Interval, attack_metric, clear_of_trivial, dcs, \
    interval, scored_ap, shared_ranks, trivial, worst_ranking
from splitlab.sweep_report import collect
from vfl.runs import atomic_write_bytes, atomic_write_text

__all__ = ["Row", "rows_of", "score", "unjudged", "write_report"]


class Row(dict):
    """One finished cell: task, attack, arm, seed, ap, ap_star, mp, metric, seconds, bytes."""


def _bytes(metrics: dict[str, Any]) -> Optional[float]:
    """The bytes the cell's victim sent across the cut in training, both ways (`cut_bytes` in its metrics: the
    rounds' activations and cut gradients, the evaluations' queries and predictions); None where not recorded."""
    found = [metrics.get(f"cut_bytes.{sender}") for sender in ("client", "server")]
    return float(sum(found)) if all(isinstance(v, (int, float)) for v in found) else None


def rows_of(matrix: Matrix, out: Path) -> tuple[list[Row], list[dict]]:
    """The finished cells' rows, and the failed cells (task, attack, arm, seed and the first line of the error)."""
    rows, failed = [], []
    for (task, attack), sweep in matrix.sweeps().items():
        cells = sweep.cells()
        for cell, found in zip(cells, collect(cells, out)):
            arm, seed = matrix.arm_of(task, attack, cell), dict(cell.swept)["seed"]
            if found["status"] == "failed":
                failed.append({"task": task, "attack": attack, "arm": arm.label, "seed": seed,
                               "error": (found["error"] or "").strip().split("\n")[0]})
            if found["status"] != "ok":
                continue
            metrics = found["metrics"]
            metric = attack_metric(metrics)
            rows.append(Row(task=task, attack=attack, arm=arm, seed=seed,
                            metric=metric, ap=metrics.get(metric) if metric else None,
                            ap_star=trivial(metrics, metric) if metric else None, mp=metrics.get(TASK_METRIC),
                            seconds=found["cell_seconds"], bytes=_bytes(metrics)))
    return rows, failed


def unjudged(rows: list[Row]) -> list[dict]:
    """The (task, attack) pairs whose undefended attack, over two seeds or more, is not clearly away from its trivial
    baseline (`clear_of_trivial`, the defence table's rule): no arm has a leak to stop there, so their DCS mix the
    task cost with the attack's noise. One seed gives no interval, and nothing is said of it."""
    out = []
    for task, attack in dict.fromkeys((r["task"], r["attack"]) for r in rows):
        none = [r for r in rows if (r["task"], r["attack"]) == (task, attack) and r["arm"] == NONE
                and None not in (r["ap"], r["ap_star"]) and math.isfinite(r["ap"])]
        if len(none) >= 2 and not clear_of_trivial(none[0]["metric"], [r["ap"] for r in none],
                                                   [r["ap_star"] for r in none]):
            out.append({"task": task, "attack": attack, "metric": none[0]["metric"],
                        "undefended": interval((r["ap"] for r in none), within=RANGES.get(none[0]["metric"])),
                        "trivial": _mean(r["ap_star"] for r in none), "seeds": len(none)})
    return out


def _mean(values) -> Optional[float]:
    xs = [v for v in values if v is not None]
    return statistics.fmean(xs) if xs else None


def score(matrix: Matrix, rows: list[Row], failed: list[dict] = ()) -> tuple[list[dict], list[dict]]:
    """(per task/attack/arm, per task/arm) records with the DCS and its averages; an arm with `failed` cells on a
    task is not ranked there."""
    undefended = {(r["task"], r["attack"], r["seed"]): r["mp"] for r in rows if r["arm"] == NONE}
    by_cell: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        mp_star = undefended.get((r["task"], r["attack"], r["seed"]))
        if None not in (r["ap"], r["ap_star"], r["mp"], mp_star):
            r["dcs"] = dcs(scored_ap(r["metric"], r["ap"], r["ap_star"]), r["mp"], r["ap_star"], mp_star)
        by_cell[r["task"], r["attack"], r["arm"]].append(r)
    cells = []
    for task in matrix.tasks:
        for attack in matrix.attacks:
            for arm in matrix.arms:
                got = by_cell.get((task, attack, arm), [])
                if not got:
                    continue
                cells.append({"task": task, "attack": attack, "defence": arm.defence, "arm": arm.label,
                              "strength": arm.strength, "value": arm.value, "metric": got[0]["metric"],
                              "type": ATTACK_METRICS.get(got[0]["metric"]), "seeds": len(got),
                              "ap": interval((r["ap"] for r in got), within=RANGES.get(got[0]["metric"])),
                              "mp": interval((r["mp"] for r in got), within=RANGES[TASK_METRIC]),
                              "ap_star": _mean(r["ap_star"] for r in got),
                              "dcs": interval((r.get("dcs") for r in got), within=RANGES["dcs"]),
                              "seconds": _mean(r["seconds"] for r in got), "bytes": _mean(r["bytes"] for r in got),
                              "per_seed": {r["seed"]: r.get("dcs") for r in got}})
    return cells, _composite(matrix, cells, failed)


def _composite(matrix: Matrix, cells: list[dict], failed: list[dict] = ()) -> list[dict]:
    """T-DCS: per seed, the mean DCS over the attacks of one type; C-DCS: per seed, the mean over types. Ranked per
    task by C-DCS, overlapping intervals sharing a rank. An arm with a failed cell (its training diverged, say) is
    not ranked: its scores average only the attacks and seeds it survived, which would flatter it."""
    out = []
    for task in matrix.tasks:
        failures = Counter(f["arm"] for f in failed if f["task"] == task)
        records = {}
        for arm in matrix.arms:
            mine = [c for c in cells if c["task"] == task and c["arm"] == arm.label]
            if not mine:
                continue
            types = sorted({c["type"] for c in mine if c["type"]})
            t_seeds = {t: _per_seed([c for c in mine if c["type"] == t], matrix.seeds) for t in types}
            c_seed = {s: statistics.fmean(t_seeds[t][s] for t in types) for s in matrix.seeds
                      if types and all(s in t_seeds[t] for t in types)}
            records[arm.label] = {"task": task, "arm": arm.label, "defence": arm.defence,
                                  **{f"t_dcs_{t}": interval(t_seeds[t].values(), within=RANGES["dcs"])
                                     for t in types},
                                  "c_dcs": interval(c_seed.values(), within=RANGES["dcs"]),
                                  "seconds": _mean(c["seconds"] for c in mine), "bytes": _mean(c["bytes"] for c in mine),
                                  "failed": failures[arm.label]}
        ranks = shared_ranks({k: r["c_dcs"] for k, r in records.items()
                              if r["c_dcs"] is not None and not r["failed"]})
        for label, record in sorted(records.items(), key=lambda kv: (ranks.get(kv[0], 10 ** 9),
                                                                      -(kv[1]["c_dcs"].mean if kv[1]["c_dcs"] else 0))):
            out.append({**record, "rank": ranks.get(label)})
    return out


def _per_seed(cells: list[dict], seeds: list[int]) -> dict[int, float]:
    """seed -> the mean DCS over these attacks, for the seeds every one of them scored."""
    return {s: statistics.fmean(c["per_seed"][s] for c in cells) for s in seeds
            if cells and all(c["per_seed"].get(s) is not None for c in cells)}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Interval):
        return value.text()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _csv_value(value: Any) -> list[str]:
    if isinstance(value, Interval):
        return [repr(value.mean), repr(value.low), repr(value.high)]
    return ["" if value is None else str(value)]


def _csv(records: list[dict], columns: list[str]) -> str:
    """The records as CSV (the csv module quotes what needs it: commas, quotes, line breaks in a value); an
    interval column is three (mean, low, high)."""
    samples = {col: next((r[col] for r in records if r.get(col) is not None), None) for col in columns}
    header = []
    for col in columns:
        header += [col, f"{col}_low", f"{col}_high"] if isinstance(samples[col], Interval) else [col]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    for r in records:
        cells = []
        for col in columns:
            value = r.get(col)
            cells += _csv_value(value) if value is not None or not isinstance(samples[col], Interval) else ["", "", ""]
        writer.writerow(cells)
    return text.getvalue()


MARKERS = "osD^vPX"


def frontier_png(task: str, attack: str, cells: list[dict]) -> bytes:
    """Task accuracy against the attack's metric: one curve per defence over its strengths (error bars: std over
    seeds, each point labelled with its strength), the undefended point starred, the trivial baseline dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    base = next((c for c in cells if c["defence"] == NONE.defence), None)
    colours = plt.get_cmap("tab10").colors
    for i, defence in enumerate(dict.fromkeys(c["defence"] for c in cells if c["defence"] != NONE.defence)):
        mine = [c for c in cells if c["defence"] == defence and c["ap"] and c["mp"]]
        if not mine:
            continue
        xs, ys = [c["ap"].mean for c in mine], [c["mp"].mean for c in mine]
        xerr, yerr = [c["ap"].sd for c in mine], [c["mp"].sd for c in mine]
        # ten colours and seven markers: no two of the first seventy defences look alike
        line = ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, marker=MARKERS[i % len(MARKERS)],
                           color=colours[i % len(colours)], capsize=3, label=defence)
        for c, x, y in zip(mine, xs, ys):
            if c["value"] is not None:
                ax.annotate(f"{c['value']:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7,
                            color=line[0].get_color())
    if base and base["ap"] and base["mp"]:
        ax.errorbar([base["ap"].mean], [base["mp"].mean], xerr=[base["ap"].sd], yerr=[base["mp"].sd], marker="*", markersize=14, color="black",
                    linestyle="none", label="no defence", zorder=5)
    stars = [c["ap_star"] for c in cells if c["ap_star"] is not None]
    if stars:
        ax.axvline(statistics.fmean(stars), color="grey", linestyle="--", label="trivial attack")
    metric = next((c["metric"] for c in cells if c["metric"]), "attack metric")
    ax.set_xlabel(f"{attack}: {metric} (attack; right = more leakage)")
    ax.set_ylabel(f"task {TASK_METRIC}")
    ax.set_title(f"{task}, {attack}: privacy-utility frontier\n(error bars: std over seeds; point labels: the "
                 "defence's strength)", fontsize=9)
    ax.set_xlim(-0.02, 1.02)                             # both metrics live on [0, 1]
    low, high = ax.get_ylim()
    ax.set_ylim(max(low, -0.02), min(high, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


CELL_COLUMNS = ["task", "attack", "arm", "defence", "strength", "value", "metric", "seeds", "ap", "ap_star", "mp",
                "dcs", "seconds", "bytes"]


WORST_COLUMNS = ["task", "attack", "arm", "seed", "default_ap", "default_dcs", "worst_ap", "worst_dcs",
                 "worst_options"]
SEED_COLUMNS = ["task", "attack", "arm", "seed", "metric", "ap", "ap_star", "mp", "dcs", "seconds", "bytes"]
"""seeds.csv: one row per finished cell, what every mean and interval is computed from (kept where the cells are
not)."""

WORST_RANK_COLUMNS = ["task", "arm", "attacks", "default_dcs", "default_rank", "worst_dcs", "worst_rank",
                      "rank_change"]
WORST_NUMBERS = {"seed": int, "default_ap": float, "default_dcs": float, "worst_ap": float, "worst_dcs": float}


def write_worst(out: Path, worst: list[dict]) -> None:
    """The worst-case rows to worst.csv: kept beside the cells, so every later report (one after each cell, a rerun
    without --worst-case) still shows them."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(WORST_COLUMNS)
    writer.writerows([["" if r.get(c) is None else repr(r[c]) if isinstance(r[c], float) else str(r[c])
                       for c in WORST_COLUMNS] for r in worst])
    atomic_write_text(out / "worst.csv", text.getvalue())


def read_worst(out: Path) -> Optional[list[dict]]:
    """The rows of the last worst-case search in `out` (None: none ran there)."""
    path = out / "worst.csv"
    if not path.is_file():
        return None
    with path.open(newline="") as f:
        return [{c: None if r[c] == "" else WORST_NUMBERS.get(c, str)(r[c]) for c in WORST_COLUMNS}
                for r in csv.DictReader(f)]


def write_report(matrix: Matrix, out: Path, worst: Optional[list[dict]] = None) -> dict:
    """Write matrix.csv, scores.csv, the frontiers and report.md; returns what the command prints. `worst`: a
    worst-case search's rows, written to worst.csv; without them, those of an earlier search there."""
    if worst is not None:
        write_worst(out, worst)
    worst = read_worst(out)
    rows, failed = rows_of(matrix, out)
    cells, composite = score(matrix, rows, failed)
    atomic_write_text(out / "matrix.csv", _csv(cells, CELL_COLUMNS))
    atomic_write_text(out / "seeds.csv", _csv([{**r, "arm": r["arm"].label} for r in rows], SEED_COLUMNS))
    t_columns = sorted({k for r in composite for k in r if k.startswith("t_dcs_")})
    score_columns = ["task", "rank", "arm", "defence", *t_columns, "c_dcs", "failed", "seconds", "bytes"]
    atomic_write_text(out / "scores.csv", _csv(composite, score_columns))
    figures = []
    for task in matrix.tasks:
        for attack in matrix.attacks:
            mine = [c for c in cells if c["task"] == task and c["attack"] == attack]
            if mine:
                name = f"frontier-{task}-{attack}.png"
                atomic_write_bytes(out / name, frontier_png(task, attack, mine))
                figures.append(name)
    lines = [f"# Matrix {matrix.name}", "", matrix.description, "",
             f"{len(rows)} cells finished, {len(failed)} failed, of {matrix.size} "
             f"({len(matrix.tasks)} tasks, {len(matrix.attacks)} attacks, {len(matrix.arms)} arms, "
             f"{len(matrix.seeds)} seeds; a task runs the attacks and case rows it names)" + ("; left out, as the defence matrix refuses them: " + ", ".join(
                 f"{a} x {d}" for a, d in sorted(matrix.skip)) + " (those arms' T-DCS averages the attacks they met)"
                 if matrix.skip else "") + ".", "",
             "DCS = 1 / (1 + sqrt(0.5 (AP - AP*)^2 + 0.5 (MP* - MP)^2)): AP the attack's metric, AP* its trivial "
             "baseline's on the same targets, MP the task accuracy, MP* the undefended accuracy at the same seed. "
             "T-DCS averages the DCS over the attacks of one type, C-DCS over types; 95% Student-t intervals over "
             "seeds; a rank is 1 + the arms whose C-DCS interval lies wholly above this one's. Seconds: the cell's "
             "wall time (training and attack), on whatever else the machine ran; bytes: across the cut where the "
             "run records them. Failed: the arm's cells that failed on the task; such an arm is not ranked (its "
             "scores average only the attacks and seeds it survived).", "", "## Ranking", ""]
    lines += _table(composite, score_columns[1:] if len(matrix.tasks) == 1 else score_columns)
    blind = unjudged(rows)
    if blind:
        lines += ["", "## Attacks that cannot judge a defence here", "", "Undefended, these attacks are not clearly "
                  "away from their trivial baseline (the 95% interval of the paired gaps over seeds includes 0; for "
                  "a leak AUC, on either side), so no arm has a leak to stop: their cells' DCS mix the task cost "
                  "with the attack's noise, and the ranking above averages them in.", ""] + _table(blind, ["task", "attack", "metric", "undefended", "trivial",
                                                            "seeds"])
    if failed:
        lines += ["", "## Failed cells", ""] + _table(failed, ["task", "attack", "arm", "seed", "error"])
    if worst:
        lines += ["", "## Worst case", "", "Each arm against the attack's default options and against the "
                  "strongest options found by the search (the seed of the search only).", ""]
        lines += _table(worst, list(worst[0]))
        ranking = worst_ranking(worst)
        atomic_write_text(out / "worst-ranks.csv", _csv(ranking, WORST_RANK_COLUMNS))
        lines += ["", "Each arm ranked by its mean DCS over the attacks searched, against the default options and "
                  "against the strongest found (one seed, so no intervals: 1 + the arms with a higher mean); rank "
                  "change positive where the arm falls under the worst case.", ""]
        lines += _table(ranking, WORST_RANK_COLUMNS)
    lines += ["", "## Every cell", ""] + _table(cells, CELL_COLUMNS)
    lines += ["", "## Frontiers", ""] + [f"![{f}]({f})" for f in figures]
    atomic_write_text(out / "report.md", "\n".join(lines) + "\n")
    return {"cells_ok": len(rows), "cells_failed": len(failed), "scores": composite, "figures": figures,
            "unjudged": blind}


def _table(records: list[dict], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(c.replace("_", " ") for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in records]
    return lines

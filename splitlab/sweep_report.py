"""A sweep's tables and report, recomputed from the cell files every time (never kept only in memory).

    results.csv   one row per cell: status, the swept values, the images it attacked (`images`, the
                  train-split indices its config.json records, where it records them), every scalar metric,
                  and each list of numbers the sweep file names under [report] curves as KEY.1, KEY.2, ...
    summary.csv   mean, std and n over `seed` for each setting of the other swept options
    report.md     the summary table, figures (a metric against a swept option, error bars over seeds,
                  one line per setting of the rest), failed cells, reconstruction grids per setting
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

from splitlab.sweep_cells import is_finished, read_record
from splitlab.sweep_file import Cell, Sweep
from splitlab.sweep_images import IMAGES as ATTACKED, images_of
from vfl.errors import SplitlabError
from vfl.files import read_bounded
from vfl.runs import METRIC_KEYS, RECORD_BYTES, atomic_write_bytes, atomic_write_text

SEED = "seed"
IMAGES = ("reconstruction.png", "reconstructions.png")


def flatten(value: Any, prefix: str = "", curves: tuple[str, ...] = ()) -> dict[str, Any]:
    """Scalars of a metrics record with dotted keys; lists are skipped, except a list of numbers whose key is
    one of `curves`: one column per entry, numbered from 1 (`trajectory.psnr.1`, the first point)."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}{key}.", curves))
    elif isinstance(value, (str, int, float, bool)) or value is None:
        out[prefix[:-1]] = value
    elif isinstance(value, list) and prefix[:-1] in curves and all(_number(v) for v in value):
        out.update({f"{prefix}{i}": v for i, v in enumerate(value, 1)})
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _csv(rows: list[dict], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _text(row.get(c)) for c in columns})
    return buffer.getvalue()


def collect(cells: list[Cell], sweep_dir: Path, curves: tuple[str, ...] = ()) -> list[dict]:
    """One row per cell of this sweep, read from its directory (the lists named in `curves` spread out)."""
    rows = []
    for cell in cells:
        cell_dir = sweep_dir / "cells" / cell.dirname
        record = read_record(cell_dir)
        status = "pending" if record is None else record.get("status", "failed")
        if status == "ok" and not is_finished(cell_dir):
            status = "pending"
        metrics = {}
        if status == "ok":
            try:
                metrics = flatten(json.loads(read_bounded(cell_dir / "metrics.json", limit=RECORD_BYTES,
                                                          what="cell metrics")), curves=curves)
            except (SplitlabError, ValueError):
                status = "pending"
        image = next((f"cells/{cell.dirname}/{n}" for n in IMAGES if (cell_dir / n).is_file()), None)
        rows.append({"cell": cell.key, "name": cell.name, "status": status, "swept": dict(cell.swept),
                     "error": (record or {}).get("error"), "cell_seconds": (record or {}).get("seconds"),
                     "where": (record or {}).get("where", {}), "metrics": metrics, "image": image,
                     "dir": f"cells/{cell.dirname}", ATTACKED: images_of(cell_dir) if status == "ok" else ""})
    return rows


def _metric_columns(rows: list[dict], reserved: set[str]) -> list[tuple[str, str]]:
    """(metric key, column name) in order of first appearance; a clash with an identity column gets `metrics.`."""
    seen: dict[str, str] = {}
    for row in rows:
        for key in row["metrics"]:
            if key not in seen:
                seen[key] = f"metrics.{key}" if key in reserved else key
    return list(seen.items())


def _groups(rows: list[dict], keys: list[str]) -> list[tuple[tuple, list[dict]]]:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row["swept"].get(k) for k in keys), []).append(row)
    return list(groups.items())


def summarise(rows: list[dict], keys: list[str], metrics: list[str]) -> list[dict]:
    """Mean, std (n-1; empty for n < 2) and n of every numeric metric over the seeds of each setting."""
    out = []
    for setting, members in _groups(rows, keys):
        ok = [r for r in members if r["status"] == "ok"]
        row: dict[str, Any] = dict(zip(keys, setting))
        row.update(cells=len(members), ok=len(ok), failed=sum(r["status"] == "failed" for r in members))
        for metric in metrics:
            values = [r["metrics"][metric] for r in ok if _numeric(r["metrics"].get(metric))]
            row[f"{metric}.mean"] = statistics.fmean(values) if values else None
            row[f"{metric}.std"] = statistics.stdev(values) if len(values) > 1 else None
            row[f"{metric}.n"] = len(values)
        out.append(row)
    return out


def _report_metrics(sweep: Sweep, numeric: list[str]) -> list[str]:
    if sweep.report.get("metrics"):
        return [m for m in sweep.report["metrics"] if m in numeric]
    chosen = [m for m in METRIC_KEYS if m in numeric and m != "seconds"]
    return chosen or [m for m in numeric if "second" not in m][:6]


def _x_axis(sweep: Sweep, keys: list[str]) -> str | None:
    if sweep.report.get("x") in keys:
        return sweep.report["x"]
    values = {k: (sweep.axes.get(k) or sweep.zipped.get(k) or []) for k in keys}
    by_size = sorted(keys, key=lambda k: -len(values[k]))          # stable: the first of the longest
    numeric = [k for k in by_size if len(values[k]) > 1 and all(_numeric(v) for v in values[k])]
    varied = [k for k in by_size if len(values[k]) > 1]
    return (numeric or varied or [None])[0]


def _label(keys: list[str], setting: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(keys, setting)) or "all"


HUGE = 1e100
"""Means above this are plotted as their log10 (a log axis's ticks overflow near the float range)."""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _finite_or_zero(value: Any) -> float:
    return value if _finite(value) else 0.0


def figure_png(summary: list[dict], keys: list[str], x: str, metrics: list[str], title: str) -> bytes:
    """One panel per metric: metric against `x` with std error bars, one line per setting of the rest."""
    from matplotlib.figure import Figure

    rest = [k for k in keys if k != x]
    xs = []
    for row in summary:
        if row[x] not in xs:
            xs.append(row[x])
    numeric = all(_numeric(v) for v in xs)
    position = {v: (v if numeric else i) for i, v in enumerate(xs)}
    fig = Figure(figsize=(4.5 * len(metrics), 3.4))
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        means = [r[f"{metric}.mean"] for r in summary if _finite(r[f"{metric}.mean"])]    # an overflowed bound: inf
        # values near the float range (vacuous bounds, 1e300) overflow a log axis's ticks: plot their log10
        exponents = bool(means) and min(means) > 0 and max(means) > HUGE
        for setting, members in _groups([{"swept": r, **r} for r in summary], rest):
            points = sorted(((position[r[x]], r[f"{metric}.mean"], _finite_or_zero(r[f"{metric}.std"]))
                             for r in members if _finite(r[f"{metric}.mean"])), key=lambda p: p[0])
            if points:
                px, py, pe = zip(*points)
                if exponents:
                    py, pe = [math.log10(v) for v in py], None
                ax.errorbar(px, py, yerr=pe, marker="o", capsize=3, lw=1.2, ls="-" if numeric else "none",
                            label=_label(rest, setting))
        if not exponents and means and min(means) > 0 and max(means) / min(means) >= 1000:
            ax.set_yscale("log")                                    # e.g. activation MSE, CNN vs MLP
        if numeric and len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 100:
            ax.set_xscale("log")
        if not numeric:
            ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=30, ha="right", fontsize=8)
        ax.set(xlabel=x, ylabel=f"log10 {metric}" if exponents else metric, title=metric)
        ax.grid(alpha=0.3)
        if rest and ax is axes[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def _cell(value: Any) -> str:
    return "-" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))


def _markdown(rows: list[dict], columns: list[str]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + \
           ["| " + " | ".join(_cell(r.get(c)).replace("|", "\\|") for c in columns) + " |" for r in rows]


def write_results(sweep: Sweep, cells: list[Cell], sweep_dir: Path) -> tuple[list[dict], list]:
    """results.csv from the cell files (rewritten after every cell, so it is current even after kill -9)."""
    rows = collect(cells, sweep_dir, tuple(sweep.report.get("curves", ())))
    swept = sweep.swept_keys
    attacked = [ATTACKED] if any(r[ATTACKED] for r in rows) and ATTACKED not in swept else []
    identity = ["cell", "name", "status", *swept, "cell_seconds", "error", "dir", *attacked]
    metric_columns = _metric_columns(rows, set(identity))
    flat = [{**{k: r[k] for k in ("cell", "name", "status", "cell_seconds", "error", "dir", ATTACKED)}, **r["swept"],
             **{column: r["metrics"].get(key) for key, column in metric_columns}} for r in rows]
    atomic_write_text(sweep_dir / "results.csv", _csv(flat, identity + [c for _, c in metric_columns]))
    return rows, metric_columns


def aggregate(sweep: Sweep, cells: list[Cell], sweep_dir: Path, counted: list[Cell] | None = None) -> dict:
    """Write results.csv, summary.csv, report.md (and figures/) from the cell files; return the counts of the
    `counted` cells (default: all of them)."""
    rows, metric_columns = write_results(sweep, cells, sweep_dir)
    swept = sweep.swept_keys
    keys = [k for k in swept if k != SEED]

    numeric = [k for k, _ in metric_columns if any(_numeric(r["metrics"].get(k)) for r in rows)]
    summary = summarise(rows, keys, numeric)
    stats = [f"{m}.{s}" for m in numeric for s in ("mean", "std", "n")]
    atomic_write_text(sweep_dir / "summary.csv", _csv(summary, [*keys, "cells", "ok", "failed", *stats]))

    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "failed", "pending")}
    chosen = _report_metrics(sweep, numeric)
    table = [{**{k: s[k] for k in keys}, "n": s["ok"],
              **{m: (None if s[f"{m}.mean"] is None else f"{s[f'{m}.mean']:.4g}"
                     + ("" if s[f"{m}.std"] is None else f" ± {s[f'{m}.std']:.2g}")) for m in chosen}}
             for s in summary]
    seeds = sweep.axes.get(SEED) or sweep.zipped.get(SEED)
    lines = [f"# Sweep `{sweep.name}`" + (" (paper size)" if sweep.paper_size else ""), ""]
    if sweep.description:
        lines += [sweep.description, ""]
    lines += [f"`{sweep.command_line()}` over {', '.join(swept) or 'nothing'}: {len(cells)} cells, "
              f"{counts['ok']} ok, {counts['failed']} failed, {counts['pending']} not run. "
              f"Tables: [results.csv](results.csv) (one row per cell), [summary.csv](summary.csv).", ""]
    lines += [f"## Summary: mean ± std over {'seeds ' + ', '.join(map(str, seeds)) if seeds else 'cells'}", ""]
    lines += _markdown(table, [*keys, "n", *chosen]) + [""]
    x = _x_axis(sweep, keys)
    if x is not None and chosen and counts["ok"]:
        png = figure_png(summary, keys, x, chosen, f"{sweep.name}: mean ± std over seeds")
        atomic_write_bytes(sweep_dir / "figures" / "summary.png", png)
        lines += ["## Figure", "", f"![{', '.join(chosen)} against {x}](figures/summary.png)", ""]
    failures = [{"cell": r["cell"], "name": r["name"], "error": r["error"]} for r in rows if r["status"] == "failed"]
    if failures:
        lines += ["## Failed cells", ""] + _markdown(failures, ["cell", "name", "error"]) + [""]
    images = [(setting, [r for r in members if r["image"]]) for setting, members in _groups(rows, keys)]
    if any(members for _, members in images):
        lines += ["## Reconstructions (originals above reconstructions), per setting", ""]
        for setting, members in images:
            if members:
                lines += [f"### {_label(keys, setting)}", "",
                          " ".join(f"[![seed {r['swept'].get(SEED, r['cell'])}]({r['image']})]({r['dir']})"
                                   for r in members), ""]
    atomic_write_text(sweep_dir / "report.md", "\n".join(lines))
    console = [f"{sweep.name}: mean ± std over seeds"] + _markdown(table, [*keys, "n", *chosen])
    if counted is not None:
        keys_counted = {c.key for c in counted}
        counts = {s: sum(r["status"] == s for r in rows if r["cell"] in keys_counted) for s in counts}
        failures = [f for f in failures if f["cell"] in keys_counted]
    return {"counts": counts, "failures": failures, "lines": console}

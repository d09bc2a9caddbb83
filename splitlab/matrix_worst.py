"""`splitlab matrix --worst-case N`: each arm against the strongest attack found by searching the attack's own options.

For every task, attack and arm, on the matrix's first seed, an Optuna study (TPE, seeded) proposes N settings of
the attack's options within their declared ranges (`AttackSpec.settings`: a choice is categorical, a number with
both ends declared is searched between them, log-scaled where they span three decades from a positive low; a
matrix file's [search] table may narrow a range, never widen it). Each trial is an ordinary cell of the matrix
directory (`splitlab attack NAME` with those options), so a resumed search reads its finished trials back, tells
the study the same values and is proposed the same next settings. The study maximises the attack metric's distance
from its trivial baseline (what the DCS penalises: a leak AUC far below 0.5 leaks as much as one far above, to an
attacker who flips its rule; an SSIM only counts above the best trivial image's, `matrix_score.TWO_SIDED`); the arm is then scored (DCS) against the strongest of the trials and the default
options, beside its score against the default options at the same seed.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional

from attacks import registry as attacks
from splitlab.matrix_grid import NONE, Matrix
from splitlab.matrix_score import TASK_METRIC, TWO_SIDED, attack_metric, dcs, scored_ap, trivial
from splitlab.sweep_cells import run_cell
from splitlab.sweep_file import Cell
from splitlab.sweep_report import collect
from vfl.errors import SplitlabError
from vfl.options import options_of

__all__ = ["search_space", "worst_case_search"]

SKIPPED = ("compile",)
"""Options that change how fast an attack runs, not what it finds."""


def search_space(attack: str, narrowed: Optional[dict[str, list]] = None) -> dict[str, tuple]:
    """option flag name -> ("choice", values) | ("int"|"float", low, high, log) from the attack's declarations."""
    narrowed = dict(narrowed or {})
    space: dict[str, tuple] = {}
    for f, opt in options_of(attacks.spec(attack).settings):
        check, key = opt.check, f.name.replace("_", "-")
        if check is None or f.name in SKIPPED:
            continue
        if check.choices:
            space[key] = ("choice", list(check.choices))
        elif check.kind in (int, float) and check.low is not None and check.high is not None:
            low, high = narrowed.pop(key, (check.low, check.high))
            if not (check.low <= low <= high <= check.high):
                raise SplitlabError(f"[search] {attack}.{key} = [{low}, {high}] is outside its declared range "
                                    f"{check.describe}")
            log = low > 0 and high / low >= 1000
            space[key] = ("int" if check.kind is int else "float", low, high, log)
    if narrowed:
        raise SplitlabError(f"[search] {attack} names {next(iter(narrowed))!r}, which it cannot search")
    return space


def _suggest(trial, space: dict[str, tuple]) -> dict[str, Any]:
    out = {}
    for key, (kind, *rest) in space.items():
        if kind == "choice":
            out[key] = trial.suggest_categorical(key, rest[0])
        elif kind == "int":
            out[key] = trial.suggest_int(key, int(rest[0]), int(rest[1]), log=rest[2])
        else:
            out[key] = trial.suggest_float(key, float(rest[0]), float(rest[1]), log=rest[2])
    return out


def _value(cell: Cell, out: Path) -> tuple[Optional[float], dict]:
    found = collect([cell], out)[0]
    metrics = found["metrics"] if found["status"] == "ok" else {}
    metric = attack_metric(metrics)
    return (metrics.get(metric) if metric else None), metrics


def _objective(metric: str, value: float, star: float) -> float:
    """What the study maximises: the distance past the trivial baseline (signed for a metric an attacker cannot
    flip, so trials that all fall short of it still tell the sampler which fell least short)."""
    return abs(value - star) if metric in TWO_SIDED else value - star


def _score(metrics: dict, mp_star: Optional[float]) -> Optional[float]:
    metric = attack_metric(metrics)
    ap, mp = (metrics.get(metric) if metric else None), metrics.get(TASK_METRIC)
    star = trivial(metrics, metric) if metric else None
    return None if None in (ap, mp, star, mp_star) else dcs(scored_ap(metric, ap, star), mp, star, mp_star)


def worst_case_search(matrix: Matrix, out: Path, trials: int, threads: Optional[int],
                      progress: bool) -> tuple[list[dict], bool]:
    """The worst-case rows for the report, and whether Ctrl-C stopped the search (its finished trials are kept)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed = matrix.seeds[0]
    rows: list[dict] = []
    try:
        for (task, attack), sweep in matrix.sweeps().items():
            space = search_space(attack, matrix.search.get(attack))
            defaults = {matrix.arm_of(task, attack, c): c for c in sweep.cells() if dict(c.swept)["seed"] == seed}
            mp_star = _value(defaults[NONE], out)[1].get(TASK_METRIC)
            for arm, default in defaults.items():
                study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))
                default_metrics = _value(default, out)[1]
                metric = attack_metric(default_metrics)
                star = trivial(default_metrics, metric) if metric else None
                best: tuple[float, dict, dict] | None = None if star is None or default_metrics.get(metric) is None \
                    else (_objective(metric, default_metrics[metric], star), {}, default_metrics)
                for _ in range(trials):
                    trial = study.ask()
                    options = _suggest(trial, space)
                    cell = Cell(default.command, tuple(sorted({**dict(default.options), **options}.items())),
                                (*default.swept, *options.items()))
                    cell_dir = out / "cells" / cell.dirname
                    run_cell(cell, cell_dir, threads=threads, where={"executor": "local", "worst_case": True})
                    value, metrics = _value(cell, out)
                    value = None if value is None or star is None or not math.isfinite(value) \
                        else _objective(metric, value, star)
                    if value is None:
                        study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    else:
                        study.tell(trial, value)
                    if value is not None and (best is None or value > best[0]):
                        best = (value, options, metrics)
                    if progress:
                        print(f"worst case {task} {attack} {arm.label}: {options} -> {value}", file=sys.stderr,
                              flush=True)                  # stdout is kept for --json
                rows.append({"task": task, "attack": attack, "arm": arm.label, "seed": seed,
                             "default_ap": default_metrics.get(metric) if metric else None,
                             "default_dcs": _score(default_metrics, mp_star),
                             "worst_ap": None if best is None else best[2].get(metric),
                             "worst_dcs": None if best is None else _score(best[2], mp_star),
                             "worst_options": "-" if best is None else " ".join(f"--{k} {v}" for k, v in
                                                                                 best[1].items()) or "default"})
    except KeyboardInterrupt:
        return rows, True
    return rows, False

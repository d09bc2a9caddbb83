"""AWA's evaluation-side diagnostics: quantities that need what the attack never sees (the ground-truth
images), added to metrics.json through its spec's hooks, and its BO figure. (The interpolation's error against
the client's true epochs, which AGIC reports too, is `attacks.hfl.fedavg.upload_diagnostics`.)

- `bo_scores`: PSNR of the BO trials (random ones, the best one, the re-run with Q*), so a sweep can
  check that Q* beats the median random Q, and the rank correlation of f(Q) with PSNR over the trials.
"""
from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from scipy.stats import rankdata

from attacks.kit import trajectory_evaluation, trajectory_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["evaluation", "save_figures", "bo_scores"]


def _spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = rankdata(a).tolist(), rankdata(b).tolist()          # ties share their mean rank
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    sd = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / sd if sd > 0 else None


def bo_scores(bo: dict, per_trial: list[dict]) -> dict[str, Any]:
    psnr = [t.get("psnr") for t in per_trial]
    random = [p for p in psnr[:bo["random"]] if p is not None]
    pairs = [(f, p) for f, p in zip(bo["f_per_trial"], psnr[:bo["trials"]]) if f is not None and p is not None]
    median = statistics.median(random) if random else None
    rerun = psnr[bo["rerun_trial"]]
    return {"random_median_psnr": median, "random_max_psnr": max(random) if random else None,
            "best_trial_psnr": psnr[bo["best_trial"]], "rerun_psnr": rerun,
            "rerun_minus_random_median": None if rerun is None or median is None else rerun - median,
            "best_trial_minus_random_median": None if psnr[bo["best_trial"]] is None or median is None
            else psnr[bo["best_trial"]] - median,
            "spearman_f_psnr": _spearman([f for f, _ in pairs], [p for _, p in pairs])}


def evaluation(reconstruction, metrics: dict, truth=None) -> dict[str, Any]:
    """metrics.json additions after scoring (the spec's `evaluate` hook)."""
    bo = reconstruction.extras.get("bo")
    return {**({"bo_scores": bo_scores(bo, metrics["per_trial"])} if bo else {}),
            **trajectory_evaluation(reconstruction, metrics, truth)}


def save_figures(run, outcome) -> None:
    """trajectory.png when recorded; with BO bo_curve.png, f(Q) per trial and its running minimum (the
    paper's Fig. 1)."""
    trajectory_figure(run, outcome)
    bo = outcome.reconstruction.extras.get("bo")
    if not bo:
        return
    from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
    figure = Figure(figsize=(5, 3.4))
    ax = figure.subplots()
    f = [math.nan if v is None else v for v in bo["f_per_trial"]]
    trials = range(1, len(f) + 1)
    ax.scatter(trials[:bo["random"]], f[:bo["random"]], s=14, label="random trials")
    ax.scatter(trials[bo["random"]:], f[bo["random"]:], s=14, label="GP trials")
    ax.step(trials, [math.nan if v is None else v for v in bo["f_best_so_far"]], where="post", color="k",
            lw=1.2, label="best so far")
    ax.set(xlabel="BO trial", ylabel="f(Q)", yscale="log", title=f"AWA BO ({outcome.reconstruction.preset})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    figure.tight_layout()
    run.save_figure("bo_curve.png", figure)

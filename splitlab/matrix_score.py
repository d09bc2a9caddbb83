"""The matrix's scores: VFLAIR's defence capability score (DCS) per cell, its averages over attacks of one type
(T-DCS) and over types (C-DCS), intervals over seeds, and a ranking in which overlapping intervals share a rank.

    DCS = 1 / (1 + sqrt(b (AP - AP*)^2 + (1 - b) (MP* - MP)^2)),   b = 0.5

AP is the attack's performance (its metric, `ATTACK_METRICS`), AP* the trivial baseline's on the same targets (the
cell's own `baselines`: 0.5 leak AUC, or the best trivial image; an SSIM below it is scored as AP*, `scored_ap`),
MP the task accuracy and MP* the undefended
task accuracy of the same task and seed. A seed pairs the defended cell with the undefended one trained on the same
draw, so each seed gives one DCS and the interval is over seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from splitlab.claims.stats import beats_trivial

__all__ = ["B", "ATTACK_METRICS", "TASK_METRIC", "TWO_SIDED", "clear_of_trivial", "scored_ap", "dcs", "attack_metric", "trivial",
           "Interval", "interval", "RANGES", "shared_ranks",
           "worst_ranking"]

B = 0.5
"""VFLAIR's weight of the attack term against the task term."""

ATTACK_METRICS: dict[str, str] = {
    "leak_auc": "label",
    "ssim": "feature",
}
"""The attack metric the matrix scores, the first a cell reports (higher: a stronger attack, both on [0, 1] like the
task accuracy, so the two terms of the DCS are on one scale), and the attack type it stands for."""

TASK_METRIC = "accuracy"

TWO_SIDED = ("leak_auc",)
"""Metrics an attacker can flip: a leak AUC as far below 0.5 as another is above it leaks as much (it reverses its
rule). A reconstruction's SSIM below the best trivial image's is no leak at all: the trivial image does better."""


def clear_of_trivial(metric: str, values: Sequence[float], trivial: Sequence[float]) -> bool:
    """Whether an undefended attack's per-seed values are clearly away from their own trivial baselines (the 95%
    interval of the paired gaps excludes 0: above it, or either side for a metric the attacker can flip). Where
    they are not, a defence has no leak to stop there. Fewer than two seeds give no interval: never clear."""
    return beats_trivial(values, trivial, two_sided=metric in TWO_SIDED)


def scored_ap(metric: str, ap: float, ap_star: float) -> float:
    """The AP the DCS is computed with: AP itself where the attacker can flip its rule (the squared term counts a
    shortfall as a leak), else no lower than AP*: a reconstruction worse than the best trivial image leaks nothing
    that image does not."""
    return ap if metric in TWO_SIDED else max(ap, ap_star)


def dcs(ap: float, mp: float, ap_star: float, mp_star: float, b: float = B) -> float:
    return 1.0 / (1.0 + math.sqrt(b * (ap - ap_star) ** 2 + (1.0 - b) * (mp_star - mp) ** 2))


def attack_metric(metrics: dict[str, Any]) -> Optional[str]:
    """The first of `ATTACK_METRICS` a cell's flattened metrics hold a number for."""
    return next((m for m in ATTACK_METRICS if isinstance(metrics.get(m), (int, float))), None)


def trivial(metrics: dict[str, Any], metric: str) -> Optional[float]:
    """The strongest trivial baseline's value of `metric` in the cell (the attack that learns nothing)."""
    found = [v for k, v in metrics.items() if k.startswith("baselines.") and k.endswith("." + metric)
             and isinstance(v, (int, float))]
    return max(found) if found else None


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int
    sd: float = 0.0
    """The standard deviation over seeds (the figures' error bars)."""

    def overlaps(self, other: "Interval") -> bool:
        return self.low <= other.high and other.low <= self.high

    def text(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


RANGES: dict[str, tuple[float, float]] = {"dcs": (0.0, 1.0), TASK_METRIC: (0.0, 1.0), "leak_auc": (0.0, 1.0),
                                          "ssim": (-1.0, 1.0)}
"""Where each score the report gives an interval for lies: a Student-t interval over three seeds can reach past
it (a DCS of 1.03), so its ends are cut to it, as the defence table cuts its bounded metrics'."""


def interval(values: Iterable[float], level: float = 0.95,
             within: Optional[tuple[float, float]] = None) -> Optional[Interval]:
    """The mean and its Student-t interval over seeds (one value: no width), its ends cut to `within`."""
    from scipy import stats

    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return None
    mean = sum(xs) / len(xs)
    if len(xs) == 1:
        return Interval(mean, mean, mean, 1, 0.0)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    half = float(stats.t.ppf(0.5 + level / 2, len(xs) - 1)) * sd / math.sqrt(len(xs))
    low, high = mean - half, mean + half
    if within is not None:
        low, high = max(low, within[0]), min(high, within[1])
    return Interval(mean, low, high, len(xs), sd)


def shared_ranks(scores: dict[str, Interval]) -> dict[str, int]:
    """Rank by mean (higher first); an entry's rank is 1 + the number of entries whose interval lies wholly above
    its own, so entries whose intervals overlap share a rank unless a third separates them."""
    return {name: 1 + sum(other.low > mine.high for other in scores.values()) for name, mine in scores.items()}


def worst_ranking(worst: list[dict]) -> list[dict]:
    """Per task, each arm's mean DCS over the attacks searched against the default options and against the
    strongest found (`--worst-case` rows, one seed), the rank each gives (1 + the arms with a higher mean: one seed
    has no interval to share a rank by) and the change (positive: the arm falls that many places under the worst
    case). An arm missing a score for one of the task's attacks is left out."""
    out = []
    for task in dict.fromkeys(r["task"] for r in worst):
        mine = [r for r in worst if r["task"] == task]
        attacks = set(r["attack"] for r in mine)
        arms: dict[str, list[dict]] = {}
        for r in mine:
            arms.setdefault(r["arm"], []).append(r)
        means = {arm: {key: sum(r[key] for r in got) / len(got) for key in ("default_dcs", "worst_dcs")}
                 for arm, got in arms.items() if {r["attack"] for r in got} == attacks
                 and all(r[key] is not None for r in got for key in ("default_dcs", "worst_dcs"))}
        ranks = {key: shared_ranks({arm: Interval(m[key], m[key], m[key], 1) for arm, m in means.items()})
                 for key in ("default_dcs", "worst_dcs")}
        for arm, m in sorted(means.items(), key=lambda kv: (ranks["worst_dcs"][kv[0]], -kv[1]["worst_dcs"])):
            out.append({"task": task, "arm": arm, "attacks": len(attacks), "default_dcs": m["default_dcs"],
                        "default_rank": ranks["default_dcs"][arm], "worst_dcs": m["worst_dcs"],
                        "worst_rank": ranks["worst_dcs"][arm],
                        "rank_change": ranks["worst_dcs"][arm] - ranks["default_dcs"][arm]})
    return out

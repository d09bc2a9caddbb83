"""A claim of a paper as data, and the rules that turn the lab's measurement into a verdict.

A `Claim` names the paper and where (table, figure, section), says the claim in one sentence, gives the
paper's own numbers and setting, and how the lab measures it: a shipped sweep, the rows compared, the
metric, and a rule. Verdicts are computed, never typed:

- reproduced: the measurement agrees with the claim and with the paper's own number (within the rule's
  tolerance);
- partly: the direction (or the qualitative claim) holds but not the paper's magnitude, or the measurement
  cannot tell; the reason is stated;
- contradicted: the measurement shows the opposite, or rules out the paper's number;
- not attempted: no measurement; the entry says why (scale, model, dataset, time on this CPU).

Comparisons ("A beats B") are judged on paired seeds: the mean difference with a 95% t-interval.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from scipy.special import stdtrit

__all__ = ["Claim", "Measure", "Verdict", "Rows", "Select", "Beats", "Trend", "AtLeast", "AtMost", "Matches",
           "VERDICTS", "interval"]

VERDICTS = ("reproduced", "partly", "contradicted", "not attempted")
Rows = Sequence[Mapping[str, Any]]
"""A sweep's results: one mapping per cell (swept values and dotted metric keys, as in results.csv)."""


@dataclass(frozen=True)
class Select:
    """The cells of a sweep with these swept values (`{"attack": "fedleak"}`); `label` names them in the text."""
    where: Mapping[str, Any]
    label: str

    def rows(self, rows: Rows) -> list[Mapping[str, Any]]:
        return [r for r in rows if r.get("status", "ok") == "ok"
                and all(_same(r.get(k), v) for k, v in self.where.items())]


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return str(a) == str(b)


def _value(row: Mapping[str, Any], metric: str) -> float | None:
    """A metric as a number: results.csv writes switches as True/False, read as 1 and 0."""
    raw = row.get(metric)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return float(raw.strip().lower() == "true")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and a two-sided t-interval (the mean itself at both ends for fewer than two values)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = float(stdtrit(len(values) - 1, 0.5 + level / 2)) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def _mean_of(select: Select, metric: str, unit: str, rows: Rows):
    """(mean, the lab's numbers in words, values) of the metric over the selected cells, or the verdict that
    there are none."""
    found = [v for v in (_value(r, metric) for r in select.rows(rows)) if v is not None]
    if not found:
        return Verdict("not attempted", "no results", "the sweep has no cells for this setting")
    mean, low, high = interval(found)
    lab = f"{select.label}: {mean:.4g}{unit} [{low:.4g}, {high:.4g}] over {len(found)} cells"
    return mean, lab, {"mean": mean, "low": low, "high": high, "n": len(found)}


@dataclass(frozen=True)
class Verdict:
    verdict: str
    lab: str
    """The lab's numbers in words ("+1.5 dB [0.5, 2.5] over 6 seeds")."""
    reason: str = ""
    values: Mapping[str, float] = field(default_factory=dict)


Rule = Callable[[Rows], Verdict]


@dataclass(frozen=True)
class Beats:
    """A beats B on `metric` by the paper's `gap` (None: the paper gives no number), paired by `by`.

    reproduced: the interval of the paired differences excludes 0 and its mean reaches `share` of the paper's
    gap; partly: significant but smaller than that, or not significant while the interval still holds the
    paper's gap (too few seeds to tell); contradicted: significant the other way, or not significant with the
    interval ruling the paper's gap out (no effect where the paper reports one). A side no better than the
    all-zero image on average (the cells' `baselines.zero.<metric>`) makes the comparison say nothing: partly.
    """
    a: Select
    b: Select
    metric: str
    gap: float | None = None
    higher_is_better: bool = True
    by: str = "seed"
    share: float = 0.5
    unit: str = ""

    def _per_key(self, rows) -> dict[Any, float]:
        """The metric per pairing key (`seed`), the mean where several cells share one."""
        found: dict[Any, list[float]] = {}
        for r in rows:
            value = _value(r, self.metric)
            if value is not None:
                found.setdefault(r.get(self.by), []).append(value)
        return {k: statistics.fmean(v) for k, v in found.items()}

    def _no_better_than_zero(self, rows) -> bool:
        """The side's mean is at (within 1%) or below the all-zero image's on the same cells."""
        pairs = [(_value(r, self.metric), _value(r, f"baselines.zero.{self.metric}")) for r in rows]
        pairs = [(v, z) for v, z in pairs if v is not None and z is not None]
        if not pairs:
            return False
        value, zero = (statistics.fmean(p) for p in zip(*pairs))
        margin = 0.01 * max(abs(zero), 1e-12)
        return value <= zero + margin if self.higher_is_better else value >= zero - margin

    def __call__(self, rows: Rows) -> Verdict:
        left, right = self._per_key(self.a.rows(rows)), self._per_key(self.b.rows(rows))
        keys = [k for k in left if k in right]
        if not keys:
            return Verdict("not attempted", "no paired results", "the sweep has no cells for both sides")
        sign = 1.0 if self.higher_is_better else -1.0
        diffs = [sign * (left[k] - right[k]) for k in keys]
        mean, low, high = interval(diffs)
        shown_low, shown_high = sorted((sign * low, sign * high))       # the metric's own units, low end first
        lab = (f"{self.a.label} - {self.b.label}: {sign * mean:+.3g}{self.unit} [{shown_low:+.3g}, "
               f"{shown_high:+.3g}] (95%, {len(keys)} paired {self.by}s)")
        values = {"mean": sign * mean, "low": shown_low, "high": shown_high, "n": len(keys)}
        if len(keys) < 2:
            return Verdict("partly", lab, f"one paired {self.by}: no interval, so no verdict either way", values)
        failed = [s.label for s in (self.a, self.b) if self._no_better_than_zero(s.rows(rows))]
        if failed:
            return Verdict("partly", lab, f"{' and '.join(failed)} did no better than the all-zero image here, so "
                                          f"the comparison says nothing about it", values)
        paper = f"the paper's {self.gap:+g}{self.unit}" if self.gap is not None else "the paper's claim"
        if high < 0:
            return Verdict("contradicted", lab, f"{self.b.label} is better, against {paper}", values)
        if low > 0:
            if self.gap is None or mean >= self.share * abs(self.gap):
                return Verdict("reproduced", lab, "", values)
            return Verdict("partly", lab, f"the direction holds; the gap is smaller than {paper}", values)
        if self.gap is not None and high < self.share * abs(self.gap):
            return Verdict("contradicted", lab, f"no significant difference, and the interval rules out {paper}",
                           {**values, "magnitude_only": True})
        return Verdict("partly", lab, f"not significant over {len(keys)} {self.by}s", values)


@dataclass(frozen=True)
class Trend:
    """`metric` moves in `direction` (+1 rises, -1 falls) along swept `x` (means over the other cells)."""
    select: Select
    x: str
    metric: str
    direction: int = 1
    unit: str = ""

    def __call__(self, rows: Rows) -> Verdict:
        points: dict[float, list[float]] = {}
        for r in self.select.rows(rows):
            value, x = _value(r, self.metric), _value(r, self.x)
            if value is not None and x is not None:
                points.setdefault(x, []).append(value)
        if len(points) < 2:
            return Verdict("not attempted", "fewer than two points", "the sweep has too few settings")
        xs = sorted(points)
        means = [statistics.fmean(points[x]) for x in xs]
        lab = ", ".join(f"{self.x} {x:g}: {m:.3g}{self.unit}" for x, m in zip(xs, means))
        steps = [self.direction * (b - a) for a, b in zip(means, means[1:])]
        overall = self.direction * (means[-1] - means[0])
        values = {"first": means[0], "last": means[-1]}
        if all(s >= 0 for s in steps) and overall > 0:
            return Verdict("reproduced", lab, "", values)
        if overall > 0:
            return Verdict("partly", lab, "the ends move as claimed, not every step", values)
        return Verdict("contradicted", lab, "the ends move the other way", values)


@dataclass(frozen=True)
class AtLeast:
    """The mean of `metric` over the selected cells reaches `value` (the paper's); `share` of it is partly."""
    select: Select
    metric: str
    value: float
    share: float = 0.8
    unit: str = ""
    below: bool = False
    """True: the claim is "at most `value`" (an error that stays small)."""

    def __call__(self, rows: Rows) -> Verdict:
        summary = _mean_of(self.select, self.metric, self.unit, rows)
        if isinstance(summary, Verdict):
            return summary
        mean, lab, values = summary
        ok = mean <= self.value if self.below else mean >= self.value
        near = mean <= self.value / self.share if self.below else mean >= self.share * self.value
        if ok:
            return Verdict("reproduced", lab, "", values)
        if near:
            near_text = (f"within a factor {1 / self.share:g} of" if self.below
                         else f"within {100 * (1 - self.share):.0f}% of")
            return Verdict("partly", lab, f"{near_text} the paper's {self.value:g}", values)
        return Verdict("contradicted", lab, f"far from the paper's {self.value:g}{self.unit}", values)


def AtMost(select: Select, metric: str, value: float, share: float = 0.8, unit: str = "") -> AtLeast:
    """The mean of `metric` stays at or below `value` (the paper's)."""
    return AtLeast(select, metric, value, share, unit, below=True)


@dataclass(frozen=True)
class Matches:
    """The mean of `metric` equals the paper's `value` within `tolerance` (absolute); twice that is partly."""
    select: Select
    metric: str
    value: float
    tolerance: float
    unit: str = ""

    def __call__(self, rows: Rows) -> Verdict:
        summary = _mean_of(self.select, self.metric, self.unit, rows)
        if isinstance(summary, Verdict):
            return summary
        mean, lab, values = summary
        off = abs(mean - self.value)
        if off <= self.tolerance:
            return Verdict("reproduced", lab, "", values)
        if off <= 2 * self.tolerance:
            return Verdict("partly", lab, f"{off:.3g}{self.unit} from the paper's {self.value:g}", values)
        return Verdict("contradicted", lab, f"{off:.3g}{self.unit} from the paper's {self.value:g}", values)


@dataclass(frozen=True)
class Measure:
    """How the lab measures a claim: a shipped sweep (its results file) and a rule over its rows."""
    sweep: str
    rule: Rule
    how: str
    """The measurement in words: the metric and the aggregation over seeds."""

    @property
    def selections(self) -> tuple[Select, ...]:
        """The cells the rule reads: both sides of a comparison, or its one selection."""
        return (self.rule.a, self.rule.b) if isinstance(self.rule, Beats) else (self.rule.select,)


@dataclass(frozen=True)
class Claim:
    id: str
    """`paper.where.what` (`fedleak.tab3.beats-ig`)."""
    paper: str
    where: str
    claim: str
    paper_numbers: str
    """The paper's own numbers and setting, as it states them."""
    measure: Measure | None = None
    """None: not attempted (`reason` says why)."""
    reduced: str = ""
    """How the lab's setting is smaller than the paper's (scale, model, dataset); a measured "reproduced" under a
    reduced setting is reported as partly, with this as the reason, unless the claim is about a direction only."""
    direction_only: bool = False
    """The claim is qualitative (a direction or an ordering), so a reduced setting does not cap it."""
    reason: str = ""
    """Why the claim is not attempted, or what limits it beyond the rule."""

    def judge(self, rows: Rows | None) -> Verdict:
        if self.measure is None:
            return Verdict("not attempted", "-", self.reason)
        if rows is None:
            return Verdict("not attempted", "no shipped results", f"run `splitlab claims --run {self.id}`")
        verdict = self.measure.rule(rows)
        if verdict.values.get("magnitude_only") and self.reduced:
            # the paper's gap was measured at full scale: ruling it out at a reduced one contradicts nothing
            return Verdict("partly", verdict.lab, f"no significant difference; at reduced scale: {self.reduced}",
                           verdict.values)
        if verdict.verdict == "reproduced" and self.reduced and not self.direction_only:
            return Verdict("partly", verdict.lab, f"at reduced scale: {self.reduced}", verdict.values)
        if verdict.verdict != "reproduced" and self.reason:
            return Verdict(verdict.verdict, verdict.lab, "; ".join(filter(None, [verdict.reason, self.reason])),
                           verdict.values)
        return verdict

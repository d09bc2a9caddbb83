"""The rules that turn a sweep's cells into a verdict, one per shape of claim.

    Beats    A is better than B (paired by seed): "FedLeak beats IG", "dropping L1 hurts"
    Trend    a metric moves one way along a swept option (its ends paired by seed): "PSNR rises with T"
    Level    a metric reaches (or stays under) the paper's number: "22.52 dB", "MSE X 0.05"
    Fails    an attack does no better than a trivial answer (a defence protects, a client resists);
             `Fails(..., fails=False)` the opposite: it still leaks
    Close    A is within a margin of B (or, one-sided, no worse than B by more than it)
    Holds    a yes/no property holds in every cell (or in most): "iDLG's bound is below DLG's"

Every rule answers with a `Verdict` in the words `model.VERDICTS` defines, and records in its values the
mean of the side the claim calls working (`claimed`) beside the best trivial answer of its cells (`trivial`),
and for a comparison the other arm's (`reference_claimed`, `reference_trivial`): a side no better than the
all-zero image, the mean image, the attack's initial guess (or, for label inference, the majority class)
never makes a claim reproduced, and where the arm the claim needs working does no better, the verdict is
`at a trivial baseline` (no attack works here, which says nothing about the paper). A metric that has trivial
answers, read from cells that record none, reproduces nothing either (`cells.unguarded`): `inconclusive`,
the verdict of a measurement that cannot tell (so is an interval that straddles no effect, or none at all).
`partly` means one thing: the direction holds and the size falls short.

A comparison of two attacks (`Beats`, `Close`), and a trend between its two ends (`Trend`), reproduces only
where both arms work: a gap measured against an arm at or below a trivial answer is a gap to a failed
reconstruction, as wide as that arm happens to fail (an N(0, 1) start scores below the all-zero image), so it
reads as partly at most (the direction holds: the working side beats a failed one). Only a defence compared with
no defence (`defended_b`), with a weaker one (`guard_side="b"`) or along its own strength (`defended_end`)
guards one arm, since the defended attack failing is its claim. A failed winner beaten by a working other side
reads as contradicted. `magnitude_only` in a verdict's values marks a contradiction of the paper's size alone
(the direction held or could not be told), which a reduced setting softens to partly (`model.Claim.judge`); a
direction measured significantly the other way is never magnitude-only.

The rules that compare two arms are here; those that read one set of cells (`Level`, `Fails`, `Holds`) are in
`splitlab.claims.one_sample`, named here too.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional

from splitlab.claims.cells import Paired, Rows, Select, Verdict, guard_of, level, unguarded
from splitlab.claims.one_sample import AtLeast, AtMost, Fails, Holds, Level
from splitlab.claims.stats import DB, Scale, interval, value_of, welch
from splitlab.claims.verdict_parts import (AT_TRIVIAL, arm_failed, columns_of, gap_target, missing_text,
                                          no_arm_text, paper_words, with_guards)

__all__ = ["Beats", "Trend", "Level", "AtLeast", "AtMost", "Fails", "Close", "Holds", "RULES"]


@dataclass(frozen=True)
class TwoSided(Paired):
    """A against B on `metric` (paired by `by`): what Beats and Close share."""
    a: Select = None  # type: ignore[assignment]
    b: Select = None  # type: ignore[assignment]
    metric: str = "psnr"
    higher_is_better: bool = True
    scale: Scale = DB
    metric_b: Optional[str] = None
    """B's metric where it differs from A's (two quantities of the same cells)."""
    guard: Optional[str] = None
    """The metric whose baselines judge A ("" for none; default: `metric` where the cells record baselines)."""
    guard_side: str = "a"
    """The arm that must work: "a" (the side the claim calls better), or "b" for a defence compared with a
    weaker one, where the weaker defence's arm must still leak for the comparison to mean anything."""
    defended_b: bool = False
    """B is a defence's arm against A's undefended attack: A must work, and B's attack failing (at or below a
    trivial answer) is what the claim says, so B is not guarded."""

    @property
    def selects(self) -> tuple[Select, ...]:
        return (self.a, self.b)

    def compare(self, rows: Rows):
        """(the difference in words, the values, its mean, low and high on the scale's axis in the claim's
        direction, the pairs, the working arm's guard, the other arm's guard, a guard metric the cells record
        no baseline for), or the verdict where there are no pairs."""
        a_rows, b_rows, s = self.a.rows(rows), self.b.rows(rows), self.scale
        sign = 1.0 if self.higher_is_better else -1.0
        diffs, n = self.differences(a_rows, b_rows, self.metric, self.metric_b or self.metric, s, sign)
        if not diffs:
            return Verdict("not attempted", "no paired results", "the sweep has no cells for both sides")
        mean, low, high = interval(diffs)
        lab, *shown_values = self.text(self.a.label, self.b.label, s, sign, mean, low, high, n)
        working, other_rows = (a_rows, b_rows) if self.guard_side == "a" else (b_rows, a_rows)
        up = self.higher_is_better if self.guard_side == "a" else not self.higher_is_better
        found = guard_of(working, self.metric, self.guard, up)
        other = guard_of(other_rows, self.metric, self.guard, up) if self.guard_side == "a" and not self.defended_b \
            else None
        values = with_guards(dict(zip(("mean", "low", "high"), shown_values), n=n), found, other)
        return lab, values, mean, low, high, n, found, other, unguarded(working, self.metric, self.guard)

    @property
    def labels(self) -> tuple[str, str]:
        """(the working arm's label, the other's)."""
        return (self.a.label, self.b.label) if self.guard_side == "a" else (self.b.label, self.a.label)


@dataclass(frozen=True)
class Beats(TwoSided):
    """A beats B on `metric` by the paper's `gap` (None: the paper gives no number), paired by `by`.

    reproduced: the 95% interval of the paired differences excludes no effect, A and B are both above the
    trivial baselines (with `guard_side="b"`, B alone), and the mean reaches the paper's gap within the scale's
    band; partly: the direction holds but the gap falls short or B is no better than a trivial answer (a gap
    to a failed arm); inconclusive: the interval cannot tell (or there is none); at a trivial baseline: A is
    no better than a trivial answer; contradicted: B is significantly better, or (a size only) the interval
    rules the paper's gap out."""
    summary: ClassVar[str] = "A is better than B, paired by seed, by the paper's gap where it gives one"
    gap: Optional[float] = None
    """The paper's A - B in the metric's units; on a log scale the factor by which A is better."""

    def __call__(self, rows: Rows) -> Verdict:
        compared = self.compare(rows)
        if isinstance(compared, Verdict):
            return compared
        lab, values, mean, low, high, n, found, other, missing = compared
        s, (working, reference) = self.scale, self.labels
        paper, target = paper_words(self.gap, s), gap_target(self.gap, s)
        if n < 2:
            return Verdict("inconclusive", lab, f"one paired {self.by}: no interval, so no verdict either way", values)
        if arm_failed(found) and (other is None or arm_failed(other)):
            return Verdict(AT_TRIVIAL, lab, no_arm_text(working, found, reference, other), values)
        if high < 0:
            return Verdict("contradicted", lab, f"{self.b.label} is better, against {paper}", values)
        if arm_failed(found):
            return Verdict(AT_TRIVIAL, lab, found.text(working) + ": the arm the claim needs working does "
                                              "not work here", values)
        if low > 0:
            if arm_failed(other):
                return Verdict("partly", lab, f"the direction holds, but {other.text(reference)}: the gap is "
                                              "measured against a failed arm", values)
            if target is None or mean >= target:
                if missing:
                    return Verdict("inconclusive", lab, missing_text(missing), values)
                return Verdict("reproduced", lab, "", values)
            return Verdict("partly", lab, f"the direction holds; the gap is short of {paper} by more than "
                                          f"{s.words()}", values)
        if target is not None and high < target:
            return Verdict("contradicted", lab, f"no significant difference, and the interval rules out {paper}",
                           {**values, "magnitude_only": True})
        return Verdict("inconclusive", lab, f"not significant over {n} {self.by}s", values)


@dataclass(frozen=True)
class Trend(Paired):
    """`metric` moves in `direction` (+1 rises, -1 falls) along the swept `x`, judged on its ends: the last
    setting against the first, paired by `by` (Welch's interval where the ends share no key).

    reproduced: the ends' interval excludes no change, the means move the claimed way at every step, both ends
    are above the trivial baselines (with `defended_end`, the better end alone) and (with the paper's `gap`, its
    change over the same range) the change reaches it within the band; partly: otherwise in the claimed
    direction, or a change measured from a worse end no better than a trivial answer (as wide as that end
    happens to fail); inconclusive: the ends' change is not significant (or has no interval); at a trivial
    baseline: the better end is no better than a trivial answer; contradicted: the ends move significantly the
    other way, or (a size only) the interval rules out the paper's change.
    `columns` reads the points from columns of the same cells instead ({x: column}; {x: (column, ...)}: the
    median of those columns, a phase of a curve such as BO's guided trials)."""
    summary: ClassVar[str] = "a metric moves one way along a swept setting: its ends paired by seed, every step"
    select: Select = None  # type: ignore[assignment]
    x: str = ""
    metric: str = "psnr"
    direction: int = 1
    higher_is_better: bool = True
    scale: Scale = DB
    gap: Optional[float] = None
    """The paper's change from the lab's first setting to its last, in the metric's units."""
    columns: Optional[Mapping[float, str]] = None
    guard: Optional[str] = None
    defended_end: bool = False
    """The worse end is a defence at its strongest (the most clients aggregated): its attack failing is what the
    claim says, so only the better end is guarded."""

    @property
    def selects(self) -> tuple[Select, ...]:
        return (self.select,)

    def _points(self, rows: Rows) -> dict[float, list[Mapping[str, Any]]]:
        points: dict[float, list] = {}
        for r in self.select.rows(rows):
            if self.columns is not None:
                for x, column in self.columns.items():
                    found = [v for v in (value_of(r, c) for c in columns_of(column)) if v is not None]
                    if found:
                        points.setdefault(float(x), []).append({**r, self.metric: statistics.median(found)})
            else:
                x = value_of(r, self.x)
                if x is not None and level([r], self.metric, self.scale) is not None:
                    points.setdefault(x, []).append(r)
        return points

    def _at(self, x: float) -> str:
        return f"{self.x or 'setting'} {x:g}"

    def _ends(self, first: Rows, last: Rows) -> tuple[float, float, float, str, int]:
        """direction x (last - first): mean, low, high (paired, else Welch; None for low and high where the
        run kept only means), how, n."""
        s, d = self.scale, float(self.direction)
        diffs, n = self.differences(last, first, self.metric, self.metric, s, d)
        if n >= 2:
            return (*interval(diffs), f"{n} paired {self.units}", n)
        a, b = (level(r, self.metric, s) for r in (last, first))
        cells = [[s.to_axis(v) for v in (value_of(r, self.metric) for r in side) if v is not None]
                 for side in (last, first)]
        if not all(len(c) >= 2 for c in cells):           # an earlier run's means only: no interval
            return d * (a[0] - b[0]), None, None, "the run kept only means", min(a[3], b[3])
        raw = welch(*cells)
        low, high = sorted((d * raw[1], d * raw[2]))
        return d * raw[0], low, high, f"unpaired, {a[3]} and {b[3]} cells", min(a[3], b[3])

    def __call__(self, rows: Rows) -> Verdict:
        points, s = self._points(rows), self.scale
        if len(points) < 2:
            return Verdict("not attempted", "fewer than two points", "the sweep has too few settings")
        xs = sorted(points)
        means = [level(points[x], self.metric, s)[0] for x in xs]
        lab = ", ".join(f"{self.x or 'setting'} {x:g}: {s.from_axis(m):.3g}{s.unit}" for x, m in zip(xs, means))
        mean, low, high, how, n = self._ends(points[xs[0]], points[xs[-1]])
        d = self.direction
        lab += (f"; last - first {s.difference(d * mean)} " + (f"(no interval: {how})" if low is None else
                f"[{s.difference(min(d * low, d * high))}, {s.difference(max(d * low, d * high))}] (95%, {how})"))
        better, worse = (xs[-1], xs[0]) if (d > 0) == self.higher_is_better else (xs[0], xs[-1])
        found = guard_of(points[better], self.metric, self.guard, self.higher_is_better)
        other = None if self.defended_end else guard_of(points[worse], self.metric, self.guard,
                                                         self.higher_is_better)
        values = with_guards({"first": s.from_axis(means[0]), "last": s.from_axis(means[-1]), "mean": mean, "low": low,
                              "high": high, "n": n}, found, other)
        steps = [d * (b - a) for a, b in zip(means, means[1:])]
        target = gap_target(self.gap, s)
        if low is None:
            return Verdict("inconclusive", lab, "no interval (the run kept only means); the ends move "
                                                + ("as claimed" if mean > 0 else "the other way"), values)
        if high < 0:
            return Verdict("contradicted", lab, "the ends move significantly the other way", values)
        if arm_failed(found):
            return Verdict(AT_TRIVIAL, lab, "no arm beats the trivial baseline: " + found.text(
                f"the better end ({self._at(better)})") + ", so the trend is among failed reconstructions", values)
        if low > 0:
            if arm_failed(other):
                return Verdict("partly", lab, "the direction holds, but " + other.text(f"the worse end ("
                               f"{self._at(worse)})") + ": the change is measured from a failed reconstruction", values)
            if target is not None and mean < target:
                return Verdict("partly", lab, f"the direction holds; the change is short of "
                                              f"{paper_words(self.gap, s)} by more than {s.words()}", values)
            if all(step >= 0 for step in steps):
                missing = unguarded(points[better], self.metric, self.guard)
                return Verdict("inconclusive", lab, missing_text(missing), values) if missing else \
                    Verdict("reproduced", lab, "", values)
            return Verdict("partly", lab, "the ends move as claimed, not every step", values)
        if target is not None and high < target:
            return Verdict("contradicted", lab, "no significant change, and the interval rules out "
                                                f"{paper_words(self.gap, s)}", {**values, "magnitude_only": True})
        return Verdict("inconclusive", lab, "the ends' change is not significant", values)


@dataclass(frozen=True)
class Close(TwoSided):
    """A is within `margin` of B on `metric` (paired by `by`); `one_sided`: A is no worse than B by more than
    `margin`. On a log scale the margin is a factor.

    reproduced: the interval of the paired differences lies inside the margin, and both arms are above the
    trivial baselines (being as good as a failed arm says nothing); contradicted: it lies wholly outside, A
    significantly worse (or, two-sided, different) by more than the margin: the relation the claim states,
    measured the other way, so never softened; at a trivial baseline: an arm is no better than a trivial
    answer; inconclusive: the interval straddles the margin, or there is none."""
    summary: ClassVar[str] = "A is within a margin of B (one-sided: no worse by more than it), paired by seed"
    margin: float = 1.0
    one_sided: bool = False

    def __call__(self, rows: Rows) -> Verdict:
        compared = self.compare(rows)
        if isinstance(compared, Verdict):
            return compared
        lab, values, mean, low, high, n, found, other, missing = compared
        s = self.scale
        m = s.to_axis(self.margin)
        band = (f"{'no worse than' if self.one_sided else 'within'} "
                f"{f'a factor {self.margin:g}' if s.log else f'{self.margin:g}{s.unit}'}")
        if n < 2:
            return Verdict("inconclusive", lab, f"one paired {self.by}: no interval", values)
        if arm_failed(other):
            reason = (no_arm_text(self.a.label, found, self.b.label, other) if arm_failed(found) else
                      other.text(self.b.label) + f", so being {band} of it says nothing")
            return Verdict(AT_TRIVIAL, lab, reason, values)
        if high < -m or (not self.one_sided and low > m):
            return Verdict("contradicted", lab, f"the interval lies outside the claim's margin ({band}): "
                                                "significantly the other way", values)
        if arm_failed(found):
            return Verdict(AT_TRIVIAL, lab, found.text(self.a.label) + ": the arm the claim needs working does "
                                              "not work here", values)
        if low > -m and (self.one_sided or high < m):
            if missing:
                return Verdict("inconclusive", lab, missing_text(missing), values)
            return Verdict("reproduced", lab, "", values)
        return Verdict("inconclusive", lab, f"the interval straddles the claim's margin ({band})", values)


RULES = (Beats, Trend, Level, Fails, Close, Holds)

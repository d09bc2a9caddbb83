"""What the rules share: a sweep's cells (`Rows`), a selection of them (`Select`), the verdict a rule returns,
a metric's mean and interval over cells, the trivial-baseline guard and the paired differences.

Earlier runs that the lab kept only as summaries (splitlab/results/earlier/) appear as one row per setting
with `n` and `<metric>.std` beside the mean, or as per-seed paired differences (`paired.<metric>`); the
level rules read the former, the paired rules the latter, and neither mixes them with cells.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from scipy.special import stdtrit

from splitlab.claims.stats import (DB, FACTOR, PLAIN, SHARE, SSIM, Scale, at_or_below, interval, share_interval, trivial,
                                   value_of, yes_count)

__all__ = ["Rows", "Select", "Verdict", "level", "shown", "Guard", "guard_of", "GUARD_SCALES", "Paired", "SUMMARY",
           "matches", "unguarded"]

SUMMARY = "cells_summarised"
"""The column of an earlier run's summary row: how many cells its mean and std summarise."""

Rows = Sequence[Mapping[str, Any]]
"""A sweep's results: one mapping per cell (swept values and dotted metric keys, as in results.csv)."""


@dataclass(frozen=True)
class Verdict:
    verdict: str
    lab: str
    """The lab's numbers in words ("+1.5 dB [0.5, 2.5] (95%, 6 paired seeds)")."""
    reason: str = ""
    values: Mapping[str, Any] = None  # type: ignore[assignment]
    images: str = ""
    """How many distinct images stand behind the numbers ("" for claims that attack no image)."""

    def __post_init__(self):
        if self.values is None:
            object.__setattr__(self, "values", {})


@dataclass(frozen=True)
class Select:
    """The cells of a sweep with these swept values (`{"attack": "fedleak"}`; a tuple: any of them); `label`
    names them in the text."""
    where: Mapping[str, Any]
    label: str

    def rows(self, rows: Rows) -> list[Mapping[str, Any]]:
        return [r for r in rows if r.get("status", "ok") == "ok"
                and all(matches(r.get(k), v) for k, v in self.where.items())]


def matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, tuple):
        return any(_same(value, w) for w in wanted)
    return _same(value, wanted)


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        try:
            return abs(float(a) - float(b)) <= max(1e-9 * abs(float(b)), 1e-12)
        except (TypeError, ValueError):
            return False
    return str(a) == str(b)


def _summary(rows: Rows, metric: str) -> Optional[tuple[float, float, float, int]]:
    """(mean, low, high, n) of an earlier run that kept only a setting's mean, std and count (one row with
    `cells_summarised` and `<metric>.std`): the same t-interval as from its cells, or the mean alone without a std."""
    kept = [r for r in rows if value_of(r, SUMMARY) is not None and value_of(r, metric) is not None]
    if len(kept) != 1:
        return None
    row = kept[0]
    mean, n, std = value_of(row, metric), int(value_of(row, SUMMARY)), value_of(row, f"{metric}.std")
    if std is None or n < 2:
        return mean, mean, mean, n
    half = float(stdtrit(n - 1, 0.975)) * std / n ** 0.5
    return mean, mean - half, mean + half, n


def level(rows: Rows, metric: str, scale: Scale) -> Optional[tuple[float, float, float, int]]:
    """(mean, low, high, n) of a metric over cells, on the scale's axis (log10 for errors)."""
    found = [v for v in (value_of(r, metric) for r in rows if value_of(r, SUMMARY) is None) if v is not None]
    if found:
        if scale.log and any(v <= 0 for v in found):
            return None
        if scale.binary:                        # yes/no per cell: the share saying yes, its exact interval
            yes = yes_count(found)
            return (yes / len(found), *share_interval(yes, len(found)), len(found))
        mean, low, high = interval([scale.to_axis(v) for v in found])
        return (mean, *scale.within(low, high, found), len(found))
    kept = _summary(rows, metric)
    if kept is None or scale.log:
        return None
    mean, low, high, n = kept
    if scale.binary:                            # a kept share of yes answers: its exact interval, as from the cells
        return (mean, *share_interval(round(mean * n), n), n)
    return (mean, *scale.within(low, high, [mean]), n)


def shown(scale: Scale, mean: float, low: float, high: float) -> str:
    """A mean and its interval (given on the scale's axis) in the metric's own units."""
    to = scale.from_axis
    if low == high:
        return f"{to(mean):.4g}{scale.unit} (no interval)"
    return f"{to(mean):.4g}{scale.unit} [{to(low):.4g}, {to(high):.4g}]"


GUARD_SCALES = {"psnr": DB, "ssim": SSIM, "image_mse": FACTOR, "label_accuracy": SHARE, "leak_auc": SHARE}
"""The scale whose margin says how close to a trivial answer counts as at it, per guard metric."""


@dataclass(frozen=True)
class Guard:
    """The claimed side on the guard metric (mean and 95% interval) beside the best trivial answer."""
    claimed: float
    low: float
    high: float
    trivial: float
    what: str
    metric: str
    higher_is_better: bool

    def _at(self, value: float) -> bool:
        return at_or_below(value, self.trivial, GUARD_SCALES.get(self.metric, DB), self.higher_is_better)

    @property
    def failed(self) -> bool:
        """The mean is no better than the trivial answer."""
        return self._at(self.claimed)

    @property
    def failed_outright(self) -> bool:
        """Even the interval's better end is no better than the trivial answer."""
        return self._at(self.high if self.higher_is_better else self.low)

    def text(self, label: str) -> str:
        return f"{label} is no better than {self.what} ({self.metric} {self.claimed:.4g} against {self.trivial:.4g})"

    def values(self) -> dict:
        return {"claimed": self.claimed, "trivial": self.trivial, "guard": self.metric}


def unguarded(rows: Rows, metric: str, guard: Optional[str]) -> Optional[str]:
    """The guard metric where it has trivial answers (`GUARD_SCALES`) but these cells record none of them: a rule
    cannot tell whether any side works, so it cannot reproduce the claim. None where a guard applies, or none
    is meant (`guard=""`: the metric has no trivial answer, such as a time, a bound or a model's accuracy)."""
    name = metric if guard is None else guard
    if not name or name not in GUARD_SCALES or not rows:
        return None
    return name if trivial(rows, name, True) is None else None


def guard_of(rows: Rows, metric: str, guard: Optional[str], higher: bool) -> Optional[Guard]:
    """The guard on `guard` (or on `metric` where the cells record its baselines); None where none applies."""
    name = metric if guard is None else guard
    if not name:
        return None
    up = higher if guard is None else name != "image_mse"
    base = trivial(rows, name, up)
    found = level(rows, name, PLAIN)
    if base is None or found is None:
        return None
    mean, low, high, _ = found
    return Guard(mean, low, high, base[0], base[1], name, up)


# Pairing keys whose plural is not the key plus "s".
_PLURALS = {"index": "indices", "batch": "batches"}


@dataclass(frozen=True)
class Paired:
    """Shared by the two-sided rules: the metric per pairing key, and the paired differences."""
    by: str = "seed"

    @property
    def units(self) -> str:
        """The pairing key in the plural, as the intervals print it ("5 paired seeds", "10 paired indices")."""
        return _PLURALS.get(self.by, f"{self.by}s")

    def per_key(self, rows: Rows, metric: str, scale: Scale) -> dict[Any, float]:
        found: dict[Any, list[float]] = {}
        for r in rows:
            value = value_of(r, metric)
            if value is not None and (not scale.log or value > 0) and value_of(r, SUMMARY) is None:
                found.setdefault(r.get(self.by), []).append(scale.to_axis(value))
        return {k: statistics.fmean(v) for k, v in found.items()}

    def differences(self, a_rows: Rows, b_rows: Rows, metric_a: str, metric_b: str, scale: Scale, sign: float):
        """The signed paired differences a - b (on the scale's axis); earlier runs that kept only per-seed
        differences carry them as `paired.<metric>` on the a side."""
        left, right = self.per_key(a_rows, metric_a, scale), self.per_key(b_rows, metric_b, scale)
        keys = [k for k in left if k in right]
        if keys:
            return [sign * (left[k] - right[k]) for k in keys], len(keys)
        kept = [v for v in (value_of(r, f"paired.{metric_a}") for r in a_rows) if v is not None]
        return [sign * scale.to_axis(v) if scale.log else sign * v for v in kept], len(kept)

    def text(self, a: str, b: str, scale: Scale, sign: float, mean: float, low: float, high: float, n: int):
        """(the paired difference in words, its mean, low and high in the metric's own sense)."""
        ends = sorted((sign * low, sign * high))
        joint = " / " if scale.log else " - "
        return (f"{a}{joint}{b}: {scale.difference(sign * mean)} [{scale.difference(ends[0])}, "
                f"{scale.difference(ends[1])}] (95%, {n} paired {self.units})", sign * mean, *ends)



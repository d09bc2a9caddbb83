"""The rules that read one set of cells: a mean against the paper's number (`Level`, `AtLeast`, `AtMost`), cells
against their trivial answers (`Fails`), a yes/no property over cells (`Holds`). `splitlab.claims.rules` names
every rule; the rules that compare two arms live there."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional

from splitlab.claims.cells import Rows, Select, Verdict, guard_of, unguarded
from splitlab.claims.stats import BASELINES, DB, Scale, at_or_below, share_interval, trivial, value_of, yes_count
from splitlab.claims.verdict_parts import AT_TRIVIAL, arm_failed, missing_text, over_cells, with_guards

__all__ = ["Level", "AtLeast", "AtMost", "Fails", "Holds"]


@dataclass(frozen=True)
class Level:
    """The mean of `metric` over the selected cells reaches the paper's `value` (or, `higher_is_better`
    False, stays at or below it), within the scale's band.

    reproduced: the mean meets the paper's number within the band, above the trivial baselines; partly: above
    them but short of the number while the interval still reaches it; at a trivial baseline: no better than a
    trivial answer on average only; contradicted: the interval rules the paper's number out (a size), or even its
    better end is no better than a trivial answer (the attack fails outright: the direction)."""
    summary: ClassVar[str] = "a mean reaches the paper's number (or stays under it), judged on its interval"
    select: Select
    metric: str
    value: float
    higher_is_better: bool = True
    scale: Scale = DB
    guard: Optional[str] = None
    reading: str = ""
    """Where `value` is not a number the paper gives but the lab's reading of its words ("'high accuracy'"):
    those words, so the verdict names the reading, not a paper's number."""

    @property
    def selects(self) -> tuple[Select, ...]:
        return (self.select,)

    def __call__(self, rows: Rows) -> Verdict:
        over = over_cells(self, rows)
        if isinstance(over, Verdict):
            return over
        chosen, mean, low, high, n, lab = over
        s = self.scale
        found = guard_of(chosen, self.metric, self.guard, self.higher_is_better)
        values = with_guards({"mean": s.from_axis(mean), "low": s.from_axis(low), "high": s.from_axis(high), "n": n},
                       found)
        sign = 1.0 if self.higher_is_better else -1.0
        paper = (f"{self.value:g}{s.unit} (the lab's reading of {self.reading}, not a number of the paper's)"
                 if self.reading else f"the paper's {self.value:g}{s.unit}")
        if found is not None and found.failed_outright and found.low != found.high:
            return Verdict("contradicted", lab, found.text(self.select.label) + " at either end of its interval: "
                                                "the attack does not work here", values)
        if arm_failed(found):
            return Verdict(AT_TRIVIAL, lab, "no arm beats the trivial baseline on average: "
                           + found.text(self.select.label), values)
        target = s.to_axis(self.value)
        if sign * (mean - target) >= -s.axis_band:
            missing = unguarded(chosen, self.metric, self.guard)
            return Verdict("inconclusive", lab, missing_text(missing), values) if missing else \
                Verdict("reproduced", lab, "", values)
        best_end = high if self.higher_is_better else low
        if low != high and sign * (best_end - target) < -s.axis_band:
            return Verdict("contradicted", lab, f"the interval rules out {paper} (within {s.words()})",
                           {**values, "magnitude_only": True})
        return Verdict("partly", lab, f"short of {paper} by more than {s.words()}"
                                      + ("" if low != high else "; no interval"), values)


def AtLeast(select: Select, metric: str, value: float, scale: Scale = DB, guard: Optional[str] = None,
            reading: str = "") -> Level:
    return Level(select, metric, value, True, scale, guard, reading)


def AtMost(select: Select, metric: str, value: float, scale: Scale = DB, guard: Optional[str] = None,
           reading: str = "") -> Level:
    return Level(select, metric, value, False, scale, guard, reading)


@dataclass(frozen=True)
class Fails:
    """The selected cells do no better than the best trivial answer on `metric` (`fails=False`: they do
    better, the attack still leaks), judged on the 95% interval of their mean.

    reproduced: the whole interval is on the claimed side of the trivial baseline (within its margin);
    contradicted: the whole interval is on the other side; inconclusive: the interval straddles it, or there
    is no interval. `two_sided` reads each cell as its distance from its own trivial answer (|AUC - 0.5|): an
    attack pushed below chance ranks the truth last, which leaks as much read the other way
    (`splitlab.matrix_score.TWO_SIDED`), so a defence that does that has not made it fail."""
    summary: ClassVar[str] = "the cells do no better (or, for a leak, better) than the best trivial answer"
    select: Select
    metric: str = "psnr"
    higher_is_better: bool = True
    scale: Scale = DB
    fails: bool = True
    two_sided: bool = False

    @property
    def selects(self) -> tuple[Select, ...]:
        return (self.select,)

    def _from_chance(self, rows: Rows) -> list[Mapping[str, Any]]:
        """Each selected cell with `metric` replaced by its distance from the cell's best trivial answer, and that
        answer by 0 (cells without a baseline keep none, and the verdict says so)."""
        out = []
        for r in self.select.rows(rows):
            value, base = value_of(r, self.metric), trivial([r], self.metric, self.higher_is_better)
            if value is None or base is None:
                out.append({k: v for k, v in r.items() if not k.startswith("baselines.")})
                continue
            cleared = {f"baselines.{name}.{self.metric}": 0.0 for name in BASELINES
                       if value_of(r, f"baselines.{name}.{self.metric}") is not None}
            out.append({**r, self.metric: abs(value - base[0]), **cleared})
        return out

    def __call__(self, rows: Rows) -> Verdict:
        over = over_cells(self, self._from_chance(rows) if self.two_sided else rows)
        if isinstance(over, Verdict):
            return over
        chosen, mean, low, high, n, lab = over
        if self.two_sided:
            lab = f"distance from chance |{self.metric} - trivial|, " + lab
        s, base = self.scale, trivial(chosen, self.metric, self.higher_is_better)
        if base is None:
            return Verdict("inconclusive", lab, "the cells record no trivial baseline to compare with",
                           {"mean": s.from_axis(mean), "n": n})
        lab += f"; {base[1]}: {base[0]:.4g}{s.unit}"
        values = {"mean": s.from_axis(mean), "low": s.from_axis(low), "high": s.from_axis(high), "n": n,
                  "claimed": s.from_axis(mean), "trivial": base[0], "guard": self.metric}
        best, worst = (high, low) if self.higher_is_better else (low, high)
        if low == high:
            return Verdict("inconclusive", lab, "no interval (one cell, or a run that kept only its mean)", values)
        if at_or_below(s.from_axis(best), base[0], s, self.higher_is_better):
            if self.fails:
                return Verdict("reproduced", lab, "", values)
            return Verdict("contradicted", lab, f"no better than {base[1]}: nothing leaks", values)
        if not at_or_below(s.from_axis(worst), base[0], s, self.higher_is_better):
            if self.fails:
                return Verdict("contradicted", lab, f"better than {base[1]}: the attack still leaks"
                               + (" (below chance: read the other way)" if self.two_sided else ""), values)
            return Verdict("reproduced", lab, "", values)
        return Verdict("inconclusive", lab, f"the interval straddles {base[1]}'s {base[0]:.4g}{s.unit}", values)


@dataclass(frozen=True)
class Holds:
    """A yes/no `flag` (1 when the property holds) in every selected cell (`most`: in more than half).

    reproduced: it holds in every cell (most: in more than half); contradicted: it fails in more than half;
    partly: in between. The share is shown with its exact 95% interval."""
    summary: ClassVar[str] = "a yes/no property holds in every cell (or in most), with its exact interval"
    select: Select
    flag: str
    most: bool = False

    @property
    def selects(self) -> tuple[Select, ...]:
        return (self.select,)

    def __call__(self, rows: Rows) -> Verdict:
        found = [v for v in (value_of(r, self.flag) for r in self.select.rows(rows)) if v is not None]
        if not found:
            return Verdict("not attempted", "no results", f"no cell records {self.flag}")
        k, n = yes_count(found), len(found)
        low, high = share_interval(k, n)
        lab = f"{self.select.label}: holds in {k} of {n} cells" + (f" [{low:.2f}, {high:.2f}]" if n > 1 else "")
        values = {"mean": k / n, "low": low, "high": high, "n": n}
        if (k > n / 2) if self.most else (k == n):
            return Verdict("reproduced", lab, "", values)
        if k < n / 2:
            return Verdict("contradicted", lab, f"fails in {n - k} of {n} cells", values)
        return Verdict("partly", lab, f"holds in {k} of {n} cells, not " + ("most" if self.most else "all"), values)

"""A claim of a paper as data, and what its verdict means.

A `Claim` names the paper and where (table, figure, section), says the claim in one sentence, gives the
paper's own numbers and setting, and how the lab measures it: a shipped sweep, the cells compared, the
metric, and a rule (`rules.py`). Verdicts are computed, never typed. Each verdict has one meaning (`MEANINGS`,
printed on docs/claims.md from here), whatever the rule:

- a claim is an *experiment* (the lab reruns what the paper ran, usually smaller) or an *exact check* (a
  theorem's step, or the lab's own formula, checked to float64 precision); the scoreboard counts them apart;
- no measurement at or below a trivial baseline (the all-zero image, the mean image, the attack's initial
  guess; for label inference, the majority class for every sample) is reproduced, for any rule; the side a
  claim calls worse may fail outright;
- a reduced setting (a smaller model, dataset or budget than the paper's) never caps a result that meets the
  paper's size, and turns a contradiction of the paper's size alone into partly, for every rule; it never
  softens a contradiction of the paper's direction;
- a claim whose measurement the lab's setting decides (a vacuous bound, a rule used outside its regime, a
  different model) is `measured, not comparable`: the measurement is shown with that reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from splitlab.claims.cells import Rows, Select, Verdict, matches
from splitlab.claims.stats import images_behind

__all__ = ["Claim", "Measure", "Verdict", "Select", "Rows", "VERDICTS", "CHECKS", "MEANINGS", "KINDS"]

VERDICTS = ("reproduced", "partly", "contradicted", "measured, not comparable", "not attempted")
"""The verdicts of an experiment, best first."""
CHECKS = ("holds", "fails", "not run")
"""The verdicts of an exact check."""
KINDS = ("experiment", "exact check")
MEANINGS = {
    "reproduced": "the paper's effect at the paper's size (its number or gap met within a band in the metric's "
                  "own units: 1 dB of PSNR, 1 accuracy point, 0.05 of SSIM or of a share, a factor 2 in an "
                  "error), with a 95% paired interval that excludes no effect where noise matters, and every "
                  "side the claim calls working above the trivial baselines",
    "partly": "the effect's direction holds but its size falls short (or is ruled out only at the lab's "
              "reduced setting), or the interval cannot tell, or the side the claim calls working is no better "
              "than a trivial baseline",
    "contradicted": "the interval excludes the paper's direction (the other side significantly better, a "
                    "trend significantly reversed, an attack that does no better than a trivial answer where "
                    "the paper's works), or, at the paper's own setting, rules out the paper's size",
    "measured, not comparable": "the lab measured it, but its setting differs from the paper's in a way that "
                                "decides the outcome; the measurement is shown with that reason",
    "not attempted": "nothing measured: the reason says why (scale, model, dataset, time on a CPU), or the "
                     "grid that measures it has no shipped results yet",
    "holds": "an exact check (a theorem's step or the lab's own formula, in float64) holds",
    "fails": "an exact check does not hold as the paper states it",
    "not run": "an exact check whose results are not shipped",
}
"""One meaning per verdict, stated once: docs/claims.md and `splitlab claims --json` print these."""

Rule = Callable[[Rows], Verdict]


@dataclass(frozen=True)
class Measure:
    """How the lab measures a claim: a sweep (its shipped results file) and a rule over its rows."""
    sweep: str
    rule: Rule
    how: str
    """The measurement in words: the metric and the aggregation over seeds."""

    @property
    def selections(self) -> tuple[Select, ...]:
        """The cells the rule reads."""
        return tuple(self.rule.selects)


@dataclass(frozen=True)
class Claim:
    id: str
    """`paper.where.what` (`fedleak.tab3.beats-ig`)."""
    paper: str
    where: str
    claim: str
    paper_numbers: str
    """The paper's own numbers and setting, as it states them."""
    measure: Optional[Measure] = None
    """None: not attempted (`reason` says why)."""
    reduced: str = ""
    """How the lab's setting is smaller than the paper's (scale, model, dataset): a contradiction of the paper's
    size alone becomes partly, with this as the reason."""
    reason: str = ""
    """Why the claim is not attempted, or what limits it beyond the rule."""
    exact: bool = False
    """An exact check of a theorem's step or of the lab's own formula, not a reproduction of an experiment."""
    not_comparable: str = ""
    """Why the lab's setting decides this measurement's outcome: the verdict is `measured, not comparable`
    (always, or with `comparable_if`, whenever a cell the rule reads falls outside it)."""
    comparable_if: Mapping[str, Any] = field(default_factory=dict)
    """Values (of columns of the cells) under which the measurement is comparable after all."""

    @property
    def kind(self) -> str:
        return "exact check" if self.exact else "experiment"

    def _read(self, rows: Rows) -> list[Mapping[str, Any]]:
        chosen = [r for s in self.measure.selections for r in s.rows(rows)]
        return list({id(r): r for r in chosen}.values())

    def _comparable(self, read: list) -> bool:
        if not self.not_comparable:
            return True
        return bool(self.comparable_if) and bool(read) and all(
            all(matches(r.get(k), v) for k, v in self.comparable_if.items()) for r in read)

    def judge(self, rows: Rows | None, source: str = "") -> Verdict:
        """The verdict on these rows (None: nothing shipped); `source` names an earlier run they come from."""
        absent = "not run" if self.exact else "not attempted"
        if self.measure is None:
            return Verdict(absent, "-", self.reason)
        if rows is None:
            return Verdict(absent, "no shipped results", f"run `splitlab claims --run {self.id}`")
        verdict = self.measure.rule(rows)
        read = self._read(rows)
        words, reason, values = verdict.verdict, verdict.reason, dict(verdict.values)
        lab = verdict.lab + (f" ({source})" if source else "")
        if words == "not attempted":
            return Verdict(absent, lab, "; ".join(filter(None, [reason, self.reason])), values)
        if self.exact:
            held = words == "reproduced"
            return Verdict("holds" if held else "fails", lab,
                           reason if held else "; ".join(filter(None, [reason, self.reason])), values)
        if not self._comparable(read):
            return Verdict("measured, not comparable", lab, f"{self.not_comparable} (the rule alone: {words}"
                           + (f", {reason})" if reason else ")"), values, images_behind(read))
        if values.get("magnitude_only") and self.reduced:
            words, reason = "partly", f"{reason}; only at the lab's reduced setting: {self.reduced}"
        elif words != "reproduced" and self.reason:
            reason = "; ".join(filter(None, [reason, self.reason]))
        return Verdict(words, lab, reason, values, images_behind(read))

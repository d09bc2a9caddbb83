"""A claim of a paper as data, and what its verdict means.

A `Claim` names the paper and where (table, figure, section), says the claim in one sentence, gives the
paper's own numbers and setting, and how the lab measures it: a shipped sweep, the cells compared, the
metric, and a rule (`rules.py`). Verdicts are computed, never typed. Each verdict has one meaning (`MEANINGS`,
printed on docs/claims.md from here), whatever the rule:

- a claim is an *experiment* (the lab reruns what the paper ran, usually smaller) or an *exact check* (a
  theorem's step, or the lab's own formula, checked to float64 precision); the scoreboard counts them apart;
- no measurement at or below a trivial baseline (the all-zero image, the mean image, the attack's initial
  guess; for label inference, the majority class for every sample) is reproduced, for any rule; where the
  arm the claim needs working does no better, the verdict is `at a trivial baseline` (no attack works here,
  which says nothing about the paper), never partly;
- partly means one thing: the direction holds and the size falls short; a measurement that cannot tell (an
  interval that straddles no effect, or none) is `inconclusive`;
- a reduced setting (a smaller model, dataset or budget than the paper's, which makes the paper's effect
  harder to reach) turns a contradiction of the paper's size alone into partly, for every rule; it never
  softens a contradiction of the paper's direction;
- an easier setting (a smaller batch, random instead of pretrained weights, an easier case than the
  paper's) is not a reduced one: a result met there is at most partly until the paper's setting runs;
- a measurement whose seeds never varied the data (the same images on every seed) cannot judge a claim
  about attacks on images, not even to say that no attack works: its interval speaks for those images only, so
  the verdict is `inconclusive`;
- a claim whose measurement the lab's setting decides (a vacuous bound, a rule used outside its regime, a
  different model) is `measured, not comparable`: the measurement is shown with that reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from splitlab.claims.cells import Rows, Select, Verdict, matches
from splitlab.claims.stats import images_behind, images_fixed
from splitlab.claims.verdict_parts import AT_TRIVIAL

__all__ = ["Claim", "Measure", "Verdict", "Select", "Rows", "VERDICTS", "CHECKS", "MEANINGS", "KINDS"]

VERDICTS = ("reproduced", "partly", "contradicted", "inconclusive", AT_TRIVIAL, "measured, not comparable",
            "not attempted")
"""The verdicts of an experiment, best first."""
CHECKS = ("holds", "fails", "not run")
"""The verdicts of an exact check."""
KINDS = ("experiment", "exact check")
MEANINGS = {
    "reproduced": "the paper's effect at the paper's size (its number or gap met within a band in the metric's "
                  "own units: 1 dB of PSNR, 1 accuracy point, 0.05 of SSIM or of a share, a factor 2 in an "
                  "error), with a 95% paired interval that excludes no effect where noise matters, every "
                  "side the claim calls working above the trivial baselines, at the paper's setting or a harder "
                  "(reduced) one, never only at an easier one, on seeds that drew their own images",
    "partly": "the effect's direction holds but its size falls short of the paper's (or is ruled out only at "
              "the lab's reduced setting, or is met only at a setting easier than the paper's)",
    "contradicted": "the interval excludes the paper's direction (the other side significantly better, a "
                    "trend significantly reversed, an attack that does no better than a trivial answer where "
                    "the paper's works), or, at the paper's own setting, rules out the paper's size",
    "inconclusive": "the measurement cannot judge the claim either way: its interval cannot tell an effect "
                    "from none (or there is no interval), its cells record no trivial baseline for a metric "
                    "that has them, or its seeds never varied the images, so its interval speaks for those "
                    "images only; the reason says which",
    AT_TRIVIAL: "the arm the claim needs working (every arm of a comparison, the better end of a trend) does no "
                "better than a trivial answer (the all-zero image, the mean image, the attack's start; for "
                "labels, the majority class): no attack works in the lab's setting, which says nothing about "
                "the paper either way",
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
    easier: str = ""
    """How the lab's setting is easier than the paper's (a smaller batch, random instead of pretrained weights,
    an easier case): a result that meets the paper's size there is partly, not reproduced, until the paper's
    setting runs."""
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
        images = images_behind(read)
        if images_fixed(read) and not _data_free(self.measure.rule):
            # said even where the rule alone cannot tell: another seed's images could not have settled it either
            return Verdict("inconclusive", lab, f"the seeds never varied the images ({images}): the interval "
                           f"speaks for those images only, so it cannot judge the claim (the rule alone: {words}"
                           + (f", {reason})" if reason else ")"), values, images)
        if values.get("magnitude_only") and self.reduced:
            words, reason = "partly", f"{reason}; only at the lab's reduced setting: {self.reduced}"
        elif words == "reproduced" and self.easier:
            words, reason = "partly", (f"met only at a setting easier than the paper's ({self.easier}); "
                                       "reproduced only once the paper's setting runs")
        elif words != "reproduced" and self.reason:
            reason = "; ".join(filter(None, [reason, self.reason]))
        return Verdict(words, lab, reason, values, images)


DATA_FREE = ("seconds", "seconds_per_step")
"""Metrics that do not depend on which images were attacked (a wall time): a grid whose seeds never varied the
images still measures them."""


def _data_free(rule) -> bool:
    return getattr(rule, "metric", "") in DATA_FREE

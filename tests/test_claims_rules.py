"""Every rule of the claims ledger can fail: for each rule type, rows where the claim is true give reproduced,
rows where it is false give contradicted, and rows at a trivial baseline (the all-zero image, the mean image,
the initial guess) never give reproduced. Then what a claim adds to its rule, the same for every rule: a
reduced setting softens a contradiction of the paper's size alone, never one of its direction; exact checks,
`measured, not comparable`, earlier runs, and the images behind a claim.
"""
from __future__ import annotations

import math

import pytest

from splitlab.claims.model import CHECKS, MEANINGS, VERDICTS, Claim, Measure, Select
from splitlab.claims.rules import RULES, AtLeast, Beats, Close, Fails, Holds, Level, Trend
from splitlab.claims.stats import FACTOR, POINTS, SHARE, images_behind, images_fixed, interval, share_interval, welch
from splitlab.claims.verdict_parts import AT_TRIVIAL

A, B = Select({"attack": "a"}, "A"), Select({"attack": "b"}, "B")
ALL = Select({}, "all")
BASE = {"baselines.zero.psnr": 9.0, "baselines.mean.psnr": 10.0, "baselines.initial.psnr": 5.0}
"""The trivial answers: the best of them (the mean image, 10 dB) is the level no working attack sits at."""
SEEDS = range(5)
JITTER = (0.0, 0.3, -0.2, 0.1, -0.25)


def _pairs(a: float, b: float, spread: float = 1.0) -> list[dict]:
    """Cells of A and B on five seeds (A's values jitter, so the paired differences have a spread)."""
    return [r for s in SEEDS for r in ({"attack": "a", "seed": s, "psnr": a + spread * JITTER[s], **BASE},
                                       {"attack": "b", "seed": s, "psnr": b, **BASE})]


def _trend(means: list[float], spread: float = 1.0) -> list[dict]:
    """Cells along x on five seeds; the jitter grows along x, so the ends' paired differences have a spread."""
    return [{"x": x, "seed": s, "psnr": m + spread * JITTER[s] * (1 + i), **BASE}
            for i, (x, m) in enumerate(zip((1, 2, 5, 10), means)) for s in SEEDS]


def _cells(value: float, spread: float = 1.0, **extra) -> list[dict]:
    return [{"seed": s, "psnr": value + spread * JITTER[s], **BASE, **extra} for s in SEEDS]


def _flags(*values: bool) -> list[dict]:
    return [{"seed": s, "flag": v} for s, v in enumerate(values)]


# --- one case per rule type: the claim true, false, and at a trivial baseline ------------------------------------

CASES = {
    Beats: (Beats(a=A, b=B, gap=8.0), _pairs(20.0, 12.0), _pairs(12.0, 20.0), _pairs(9.8, 5.0)),
    Trend: (Trend(select=ALL, x="x"), _trend([11, 13, 15, 17]), _trend([17, 15, 13, 11]), _trend([7, 8, 9, 9.9], 0.2)),
    Level: (AtLeast(ALL, "psnr", 22.5), _cells(22.0, 0.5), _cells(12.0, 0.3), _cells(9.5, 0.1)),
    Fails: (Fails(ALL, fails=False), _cells(15.0, 0.5), _cells(9.5, 0.1), _cells(10.0, 0.05)),
    Close: (Close(a=A, b=B, margin=1.0), _pairs(15.1, 15.0, 0.2), _pairs(12.0, 15.0, 0.2), _pairs(9.6, 9.5, 0.2)),
    Holds: (Holds(ALL, "flag"), _flags(True, True, True), _flags(False, False, True), None),
}
"""rule type -> (a rule, rows where its claim is true, rows where it is false, rows at a trivial baseline)."""


def test_every_rule_type_has_cases():
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("kind", RULES, ids=[r.__name__ for r in RULES])
def test_a_true_claim_is_reproduced(kind):
    rule, true, _, _ = CASES[kind]
    verdict = rule(true)
    assert verdict.verdict == "reproduced", (verdict.lab, verdict.reason)


@pytest.mark.parametrize("kind", RULES, ids=[r.__name__ for r in RULES])
def test_a_false_claim_is_contradicted(kind):
    rule, _, false, _ = CASES[kind]
    verdict = rule(false)
    assert verdict.verdict == "contradicted", (verdict.lab, verdict.reason)


@pytest.mark.parametrize("kind", [r for r in RULES if r is not Holds], ids=lambda r: r.__name__)
def test_at_a_trivial_baseline_nothing_is_reproduced(kind):
    rule, _, _, trivial = CASES[kind]
    verdict = rule(trivial)
    assert verdict.verdict != "reproduced", (verdict.lab, verdict.reason)
    assert verdict.values.get("trivial") == 10.0, verdict.values


def test_a_yes_no_property_of_a_vacuous_measurement_is_not_comparable():
    """Holds has no image to compare with a trivial one; its trivial case is a vacuous measurement (a bound
    that holds because it says nothing), which the claim declares not comparable."""
    claim = Claim("p.w.vacuous", "p", "w", "c", "n", Measure("x", Holds(ALL, "flag"), "flag"),
                  not_comparable="every bound is vacuous", comparable_if={"non_vacuous": True})
    rows = [dict(r, non_vacuous=False) for r in _flags(True, True, True)]
    assert claim.judge(rows).verdict == "measured, not comparable"
    assert claim.judge([dict(r, non_vacuous=True) for r in rows]).verdict == "reproduced"


# --- what each rule's verdict rests on ----------------------------------------------------------------------------

def test_the_contradiction_test_comes_before_the_trivial_guard():
    """A winner no better than a trivial image, beaten by the other side: the paper's direction is false."""
    assert Beats(a=A, b=B)(_pairs(9.5, 14.0)).verdict == "contradicted"


def test_a_gap_to_a_failed_arm_reproduces_nothing():
    """A false claim "A beats B by 8 dB": A works barely (10.8 dB against the mean image's 10), B fails far below
    every trivial answer (2.5 dB, as an N(0, 1) start scores), so the paired gap of +8.3 dB is a gap to a failed
    reconstruction. The old rule guarded A alone and reproduced it; both arms must work."""
    verdict = Beats(a=A, b=B, gap=8.0)(_pairs(10.8, 2.5, 0.1))
    assert verdict.verdict == "partly", (verdict.lab, verdict.reason)
    assert "B is no better than the mean image" in verdict.reason and "failed arm" in verdict.reason
    assert verdict.values["reference_claimed"] == pytest.approx(2.5)
    ablation = Beats(a=A, b=B, gap=1.47)(_pairs(14.0, 9.4))    # fedleak.tab19.l1: without L1, the zero image
    assert ablation.verdict == "partly" and ablation.values["claimed"] > ablation.values["trivial"]
    assert Beats(a=A, b=B, gap=1.47)(_pairs(14.0, 11.5)).verdict == "reproduced"


def test_a_defence_whose_attack_fails_is_its_claim_not_a_failed_arm():
    """A defence claim reads "no defence (A) leaks more than the defence (B)": B's attack at a trivial answer is
    what the defence promises, so only A is guarded (`defended_b`); without it the gap reads as partly."""
    rows = _pairs(14.0, 2.5, 0.1)
    assert Beats(a=A, b=B, gap=1.0)(rows).verdict == "partly"
    assert Beats(a=A, b=B, gap=1.0, defended_b=True)(rows).verdict == "reproduced"
    assert Beats(a=A, b=B, gap=1.0, defended_b=True)(_pairs(9.0, 2.5, 0.1)).verdict == AT_TRIVIAL   # A fails


def test_a_trend_carries_a_paired_interval_on_its_ends():
    noisy = [{"x": x, "seed": s, "psnr": m + (4.0 if s % 2 else -4.0) * (x == 5), **BASE}
             for x, m in ((1, 12.0), (2, 12.5), (5, 13.0)) for s in SEEDS]
    verdict = Trend(select=ALL, x="x")(noisy)
    assert verdict.verdict == "inconclusive" and "not significant" in verdict.reason
    assert "95%" in verdict.lab and verdict.values["low"] < 0 < verdict.values["high"]


def test_intervals_paired_by_another_key_name_it_in_the_plural():
    """tgias.tab4.beats-gi-rule pairs by batch index: "10 paired indices", not "indexs"."""
    by_index = [{**r, "index": r["seed"]} for r in _pairs(20.0, 12.0)]
    assert "(95%, 5 paired indices)" in Beats(a=A, b=B, by="index")(by_index).lab
    trend = [{**r, "index": r["seed"]} for r in _trend([11, 13, 15, 17])]
    assert "5 paired indices" in Trend(select=ALL, x="x", by="index")(trend).lab
    assert "(95%, 5 paired seeds)" in Beats(a=A, b=B)(_pairs(20.0, 12.0)).lab


def test_a_trend_below_the_trivial_baselines_is_not_reproduced_even_when_monotone():
    """tgias.fig7.temporal-b8: 8.83 -> 10.12 dB against the mean image's 10.24 (here 10)."""
    verdict = Trend(select=ALL, x="x")(_trend([8.6, 9.1, 9.4, 9.9], 0.2))
    assert verdict.verdict == AT_TRIVIAL and "the better end (x 10) is no better than the mean image" in verdict.reason


def test_a_trend_from_a_failed_end_reproduces_nothing():
    """A false claim "PSNR rises along x by 8 dB": the last end works barely (10.8 dB against the mean image's 10),
    the first fails far below every trivial answer (2.5 dB, as an N(0, 1) start scores), so the change is measured
    from a failed reconstruction. The old rule guarded the better end alone and reproduced it; both ends must work,
    save a defence's strongest setting (`defended_end`), where failing is the claim."""
    rows = _trend([2.5, 5.0, 8.0, 10.8], 0.1)
    verdict = Trend(select=ALL, x="x", gap=8.0)(rows)
    assert verdict.verdict == "partly", (verdict.lab, verdict.reason)
    assert "the worse end (x 1) is no better than the mean image" in verdict.reason
    assert verdict.values["reference_claimed"] == pytest.approx(2.5, abs=0.05)
    assert Trend(select=ALL, x="x", gap=8.0, defended_end=True)(rows).verdict == "reproduced"
    falling = Trend(select=ALL, x="x", direction=-1)(_trend([10.8, 8.0, 5.0, 2.5], 0.1))   # the worse end last
    assert falling.verdict == "partly" and "the worse end (x 10)" in falling.reason


def test_a_trend_not_every_step_and_short_of_the_papers_change_is_partly():
    assert Trend(select=ALL, x="x")(_trend([11, 10.5, 15, 17])).verdict == "partly"
    short = Trend(select=ALL, x="x", gap=10.0)(_trend([11, 12, 13, 15]))
    assert short.verdict == "partly" and "short of the paper's +10 dB" in short.reason


def test_a_trend_without_shared_seeds_uses_welchs_interval():
    rows = [{"x": 1, "seed": s, "psnr": 11.0 + JITTER[s], **BASE} for s in SEEDS]
    rows += [{"x": 2, "seed": s + 10, "psnr": 16.0 + JITTER[s], **BASE} for s in SEEDS]
    verdict = Trend(select=ALL, x="x")(rows)
    assert verdict.verdict == "reproduced" and "unpaired" in verdict.lab


def _phases(random: float, guided: float) -> list[dict]:
    """One cell per seed with f(Q) per trial: three random trials around `random`, three guided around `guided`
    (one guided trial an outlier that a mean would follow)."""
    rows = []
    for s in SEEDS:
        f = [random * (1 + 0.1 * JITTER[s]), random, random * 1.05] + [guided * (1 + 0.1 * JITTER[s]), guided, 50.0]
        rows.append({"seed": s, **{f"f.{i}": v for i, v in enumerate(f, 1)}})
    return rows


def test_a_trend_over_grouped_columns_reads_each_groups_median():
    """awa.fig1.guided-lower: the guided trials' f(Q) against the random ones', each phase's median per seed."""
    rule = Trend(select=ALL, x="mean trial", metric="f", direction=-1, higher_is_better=False, scale=FACTOR,
                 columns={2: ("f.1", "f.2", "f.3"), 5: ("f.4", "f.5", "f.6")}, guard="")
    lower = rule(_phases(0.2, 0.1))
    assert lower.verdict == "reproduced" and lower.values["last"] == pytest.approx(0.1, rel=0.02)
    assert rule(_phases(0.1, 0.2)).verdict == "contradicted"


def test_bands_are_in_the_metrics_own_units():
    assert AtLeast(ALL, "psnr", 22.5)(_cells(21.6, 0.2)).verdict == "reproduced"       # within 1 dB
    assert AtLeast(ALL, "psnr", 22.5)(_cells(21.2, 0.2)).verdict == "contradicted"     # 1.3 dB short, ruled out
    accuracy = [{"seed": s, "acc": 0.975 + 0.001 * JITTER[s]} for s in SEEDS]
    assert AtLeast(ALL, "acc", 0.984, POINTS)(accuracy).verdict == "reproduced"         # 0.9 points short
    assert AtLeast(ALL, "acc", 0.999, POINTS)(accuracy).verdict == "contradicted"       # 2.4 points short
    labels = [{"seed": s, "share": 0.955 + 0.001 * JITTER[s]} for s in SEEDS]
    assert AtLeast(ALL, "share", 1.0, SHARE)(labels).verdict == "reproduced"            # 4.5 points short
    errors = [{"seed": s, "mse": 0.09 * (1 + 0.01 * JITTER[s])} for s in SEEDS]
    assert Level(ALL, "mse", 0.05, False, FACTOR)(errors).verdict == "reproduced"       # within a factor 2
    assert Level(ALL, "mse", 0.02, False, FACTOR)(errors).verdict == "contradicted"     # a factor 4.5 off


def test_a_level_uses_its_interval():
    """Short of the paper's number on the mean, but a wide interval still reaching it: not contradicted."""
    wide = [{"seed": s, "psnr": v, **BASE} for s, v in enumerate((14.0, 26.0, 18.0, 24.0, 20.0))]
    assert AtLeast(ALL, "psnr", 22.5)(wide).verdict == "partly"
    assert AtLeast(ALL, "psnr", 22.5)(_cells(20.0, 0.1)).verdict == "contradicted"


def test_a_failure_claim_reads_the_interval_against_the_best_trivial_answer():
    assert Fails(ALL)(_cells(9.5, 0.1)).verdict == "reproduced"
    assert Fails(ALL)(_cells(15.0, 0.5)).verdict == "contradicted"
    straddle = Fails(ALL)(_cells(10.1, 1.0))
    assert straddle.verdict == "inconclusive" and "straddles the mean image" in straddle.reason


def _auc(*values: float) -> list[dict]:
    return [{"seed": s, "leak_auc": v, "baselines.majority.leak_auc": 0.5} for s, v in enumerate(values)]


def test_a_two_sided_failure_claim_counts_a_leak_below_chance_as_a_leak():
    below = _auc(0.001, 0.108, 0.006)                       # the truth ranked last: as telling read the other way
    assert Fails(ALL, "leak_auc", scale=SHARE)(below).verdict == "reproduced"
    flipped = Fails(ALL, "leak_auc", scale=SHARE, two_sided=True)(below)
    assert flipped.verdict == "contradicted" and "below chance" in flipped.reason
    assert Fails(ALL, "leak_auc", scale=SHARE, two_sided=True)(_auc(0.5, 0.495, 0.503)).verdict == "reproduced"
    assert Fails(ALL, "leak_auc", scale=SHARE, two_sided=True)(_auc(0.999, 0.98, 0.99)).verdict == "contradicted"


def test_a_level_that_is_the_labs_reading_of_the_papers_words_says_so():
    short = AtLeast(ALL, "psnr", 22.5, reading="'high quality'")(_cells(20.0, 0.1))
    assert "the lab's reading of 'high quality'" in short.reason and "the paper's 22.5" not in short.reason
    assert "the paper's 22.5" in AtLeast(ALL, "psnr", 22.5)(_cells(20.0, 0.1)).reason


def test_close_one_and_two_sided():
    assert Close(a=A, b=B, margin=1.0, one_sided=True)(_pairs(20.0, 15.0, 0.2)).verdict == "reproduced"
    assert Close(a=A, b=B, margin=1.0)(_pairs(20.0, 15.0, 0.2)).verdict == "contradicted"
    assert Close(a=A, b=B, margin=1.0)(_pairs(14.5, 15.0, 2.0)).verdict == "inconclusive"


def test_holds_in_every_cell_or_in_most():
    assert Holds(ALL, "flag")(_flags(True, True, False)).verdict == "partly"
    assert Holds(ALL, "flag", most=True)(_flags(True, True, False)).verdict == "reproduced"
    assert Holds(ALL, "flag", most=True)(_flags(True, False)).verdict == "partly"
    verdict = Holds(ALL, "flag")(_flags(*[False] * 5))
    assert verdict.values["low"] == 0.0 and 0.0 < verdict.values["high"] < 1.0      # a share stays in [0, 1]


def test_errors_are_compared_as_ratios_on_paired_seeds():
    rows = [r for s in SEEDS for r in ({"arch": "cnn", "seed": s, "mse": 0.04 * (1 + 0.1 * JITTER[s])},
                                       {"arch": "mlp", "seed": s, "mse": 0.25})]
    cnn, mlp = Select({"arch": "cnn"}, "CNN"), Select({"arch": "mlp"}, "MLP")
    verdict = Beats(a=cnn, b=mlp, metric="mse", gap=5.4, higher_is_better=False, scale=FACTOR, guard="")(rows)
    assert verdict.verdict == "reproduced" and "CNN / MLP: x0.16" in verdict.lab


def test_earlier_runs_kept_as_summaries_and_paired_differences():
    summary = [{"cells_summarised": 3, "psnr": 6.44, "psnr.std": 0.69, **BASE}]
    verdict = Fails(ALL)(summary)
    assert verdict.verdict == "reproduced" and verdict.values["n"] == 3
    assert math.isclose(verdict.values["high"], 6.44 + 4.302653 * 0.69 / math.sqrt(3), rel_tol=1e-5)
    no_std = Fails(ALL)([{"cells_summarised": 2, "psnr": 12.25, **BASE}])
    assert no_std.verdict == "inconclusive" and "no interval" in no_std.reason
    paired = [{"attack": "a", "seed": s, "paired.psnr": d} for s, d in enumerate((2.37, 5.34, 3.19, 1.57, 2.20))]
    verdict = Beats(a=A, b=B)(paired)        # kept differences carry no baseline: nothing can be reproduced
    assert verdict.verdict == "inconclusive" and math.isclose(verdict.values["mean"], 2.934)
    assert Beats(a=A, b=B, guard="")(paired).verdict == "reproduced"


# --- what a claim adds, the same for every rule -------------------------------------------------------------------

SIZE_ONLY = [
    (Beats(a=A, b=B, gap=8.0), _pairs(12.0, 12.0)),
    (Trend(select=ALL, x="x", gap=8.0), [dict(r, psnr=r["psnr"] + JITTER[r["seed"]] * (r["x"] == 10))
                                         for r in _trend([12.0, 12.0, 12.0, 12.0], 0.0)]),
    (AtLeast(ALL, "psnr", 22.5), _cells(14.0, 0.3)),
]
"""Rows that rule out the paper's size while its direction holds or cannot be told (Close has no size: its
margin is the relation the claim states)."""
DIRECTION = [
    (Beats(a=A, b=B, gap=8.0), _pairs(12.0, 20.0)),
    (Trend(select=ALL, x="x"), _trend([17, 15, 13, 11])),
    (AtLeast(ALL, "psnr", 22.5), _cells(9.0, 0.1)),
    (Fails(ALL, fails=False), _cells(9.5, 0.1)),
    (Fails(ALL), _cells(15.0, 0.5)),
    (Close(a=A, b=B, margin=1.0), _pairs(18.0, 15.0, 0.2)),
    (Close(a=A, b=B, margin=1.0, one_sided=True), _pairs(12.0, 15.0, 0.2)),
]
"""Rows that contradict the paper's direction (for Close: the relation it states, significantly the other way)."""


def _claim(rule, reduced: str = "", **extra) -> Claim:
    return Claim("p.w.c", "p", "w", "c", "n", Measure("x", rule, "how"), reduced=reduced, **extra)


@pytest.mark.parametrize("rule, rows", SIZE_ONLY, ids=[type(r).__name__ for r, _ in SIZE_ONLY])
def test_a_reduced_setting_softens_a_size_contradiction_for_every_rule(rule, rows):
    assert _claim(rule).judge(rows).verdict == "contradicted"
    softened = _claim(rule, reduced="a smaller model").judge(rows)
    assert softened.verdict == "partly" and "a smaller model" in softened.reason


@pytest.mark.parametrize("rule, rows", DIRECTION, ids=[type(r).__name__ for r, _ in DIRECTION])
def test_a_reduced_setting_never_softens_a_direction_contradiction(rule, rows):
    assert _claim(rule, reduced="a smaller model").judge(rows).verdict == "contradicted"


def test_a_reduced_setting_does_not_cap_a_result_that_meets_the_papers_size():
    assert _claim(Beats(a=A, b=B, gap=8.0), reduced="a smaller model").judge(_pairs(20.0, 12.0)).verdict == \
        "reproduced"


# --- false-claim fixtures: each passed the rules before (reproduced, or contradicted softened to partly) --------

def test_a_result_met_only_at_an_easier_setting_is_partly():
    """fedleak.tab3.psnr-resnet10: 43 dB at a quarter of the paper's batch, random weights, round 0. The old rule
    ("a reduced setting never caps a result that meets the paper's size") called it reproduced."""
    rows = _cells(40.0, 1.0)
    assert _claim(AtLeast(ALL, "psnr", 22.5), reduced="a smaller model").judge(rows).verdict == "reproduced"
    easier = _claim(AtLeast(ALL, "psnr", 22.5), reduced="a smaller model", easier="batch 4 against 16").judge(rows)
    assert easier.verdict == "partly" and "batch 4 against 16" in easier.reason
    beats = _claim(Beats(a=A, b=B, gap=8.0), easier="random weights").judge(_pairs(20.0, 12.0))
    assert beats.verdict == "partly"


def test_close_contradicts_a_relation_measured_significantly_the_other_way_even_when_reduced():
    """sec7.top-entries: 'about as good' measured -6.9 dB [-11.6, -2.1]; the old rule flagged every Close
    contradiction as a size and the reduced setting softened it to partly."""
    verdict = _claim(Close(a=A, b=B, margin=1.0, one_sided=True), reduced="a smaller model").judge(
        _pairs(12.0, 15.0, 0.2))
    assert verdict.verdict == "contradicted" and not verdict.values.get("magnitude_only")


def test_close_is_not_reproduced_against_a_reference_arm_at_a_trivial_baseline():
    """A within the margin of B, A just above the mean image (10), B below it: the old rule guarded A only and
    reproduced the claim."""
    verdict = Close(a=A, b=B, margin=1.0, one_sided=True)(_pairs(10.6, 9.7, 0.05))
    assert verdict.verdict == AT_TRIVIAL and "B is no better than the mean image" in verdict.reason
    assert verdict.values["reference_claimed"] == pytest.approx(9.7)


@pytest.mark.parametrize("rule, rows", [
    (Beats(a=A, b=B, gap=8.0), _pairs(9.6, 8.0, 0.1)),
    (Trend(select=ALL, x="x"), _trend([7, 8, 9, 9.9], 0.2)),
    (AtLeast(ALL, "psnr", 22.5), _cells(9.9, 3.0)),
    (Close(a=A, b=B, margin=1.0), _pairs(9.6, 9.5, 0.2)),
], ids=["Beats", "Trend", "Level", "Close"])
def test_where_no_arm_beats_the_trivial_baseline_the_verdict_says_so_and_is_not_partly(rule, rows):
    """No attack works here: rules before called this partly, the word for 'the direction holds, the size
    falls short', then inconclusive, the word for a measurement that cannot tell; it has its own reading."""
    verdict = rule(rows)
    assert verdict.verdict == AT_TRIVIAL and "no better than the mean image" in verdict.reason


def test_partly_means_one_thing_the_direction_holds_and_the_size_falls_short():
    """A measurement that cannot tell is inconclusive and one where no attack works has its own reading, so that
    partly says one thing. The old rules called a straddling interval partly ("not significant", "straddles",
    "no interval") and gave no attack working the word of a measurement that cannot tell (inconclusive)."""
    cannot_tell = [
        Beats(a=A, b=B, gap=1.0)(_pairs(12.2, 12.0, 3.0)),                        # [-3.6, +4.0] dB
        Trend(select=ALL, x="x")([{"x": x, "psnr": m, "cells_summarised": 3, **BASE} for x, m in ((1, 12), (10, 14))]),
        Fails(ALL, fails=False)(_cells(10.1, 1.0)),                                # straddles the mean image
        Close(a=A, b=B, margin=1.0)(_pairs(14.5, 15.0, 2.0)),
    ]
    assert [v.verdict for v in cannot_tell] == ["inconclusive"] * 4, [(v.verdict, v.reason) for v in cannot_tell]
    failed = [Beats(a=A, b=B, gap=8.0)(_pairs(9.6, 8.0, 0.1)), AtLeast(ALL, "psnr", 22.5)(_cells(9.9, 3.0))]
    assert [v.verdict for v in failed] == [AT_TRIVIAL] * 2
    short = Beats(a=A, b=B, gap=8.0)(_pairs(14.0, 12.0))
    assert short.verdict == "partly" and "the direction holds" in short.reason
    assert "partly" in VERDICTS and AT_TRIVIAL in VERDICTS and "cannot tell" not in MEANINGS["partly"]


def test_a_metric_with_trivial_answers_read_from_cells_that_record_none_is_not_reproduced():
    """tgias.tab4.labels and fedleak.tab14.labels: label accuracy from cells without a majority-class baseline;
    the old rule (and the old whole-ledger test) skipped the guard and reproduced."""
    bare = [{"seed": s, "label_accuracy": 1.0} for s in SEEDS]
    verdict = AtLeast(ALL, "label_accuracy", 1.0, SHARE)(bare)
    assert verdict.verdict == "inconclusive" and "no trivial baseline for label_accuracy" in verdict.reason
    guarded = [dict(r, **{"baselines.majority.label_accuracy": 0.125}) for r in bare]
    assert AtLeast(ALL, "label_accuracy", 1.0, SHARE)(guarded).verdict == "reproduced"
    pairs = [dict(r, label_accuracy=r["psnr"] / 30) for r in _pairs(27.0, 20.0)]
    assert Beats(a=A, b=B, metric="label_accuracy", scale=SHARE)(pairs).verdict == "inconclusive"
    pairs = [dict(r, **{"baselines.majority.label_accuracy": 0.125}) for r in pairs]
    assert Beats(a=A, b=B, metric="label_accuracy", scale=SHARE)(pairs).verdict == "reproduced"


def test_a_defence_comparison_guards_the_weaker_defences_arm():
    """guard_side "b": the weaker defence's arm must still leak, or comparing the two defences says nothing."""
    rows = [r for s in SEEDS for r in ({"attack": "a", "seed": s, "leak_auc": 0.5 + 0.01 * JITTER[s],
                                        "baselines.majority.leak_auc": 0.5},
                                       {"attack": "b", "seed": s, "leak_auc": 0.9, "baselines.majority.leak_auc": 0.5})]
    rule = Beats(a=A, b=B, metric="leak_auc", higher_is_better=False, scale=SHARE, guard="leak_auc", guard_side="b")
    assert rule(rows).verdict == "reproduced"
    both_chance = [dict(r, leak_auc=0.5) if r["attack"] == "b" else r for r in rows]
    assert rule(both_chance).verdict == AT_TRIVIAL


def _drawn(rows: list[dict], fixed: bool) -> list[dict]:
    return [dict(r, batch_size=4, images="0 1 2 3" if fixed else f"{4 * r['seed']} {4 * r['seed'] + 1}")
            for r in rows]


def test_a_verdict_from_seeds_that_never_varied_the_images_is_inconclusive():
    """fedleak-terms, tgias-temporal: every seed attacked the same images; the old verdicts read their interval
    as if it spoke for other images (reproduced, contradicted)."""
    true, false = _drawn(_pairs(20.0, 12.0), True), _drawn(_pairs(12.0, 20.0), True)
    for rows in (true, false):
        verdict = _claim(Beats(a=A, b=B, gap=8.0)).judge(rows)
        assert verdict.verdict == "inconclusive" and "never varied the images" in verdict.reason
    assert _claim(Beats(a=A, b=B, gap=8.0)).judge(_drawn(_pairs(20.0, 12.0), False)).verdict == "reproduced"
    old = [dict(r, batch_size=8, index=0) for r in _pairs(20.0, 12.0)]   # written before the images column
    assert _claim(Beats(a=A, b=B, gap=8.0)).judge(old).verdict == "inconclusive"
    failed = _claim(Beats(a=A, b=B, gap=8.0)).judge(_drawn(_pairs(9.6, 8.0, 0.1), True))   # tgias.fig7.temporal-b8
    assert failed.verdict == "inconclusive" and "never varied the images" in failed.reason   # not "no attack works"
    assert _claim(Beats(a=A, b=B, gap=8.0)).judge(_drawn(_pairs(9.6, 8.0, 0.1), False)).verdict == AT_TRIVIAL
    cannot_tell = _claim(Beats(a=A, b=B, gap=1.0)).judge(_drawn(_pairs(12.2, 12.0, 3.0), True))   # fedleak.tab19.cosine
    assert cannot_tell.verdict == "inconclusive" and "never varied the images" in cannot_tell.reason
    assert "not significant" in cannot_tell.reason                      # the rule's own reading, kept beside it
    timing = [dict(r, seconds=r["psnr"]) for r in true]                   # a wall time does not depend on images
    assert _claim(Beats(a=A, b=B, metric="seconds", guard="")).judge(timing).verdict == "reproduced"


def test_exact_checks_hold_or_fail_and_are_not_run_without_results():
    check = _claim(Holds(ALL, "flag"), exact=True)
    assert check.kind == "exact check"
    assert check.judge(_flags(True)).verdict == "holds"
    assert check.judge(_flags(False)).verdict == "fails"
    assert check.judge(None).verdict == "not run"
    assert _claim(Holds(ALL, "flag")).judge(None).verdict == "not attempted"


def test_not_comparable_shows_the_measurement_and_the_rules_own_verdict():
    verdict = _claim(Beats(a=A, b=B), not_comparable="another model").judge(_pairs(20.0, 12.0))
    assert verdict.verdict == "measured, not comparable"
    assert "another model" in verdict.reason and "the rule alone: reproduced" in verdict.reason
    assert "A - B: +7.99 dB" in verdict.lab


def test_an_earlier_run_is_named_in_the_verdict():
    verdict = _claim(Fails(ALL)).judge(_cells(9.5, 0.1), source="earlier run, commit abc1234")
    assert "earlier run, commit abc1234" in verdict.lab


def test_each_verdict_has_one_meaning():
    assert set(MEANINGS) == set(VERDICTS) | set(CHECKS)
    assert all(len(text) > 40 for text in MEANINGS.values())


# --- the arithmetic ------------------------------------------------------------------------------------------------

def test_intervals():
    assert interval([1.0]) == (1.0, 1.0, 1.0)
    mean, low, high = interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and math.isclose(high - mean, 4.302653 / math.sqrt(3), rel_tol=1e-5)
    assert share_interval(5, 5)[1] == 1.0 and math.isclose(share_interval(5, 5)[0], 0.025 ** 0.2)
    assert share_interval(0, 5) == (0.0, pytest.approx(1 - 0.025 ** 0.2))
    mean, low, high = welch([1.0, 2.0, 3.0], [5.0, 6.0, 7.0])
    assert mean == -4.0 and low < -4.0 < high < 0


def test_the_images_behind_a_claim():
    old = [{"seed": s, "batch_size": "8"} for s in range(3)]
    assert images_behind(old) == "the same 8 images on every seed (results written before seeds drew the images)"
    drawn = [{"seed": s, "batch_size": "2", "images": f"{2 * s} {2 * s + 1}"} for s in range(3)]
    assert images_behind(drawn) == "6 distinct images over 3 seeds"
    fixed = [{"seed": s, "batch_size": "2", "images": "4 5"} for s in range(3)]
    assert images_behind(fixed) == "the same 2 images on every seed"
    by_index = [{"seed": 0, "batch_size": "2", "images": f"{i} {i + 1}"} for i in (0, 10, 20)]   # tgias-labels-all
    assert images_behind(by_index) == "6 images (3 batches by index, one seed each)" and not images_fixed(by_index)
    batches = [{"seed": s, "index": 8 * s, "batch_size": "8"} for s in range(50)]
    assert images_behind(batches).startswith("400 images (50 batches of 8")
    assert images_behind([{"seed": 0, "accuracy": 0.9}]) == ""
    assert images_fixed(old) and images_fixed(fixed) and not images_fixed(drawn) and not images_fixed(batches)


def test_a_bounded_metrics_interval_is_cut_to_its_bounds_and_its_mean_kept():
    from splitlab.claims.cells import level
    from splitlab.claims.stats import FACTOR, PLAIN, SHARE, SSIM
    rows = [{"label_accuracy": v} for v in (1.0, 1.0, 0.97)]
    mean, low, high, n = level(rows, "label_accuracy", SHARE)
    assert (high, n) == (1.0, 3) and low < mean == pytest.approx(0.99)
    assert level(rows, "label_accuracy", PLAIN)[2] > 1.0              # a quantity without bounds keeps its interval
    ssim = [{"ssim": v} for v in (-0.98, -0.9, -1.0)]
    assert level(ssim, "ssim", SSIM)[1] == -1.0
    assert FACTOR.within(-5.0, 5.0, [2.0]) == (-5.0, 5.0)              # an error on a log axis has no such bounds
    assert SHARE.within(20.0, 40.0, [30.0]) == (20.0, 40.0)            # a percentage is not a share: left as it is
    percent = level([{"m": 30.0}, {"m": 31.0}], "m", SHARE)
    assert percent[1] < 30.0 and percent[2] > 31.0
    summary = level([{"m": 0.99, "m.std": 0.02, "cells_summarised": 3}], "m", SHARE)    # a run that kept its mean
    assert summary[2] == 1.0 and summary[0] == 0.99


def test_a_yes_or_no_per_cell_is_a_share_of_cells_with_its_exact_interval():
    from splitlab.claims.cells import level
    from splitlab.claims.one_sample import AtMost
    from splitlab.claims.stats import FLAG
    one_of_three = [{"flagged": v} for v in ("False", "False", "True")]      # switches, as results.csv writes them
    mean, low, high, n = level(one_of_three, "flagged", FLAG)
    assert (mean, n) == (pytest.approx(1 / 3), 3) and (low, high) == share_interval(1, 3)
    assert 0.008 < low < 0.009 and 0.90 < high < 0.91               # a t-interval on 0/1 spans all of [0, 1]
    assert level(one_of_three, "flagged", SHARE)[1:3] == (0.0, 1.0)
    all_three = level([{"flagged": 1.0}] * 3, "flagged", FLAG)
    assert all_three[0] == 1.0 and all_three[1] == pytest.approx(0.025 ** (1 / 3)) and all_three[2] == 1.0
    verdict = AtMost(Select({}, "honest runs"), "flagged", 0.0, FLAG)(one_of_three)
    assert verdict.verdict == "partly" and "0.3333 [0.008404, 0.9057] over 3 cells" in verdict.lab
    none_of_three = level([{"flagged": 0.0}] * 3, "flagged", FLAG)
    assert none_of_three[:3] == (0.0, 0.0, pytest.approx(1 - 0.025 ** (1 / 3)))
    assert level([{"flagged": 1.0}], "flagged", FLAG)[1:] == (pytest.approx(0.025), 1.0, 1)     # one cell: an interval
    kept = level([{"flagged": 1 / 3, "cells_summarised": 3}], "flagged", FLAG)      # a run that kept only the share
    assert kept[1:3] == share_interval(1, 3)
    with pytest.raises(ValueError, match="not 0 or 1"):
        level([{"flagged": 0.97}, {"flagged": 1.0}], "flagged", FLAG)

"""The ledger of the papers' claims is well formed, names sweeps and cells that exist, keeps the papers' own
preset values, and its rules turn rows into the verdicts they promise.

Each measured claim is also run on synthetic rows built from its own selections and metric: rows that agree
with the paper must give `reproduced` (`partly` when the setting is reduced and the claim is not about a
direction only), rows that disagree must give `contradicted`.
"""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest

from splitlab.claims import LEDGER, PAPER_PRESETS, PAPERS, judge
from splitlab.claims import awa, bounds, fedleak, jast, label_inference, label_leakage, tgias, unsplit_labels
from splitlab.claims.model import VERDICTS, AtLeast, Beats, Claim, Matches, Measure, Select, Trend
from splitlab.sweep_file import parse_sweep, shipped

MODULES = (jast, fedleak, awa, tgias, bounds, label_leakage, label_inference, unsplit_labels)
MEASURED = [c for c in LEDGER if c.measure is not None]
ID = re.compile(r"^(?P<paper>[a-z]+)\.[a-z0-9]+(?:-[a-z0-9]+)*\.[a-z0-9]+(?:-[a-z0-9]+)*$")


# --- the sweeps the ledger may name: the shipped grids, and the planned ones with their swept keys -----------------

def _axis(key: str, *values) -> list[dict]:
    return [{key: v} for v in values]


def _zip(**columns) -> list[dict]:
    return [dict(zip(columns, row)) for row in zip(*columns.values())]


def _grid_of(name: str) -> list[dict]:
    """The swept values of every cell of a shipped sweep."""
    sweep = parse_sweep(shipped()[name], name, f"{name}.toml")
    return [dict(c.swept) for c in sweep.cells()]


def _cross(*factors: list[dict]) -> list[dict]:
    return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*factors)]


PLANNED = {
    "bounds-batch": lambda: _cross(_axis("batch", 2, 4, 8)),
}
"""Planned sweeps whose grids are known: name -> its cells' swept values."""

PLANNED_KEYS = {"bounds-surrogate": set(), "bounds-trends": {"local-steps", "devices", "rounds"}}
"""Planned sweeps whose swept values are not settled: only their swept keys."""


def grid(name: str) -> list[dict] | None:
    """The cells of a sweep (a shipped file wins over the plan), or None when only its keys are known."""
    if name in shipped():
        return _grid_of(name)
    return PLANNED[name]() if name in PLANNED else None


def keys_of(name: str) -> set[str]:
    cells = grid(name)
    return set().union(*cells) if cells is not None else PLANNED_KEYS[name]


def selects(claim: Claim) -> list[Select]:
    rule = claim.measure.rule
    if isinstance(rule, Beats):
        return [rule.a, rule.b]
    return [rule.select]


# --- the ledger's shape -------------------------------------------------------------------------------------------

def test_at_least_45_claims_over_the_five_papers():
    assert len(LEDGER) >= 45
    assert set(PAPERS) == {"jast", "fedleak", "awa", "tgias", "bounds", "li", "fu", "unsplit"}
    for module in MODULES:
        assert module.CITATION and module.CLAIMS, module.PAPER
        assert any(c.measure is not None for c in module.CLAIMS), f"{module.PAPER} has no measured claim"
        assert all(c.paper == module.PAPER for c in module.CLAIMS)


def test_ids_are_unique_and_name_paper_where_what():
    ids = [c.id for c in LEDGER]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    for claim in LEDGER:
        match = ID.match(claim.id)
        assert match and match["paper"] == claim.paper, claim.id
        assert claim.where and claim.claim and claim.paper_numbers, claim.id


def test_measured_claims_name_a_sweep_that_exists_or_is_planned():
    known = set(shipped()) | set(PLANNED) | set(PLANNED_KEYS)
    for claim in MEASURED:
        assert claim.measure.sweep in known, f"{claim.id}: unknown sweep {claim.measure.sweep}"
        assert claim.measure.how, claim.id


def test_claims_not_attempted_say_why():
    for claim in LEDGER:
        if claim.measure is None:
            assert len(claim.reason) > 40, claim.id
            assert re.search(r"\b(scale|model|dataset|time)\b", claim.reason), claim.id


def test_direction_only_claims_are_orderings_or_trends():
    """An ordering, a trend, or a yes/no flag of an ordering (read as 1.0 when it holds)."""
    for claim in MEASURED:
        if claim.direction_only:
            rule = claim.measure.rule
            flag = isinstance(rule, AtLeast) and rule.value == 1.0 and not rule.below
            assert isinstance(rule, (Beats, Trend)) or flag, claim.id


def test_every_module_is_short():
    for module in MODULES:
        assert len(Path(module.__file__).read_text().splitlines()) < 450, module.__name__


# --- selections match the sweeps' cells ------------------------------------------------------------------------------

def test_selections_use_the_sweeps_swept_keys():
    """results.csv carries the swept options (axes and zip) beside the metrics, so a selection may only name those."""
    for claim in MEASURED:
        keys = keys_of(claim.measure.sweep)
        for select in selects(claim):
            missing = set(select.where) - keys
            assert not missing, f"{claim.id}: {missing} not swept in {claim.measure.sweep}"
        rule = claim.measure.rule
        if isinstance(rule, Trend):
            assert rule.x in keys, f"{claim.id}: {rule.x} is not swept"
        if isinstance(rule, Beats):
            assert rule.by in keys, f"{claim.id}: {rule.by} is not swept"


def test_selections_pick_cells_that_exist():
    for claim in MEASURED:
        cells = grid(claim.measure.sweep)
        if cells is None:
            continue
        rule = claim.measure.rule
        for select in selects(claim):
            assert select.rows(cells), f"{claim.id}: no cell of {claim.measure.sweep} has {dict(select.where)}"
        if isinstance(rule, Beats):            # one cell per seed on each side, at least two seeds in common
            sides = []
            for select in (rule.a, rule.b):
                seeds = [str(c[rule.by]) for c in select.rows(cells)]
                assert len(seeds) == len(set(seeds)), f"{claim.id}: {dict(select.where)} is not one cell per seed"
                sides.append(set(seeds))
            assert len(sides[0] & sides[1]) >= 2, claim.id
        if isinstance(rule, Trend):
            xs = {float(c[rule.x]) for c in rule.select.rows(cells)}
            assert len(xs) >= 2, f"{claim.id}: fewer than two values of {rule.x}"


# --- the papers' own preset values ------------------------------------------------------------------------------------

def test_paper_presets_hold_the_papers_values():
    from attacks import registry

    for name, values in PAPER_PRESETS.items():
        settings = registry.preset(name).settings()
        for field, value in values.items():
            preset = getattr(settings, field)
            assert preset == value, f"{name}.{field}: the preset holds {preset!r}, the paper {value!r}"


def test_every_paper_preset_of_the_papers_attacks_is_listed():
    from attacks import registry

    attacks = ("unsplit", "fsha", "fedleak", "awa", "agic", "tgias-ro")
    paper = {p.name for a in attacks for p in registry.spec(a).presets if p.name.endswith(".paper")}
    assert paper <= set(PAPER_PRESETS), paper - set(PAPER_PRESETS)


# --- verdicts from synthetic rows -------------------------------------------------------------------------------------

SEEDS = range(5)


def _good(value: float, below: bool) -> float:
    if value == 0:
        return -1.0 if below else 1.0
    return value * 0.5 if below else value * 1.25


def _bad(value: float, below: bool, share: float) -> float:
    """Beyond the rule's partly band (`share` of the paper's value) by a factor 2."""
    if value == 0:
        return 1.0 if below else -1.0
    return value / share * 2.0 if below else value * share * 0.5


def synthetic(claim: Claim, agree: bool) -> list[dict]:
    """Rows built from the claim's own selections and metric that agree (or disagree) with the paper."""
    rule = claim.measure.rule
    if isinstance(rule, Beats):
        step = 2 * abs(rule.gap) if rule.gap else 1.0
        sign = (1 if rule.higher_is_better else -1) * (1 if agree else -1)
        rows = []
        for s in SEEDS:
            base = 10.0 + 0.3 * s
            rows.append({**rule.a.where, rule.by: s, rule.metric: base + sign * step * (1 + 0.05 * s)})
            rows.append({**rule.b.where, rule.by: s, rule.metric: base})
        assert len(rule.a.rows(rows)) == len(rule.b.rows(rows)) == len(SEEDS), claim.id
        return rows
    if isinstance(rule, Trend):
        cells = grid(claim.measure.sweep)
        xs = sorted({float(c[rule.x]) for c in rule.select.rows(cells)}) if cells else [1.0, 2.0, 4.0]
        direction = rule.direction if agree else -rule.direction
        return [{**rule.select.where, rule.x: x, "seed": s, rule.metric: direction * i + 0.01 * s}
                for i, x in enumerate(xs) for s in SEEDS]
    if isinstance(rule, AtLeast):
        value = _good(rule.value, rule.below) if agree else _bad(rule.value, rule.below, rule.share)
        return [{**rule.select.where, "seed": s, rule.metric: value} for s in SEEDS]
    if isinstance(rule, Matches):
        value = rule.value + (0.5 if agree else 3.0) * rule.tolerance
        return [{**rule.select.where, "seed": s, rule.metric: value} for s in SEEDS]
    raise AssertionError(f"{claim.id}: no synthetic rows for {type(rule).__name__}")


@pytest.mark.parametrize("claim", MEASURED, ids=[c.id for c in MEASURED])
def test_each_claim_reads_rows_that_agree_and_rows_that_disagree(claim):
    agreeing = judge(claim, lambda sweep: synthetic(claim, True))
    expected = "partly" if claim.reduced and not claim.direction_only else "reproduced"
    assert agreeing.verdict == expected, (agreeing.lab, agreeing.reason)
    if expected == "partly":
        assert claim.reduced in agreeing.reason
    disagreeing = judge(claim, lambda sweep: synthetic(claim, False))
    assert disagreeing.verdict == "contradicted", (disagreeing.lab, disagreeing.reason)


def test_without_results_every_claim_is_not_attempted_with_a_reason():
    for claim in LEDGER:
        verdict = judge(claim, lambda sweep: None)
        assert verdict.verdict == "not attempted" and verdict.reason, claim.id


A, B = Select({"attack": "a"}, "A"), Select({"attack": "b"}, "B")


def _pairs(diffs, base=10.0):
    return [r for s, d in enumerate(diffs) for r in ({"attack": "a", "seed": s, "psnr": base + d},
                                                     {"attack": "b", "seed": s, "psnr": base})]


@pytest.mark.parametrize("diffs, gap, verdict", [
    ([4.0, 4.2, 3.9, 4.1, 4.0], 4.0, "reproduced"),       # significant and at the paper's gap
    ([1.0, 1.1, 0.9, 1.0, 1.05], 4.0, "partly"),          # significant, under half the gap
    ([-2.0, -2.1, -1.9, -2.0, -2.2], 4.0, "contradicted"),  # the other way
    ([0.05, -0.05, 0.02, -0.03, 0.01], 4.0, "contradicted"),  # no effect, the gap ruled out
    ([3.0, -2.0, 5.0, -1.0, 4.0], 4.0, "partly"),         # too noisy to tell
    ([0.5, 0.6, 0.4, 0.5, 0.55], None, "reproduced"),     # no paper gap: significance alone
])
def test_beats_on_paired_seeds(diffs, gap, verdict):
    assert Beats(A, B, "psnr", gap=gap)(_pairs(diffs)).verdict == verdict


def test_beats_lower_is_better_and_pairs_only_shared_seeds():
    rows = _pairs([-0.2, -0.21, -0.19]) + [{"attack": "a", "seed": 9, "psnr": 99.0}]
    verdict = Beats(A, B, "psnr", gap=0.2, higher_is_better=False)(rows)
    assert verdict.verdict == "reproduced" and verdict.values["n"] == 3
    assert Beats(A, B, "psnr")([{"attack": "a", "seed": 0, "psnr": 1.0}]).verdict == "not attempted"


def test_beats_needs_two_pairs_and_prints_its_interval_low_end_first():
    assert Beats(A, B, "psnr", gap=4.0)(_pairs([4.0])).verdict == "partly"
    lower = Beats(A, B, "psnr", gap=0.2, higher_is_better=False)(_pairs([-0.2, -0.25, -0.15]))
    assert lower.values["low"] < lower.values["mean"] < lower.values["high"]
    low, high = (float(x) for x in re.search(r"\[(\S+), (\S+)\]", lower.lab).groups())
    assert low < high


def test_a_side_no_better_than_the_zero_image_makes_the_comparison_partly():
    rows = [dict(r, **{"baselines.zero.psnr": 10.0 if r["attack"] == "b" else 5.0})
            for r in _pairs([4.0, 4.2, 3.9])]
    verdict = Beats(A, B, "psnr", gap=4.0)(rows)
    assert verdict.verdict == "partly" and "B did no better than the all-zero image" in verdict.reason
    fine = [dict(r, **{"baselines.zero.psnr": 5.0}) for r in _pairs([4.0, 4.2, 3.9])]
    assert Beats(A, B, "psnr", gap=4.0)(fine).verdict == "reproduced"


def test_ruling_out_the_papers_gap_at_a_reduced_scale_is_partly():
    measure = Measure("x", Beats(A, B, "psnr", gap=4.0), "paired PSNR")
    rows = _pairs([0.05, -0.05, 0.02, -0.03, 0.01])
    assert Claim("p.w.x", "p", "w", "c", "n", measure).judge(rows).verdict == "contradicted"
    reduced = Claim("p.w.x", "p", "w", "c", "n", measure, reduced="smaller").judge(rows)
    assert reduced.verdict == "partly" and "smaller" in reduced.reason


@pytest.mark.parametrize("means, direction, verdict", [
    ([1.0, 2.0, 3.0], 1, "reproduced"),
    ([1.0, 0.8, 3.0], 1, "partly"),
    ([3.0, 2.0, 1.0], 1, "contradicted"),
    ([3.0, 2.0, 1.0], -1, "reproduced"),
    ([2.0], 1, "not attempted"),
])
def test_trend(means, direction, verdict):
    rows = [{"x": str(x), "seed": s, "m": m + 0.01 * s} for x, m in zip((1, 2, 4), means) for s in range(3)]
    assert Trend(Select({}, "all"), "x", "m", direction)(rows).verdict == verdict


@pytest.mark.parametrize("values, rule, verdict", [
    ([22.0, 23.0], AtLeast(Select({}, "all"), "psnr", 22.0), "reproduced"),
    ([19.0, 19.5], AtLeast(Select({}, "all"), "psnr", 22.0), "partly"),
    ([10.0, 11.0], AtLeast(Select({}, "all"), "psnr", 22.0), "contradicted"),
    ([8.0, 9.0], AtLeast(Select({}, "all"), "psnr", 10.0, below=True), "reproduced"),
    ([11.0, 12.0], AtLeast(Select({}, "all"), "psnr", 10.0, below=True), "partly"),
    ([20.0, 21.0], AtLeast(Select({}, "all"), "psnr", 10.0, below=True), "contradicted"),
    ([0.26, 0.28], Matches(Select({}, "all"), "mse", 0.27, 0.02), "reproduced"),
    ([0.30, 0.31], Matches(Select({}, "all"), "mse", 0.27, 0.02), "partly"),
    ([0.40, 0.42], Matches(Select({}, "all"), "mse", 0.27, 0.02), "contradicted"),
])
def test_thresholds_and_matches(values, rule, verdict):
    rows = [{"seed": s, rule.metric: v} for s, v in enumerate(values)]
    assert rule(rows).verdict == verdict


def test_failed_cells_and_missing_values_are_ignored():
    rule = AtLeast(Select({}, "all"), "psnr", 20.0)
    rows = [{"psnr": "25.0", "status": "ok"}, {"psnr": "1.0", "status": "failed"}, {"psnr": ""}, {"psnr": "nan"}]
    verdict = rule(rows)
    assert verdict.verdict == "reproduced" and verdict.values["n"] == 1


def test_a_reduced_setting_caps_a_magnitude_but_not_a_direction():
    rows = _pairs([4.0, 4.1, 3.9])
    measure = Measure("x", Beats(A, B, "psnr", gap=4.0), "paired PSNR")
    magnitude = Claim("p.w.x", "p", "w", "c", "n", measure, reduced="smaller")
    direction = Claim("p.w.y", "p", "w", "c", "n", measure, reduced="smaller", direction_only=True)
    assert magnitude.judge(rows).verdict == "partly" and "smaller" in magnitude.judge(rows).reason
    assert direction.judge(rows).verdict == "reproduced"
    assert set(VERDICTS) == {"reproduced", "partly", "contradicted", "not attempted"}


def test_boolean_flags_read_from_results_csv_count_as_one_and_zero():
    rule = AtLeast(Select({}, "theory"), "matched_by_check.lemma1-sgd", 1.0)
    assert rule([{"matched_by_check.lemma1-sgd": "True"}]).verdict == "reproduced"
    assert math.isclose(rule([{"matched_by_check.lemma1-sgd": True}]).values["mean"], 1.0)
    assert rule([{"matched_by_check.lemma1-sgd": "False"}]).verdict == "contradicted"


# --- the command ------------------------------------------------------------------------------------------------------

def _claims(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "splitlab", "claims", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, timeout=120)


def test_the_scoreboard_counts_every_claim_from_the_shipped_results_without_torch():
    import json
    import subprocess
    import sys

    record = json.loads(_claims("--json").stdout)
    assert sum(sum(c.values()) for c in record["counts"].values()) == len(LEDGER) == len(record["claims"])
    shipped_sweeps = {name for name, meta in record["results"].items() if meta is not None}
    for row in record["claims"]:
        if row["measure"] and row["measure"]["sweep"] in shipped_sweeps:
            assert row["verdict"] != "not attempted" or row["reason"], row["id"]
    probe = subprocess.run([sys.executable, "-c", "import sys; from splitlab.claims.cli import claims_command; "
                            "from splitlab.claims import scoreboard; list(scoreboard()); print('torch' in sys.modules)"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert probe.stdout.strip() == "False", probe.stderr


@pytest.mark.slow
def test_deviations_are_listed_per_paper_and_bad_input_is_one_line():
    import json

    found = json.loads(_claims("--deviations", "--json").stdout)["deviations"]
    assert set(found) == set(PAPERS) and all(found.values())
    whats = {p: {d["what"] for d in rows} for p, rows in found.items()}
    assert "alignment accuracy" in whats["tgias"] and "GGL's generator" in whats["bounds"]
    assert {d["source"] for d in found["fedleak"]} >= {"fedleak", "invgrad", "idlg", "gi"}
    for args in (("--paper", "nope"), ("--deviations", "--run", "jast")):
        bad = _claims(*args)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_shipping_refuses_an_unfinished_sweep(tmp_path):
    from splitlab.claims.results import rows, ship
    from vfl.errors import SplitlabError

    (tmp_path / "results.csv").write_text("cell,name,status,seed,psnr\na,s0,ok,0,12\nb,s1,failed,1,\n")
    with pytest.raises(SplitlabError, match="every cell must be ok"):
        ship(tmp_path, "x", root=tmp_path / "out")
    assert rows("x", root=tmp_path / "out") is None
    (tmp_path / "results.csv").write_text("cell,name,status,seed,psnr\na,s0,ok,0,12\n")
    (tmp_path / "sweep.json").write_text('{"sweep": "x", "paper_size": true}')
    with pytest.raises(SplitlabError, match="paper-size"):
        ship(tmp_path, "x", root=tmp_path / "out")
    assert rows("x", root=tmp_path / "out") is None


def test_running_a_claim_again_keeps_every_cell_its_rule_reads():
    """`claims --run` narrows each sweep with --where; the kept cells must include every cell the rules select."""
    from splitlab.claims.cli import _where
    from splitlab.sweep_file import load_sweep, parse_where

    for name in sorted({c.measure.sweep for c in MEASURED} & set(shipped())):
        selections = [s for c in MEASURED if c.measure.sweep == name for s in c.measure.selections]
        sweep = load_sweep(paper=name)
        where = parse_where(sweep, [arg.removeprefix("--where=") for arg in _where(selections)])
        kept = [dict(c.swept) for c in sweep.cells() if c.has(where)]
        for select in selections:
            wanted = select.rows([dict(c.swept) for c in sweep.cells()])
            assert all(cell in kept for cell in wanted), (name, dict(select.where))

"""The ledger of the papers' claims is well formed, names sweeps and cells that exist, keeps the papers' own
preset values, and its rules turn rows into the verdicts they promise.

Each measured claim is also run on synthetic rows built from its own selections and metric: rows that agree
with the paper must give `reproduced` (`holds` for an exact check, `measured, not comparable` where the claim
says its setting decides), rows that disagree must give `contradicted` (`partly`, naming the lab's reduced
setting, where only the paper's size is ruled out), and rows no better than a trivial baseline must never give
`reproduced`. Over the shipped results, no claim is reproduced at or below a trivial baseline.
"""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest

from splitlab.claims import LEDGER, PAPER_PRESETS, PAPERS, judge
from splitlab.claims import awa, bounds, fedleak, jast, label_inference, label_leakage, tgias, unsplit_labels
from splitlab.claims.model import CHECKS, VERDICTS, Claim, Measure, Select, Verdict
from splitlab.claims.rules import Beats, Close, Fails, Holds, Level, Trend
from splitlab.claims.stats import at_or_below
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

PLANNED_KEYS = {"bounds-surrogate": set()}
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
    return list(claim.measure.selections)


def _where_values(select: Select) -> dict:
    """One value per key (the first of a tuple of alternatives)."""
    return {k: v[0] if isinstance(v, tuple) else v for k, v in select.where.items()}


# --- the ledger's shape -------------------------------------------------------------------------------------------

def test_at_least_130_claims_over_the_sixteen_papers():
    assert len(LEDGER) >= 130
    assert set(PAPERS) == {"jast", "fedleak", "awa", "tgias", "bounds", "li", "fu", "unsplit", "vflair", "vflbench",
                           "ghazi", "yang", "zou", "vepakomma", "liu", "erdogan"}
    for module in MODULES:
        assert module.CITATION and module.CLAIMS, module.PAPER
        assert any(c.measure is not None for c in module.CLAIMS), f"{module.PAPER} has no measured claim"
        assert all(c.paper == module.PAPER for c in module.CLAIMS)


def test_the_batch_label_inference_paper_is_one_key_over_its_attacks_and_its_defence():
    """arXiv 2112.05409 is one paper: every claim measured by its attacks (bli, bli-replace) or on the grids that run
    them is under `liu`, beside its CAE claims, and no other key cites it."""
    commands = {name: " ".join(parse_sweep(text, name, f"{name}.toml").command) for name, text in shipped().items()}
    for claim in MEASURED:
        if commands.get(claim.measure.sweep) in ("attack bli", "attack bli-replace"):
            assert claim.paper == "liu", claim.id
    assert [key for key, citation in PAPERS.items() if "2112.05409" in citation] == ["liu"]
    assert {c.id.split(".")[1] for c in LEDGER if c.paper == "liu"} >= {"bli", "bli-replace", "cae", "dcae"}


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


def test_exact_checks_are_checks_and_not_comparable_claims_say_why():
    for claim in LEDGER:
        if claim.exact:
            assert claim.measure is not None and isinstance(claim.measure.rule, (Holds, Trend)), claim.id
            assert not claim.not_comparable, claim.id
        if claim.comparable_if:
            assert claim.not_comparable, claim.id
        if claim.not_comparable:
            assert claim.measure is not None and len(claim.not_comparable) > 40, claim.id


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
        if isinstance(rule, Trend) and rule.columns is None:
            assert rule.x in keys, f"{claim.id}: {rule.x} is not swept"
        if isinstance(rule, (Beats, Close)) and rule.a != rule.b:
            assert rule.by in keys, f"{claim.id}: {rule.by} is not swept"


def test_selections_pick_cells_that_exist():
    for claim in MEASURED:
        cells = grid(claim.measure.sweep)
        if cells is None:
            continue
        rule = claim.measure.rule
        for select in selects(claim):
            assert select.rows(cells), f"{claim.id}: no cell of {claim.measure.sweep} has {dict(select.where)}"
        if isinstance(rule, (Beats, Close)) and rule.a != rule.b:    # at least two seeds in common
            sides = [{str(c[rule.by]) for c in select.rows(cells)} for select in (rule.a, rule.b)]
            assert len(sides[0] & sides[1]) >= 2, claim.id
        if isinstance(rule, Trend) and rule.columns is None:
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
JITTER = (0.0, 0.03, -0.02, 0.01, -0.025)


def _baselines(rule, trivial: bool) -> dict:
    """The guard metric's baselines (the rule's metric where the cells record baselines, or its `guard`), far
    below any synthetic value, or (`trivial`) beyond every one; with the guard metric's own value where it is
    not the rule's metric."""
    if isinstance(rule, (Fails, Holds)) or rule.guard == "":
        return {}
    guard = rule.metric if rule.guard is None else rule.guard
    higher = rule.higher_is_better if rule.guard is None else guard != "image_mse"
    if trivial:
        value = 1e6 if higher else 1e-12
    else:
        value = -1e6 if higher else 1e6
    own = {} if guard == rule.metric else {guard: 20.0 if higher else 0.01}
    return {**own, **{f"baselines.{name}.{guard}": value for name in ("zero", "mean", "initial")}}


def _axis_values(rule, target_gap, agree: bool, sign: float) -> tuple[float, float]:
    """(a, b) on the rule's scale such that a - b (or a / b) meets the paper's gap, or reverses it."""
    s = rule.scale
    delta = (abs(s.to_axis(target_gap)) if target_gap else 0.5) + 2 * max(s.axis_band, 0.05)
    base = s.to_axis(0.2) if s.log else 20.0
    a = base + (sign if agree else -sign) * delta
    return s.from_axis(a), s.from_axis(base)


def synthetic(claim: Claim, agree: bool, trivial: bool = False) -> list[dict]:
    """Rows built from the claim's own selections and metric that agree (or disagree) with the paper; with
    `trivial`, baselines no value beats."""
    rule = claim.measure.rule
    comparable = {k: v[0] if isinstance(v, tuple) else v for k, v in claim.comparable_if.items()}
    extra = {**_baselines(rule, trivial), **(comparable if agree else {})}
    if isinstance(rule, (Beats, Close)):
        sign = 1.0 if rule.higher_is_better else -1.0
        if isinstance(rule, Close):
            a, b = _axis_values(rule, None, True, sign)
            size = rule.scale.to_axis(rule.margin)
            a = b if agree else rule.scale.from_axis(rule.scale.to_axis(b) - sign * 4 * size)
        else:
            a, b = _axis_values(rule, rule.gap, agree, sign)
            size = abs(rule.scale.to_axis(a) - rule.scale.to_axis(b))
        rows = []
        for s in SEEDS:
            wobble = (1 + JITTER[s]) if rule.scale.log else 1.0
            shift = 0.0 if rule.scale.log else JITTER[s] * size
            a_row = {**_where_values(rule.a), rule.by: s, rule.metric: a * wobble + shift, **extra}
            b_row = {**_where_values(rule.b), rule.by: s, (rule.metric_b or rule.metric): b, **extra}
            if rule.a == rule.b:
                rows.append({**a_row, **b_row, rule.metric: a * wobble + shift})
            else:
                rows += [a_row, b_row]
        return rows
    if isinstance(rule, Trend):
        cells = grid(claim.measure.sweep)
        if rule.columns is not None:
            xs = sorted(rule.columns)
        else:
            xs = sorted({float(c[rule.x]) for c in rule.select.rows(cells)}) if cells else [1.0, 2.0, 4.0]
        direction = rule.direction if agree else -rule.direction
        step = abs(rule.scale.to_axis(rule.gap)) if rule.gap else 1.0
        values = [rule.scale.from_axis((rule.scale.to_axis(20.0) if not rule.scale.log else 0.0)
                                       + direction * (step + 1.0) * i) for i in range(len(xs))]
        if rule.columns is not None:                # a point is one column, or a group read as its median
            return [{**_where_values(rule.select), "seed": s, **extra,
                     **{c: v * (1 + JITTER[s] * (i == len(xs) - 1)) for i, (x, v) in enumerate(zip(xs, values))
                        for c in (rule.columns[x] if isinstance(rule.columns[x], tuple) else (rule.columns[x],))}}
                    for s in SEEDS]
        return [{**_where_values(rule.select), rule.x: x, "seed": s, **extra,
                 rule.metric: v * (1 + JITTER[s] * (i == len(xs) - 1))}
                for i, (x, v) in enumerate(zip(xs, values)) for s in SEEDS]
    if isinstance(rule, Level):
        s, sign = rule.scale, 1.0 if rule.higher_is_better else -1.0
        if s.binary:                                # a yes/no per cell: every cell says the paper's answer, or not
            flag = rule.value if agree else 1.0 - rule.value
            return [{**_where_values(rule.select), "seed": k, rule.metric: flag, **extra} for k in SEEDS]
        off = 0.0 if agree else -sign * (s.axis_band + max(abs(s.to_axis(rule.value)) * 0.5, 1.0))
        value = s.from_axis(s.to_axis(rule.value) + off)
        return [{**_where_values(rule.select), "seed": k, rule.metric: value * (1 + JITTER[k]), **extra}
                for k in SEEDS]
    if isinstance(rule, Fails):
        claimed = agree == rule.fails               # the cells fail: at a trivial answer
        value = 10.0 if claimed else 30.0          # failing: below the baselines' 12 (above, for an error)
        if not rule.higher_is_better:
            value = 40.0 - value
        if rule.two_sided and claimed:              # failing two-sidedly: at the baselines, not below them
            value = 12.0
        base = {f"baselines.{n}.{rule.metric}": 12.0 for n in ("zero", "mean", "initial")}
        return [{**_where_values(rule.select), "seed": k, rule.metric: value + JITTER[k] / 10, **base,
                 **({k2: v for k2, v in extra.items() if not k2.startswith("baselines.")})} for k in SEEDS]
    if isinstance(rule, Holds):
        return [{**_where_values(rule.select), "seed": k, rule.flag: agree, **extra} for k in SEEDS]
    raise AssertionError(f"{claim.id}: no synthetic rows for {type(rule).__name__}")


def _expected(claim: Claim, agree: bool) -> str:
    if claim.exact:
        return "holds" if agree else "fails"
    if claim.not_comparable and not (agree and claim.comparable_if):
        return "measured, not comparable"
    if agree:
        return "partly" if claim.easier else "reproduced"       # met only at an easier setting than the paper's
    return "contradicted"


@pytest.mark.parametrize("claim", MEASURED, ids=[c.id for c in MEASURED])
def test_each_claim_reads_rows_that_agree_and_rows_that_disagree(claim):
    agreeing = judge(claim, lambda sweep: synthetic(claim, True))
    assert agreeing.verdict == _expected(claim, True), (agreeing.lab, agreeing.reason)
    disagreeing = judge(claim, lambda sweep: synthetic(claim, False))
    expected = _expected(claim, False)
    if expected == "contradicted" and disagreeing.values.get("magnitude_only") and claim.reduced:
        expected = "partly"                          # a size ruled out only at the lab's reduced setting
        assert claim.reduced in disagreeing.reason
    assert disagreeing.verdict == expected, (disagreeing.lab, disagreeing.reason)


GUARDED = [c for c in MEASURED if not c.exact and not (isinstance(c.measure.rule, Fails) and c.measure.rule.fails)
           and _baselines(c.measure.rule, True)]


@pytest.mark.parametrize("claim", GUARDED, ids=[c.id for c in GUARDED])
def test_no_claim_is_reproduced_at_a_trivial_baseline(claim):
    """Rows that agree with the paper in every other way, but no better than a trivial answer."""
    if isinstance(claim.measure.rule, Fails):       # a leak claim: the cells at the trivial answer
        rows = synthetic(claim, False)
    else:
        rows = synthetic(claim, True, trivial=True)
    verdict = judge(claim, lambda sweep: rows)
    assert verdict.verdict != "reproduced", (verdict.lab, verdict.reason)


def _guard_metric(rule) -> str:
    """The metric whose trivial answers judge the rule's working side ("" where the rule declares none)."""
    guard = getattr(rule, "guard", None)
    return rule.metric if guard is None else guard


IMAGE_METRICS = ("psnr", "ssim", "image_mse", "lpips")
"""Metrics of a reconstructed image (and their variants: image_mse_minmax, psnr_best_match): each has trivial
answers (the all-zero image, the mean image, the start), so a rule reading one must guard it."""


def _guards_both_arms(rule) -> bool:
    """The rule compares two arms that must both work: a comparison of two attacks, or a trend's two ends; a
    defence's own arm (`defended_b`, `defended_end`) and a defence against a weaker one (`guard_side="b"`) are
    guarded on one side."""
    if isinstance(rule, Close):
        return True
    if isinstance(rule, Beats):
        return not rule.defended_b and rule.guard_side == "a"
    return isinstance(rule, Trend) and not rule.defended_end


def why_not_signable(claim: Claim, verdict) -> str:
    """Why a reviewer could not sign a reproduced verdict on its trivial baselines ("" where nothing stops it):
    its metric has trivial answers but the rule reads none, its cells record no baseline for the guard, or its
    working side (or, where both arms must work, its reference arm) is at or below one."""
    from splitlab.claims.cells import GUARD_SCALES

    rule = claim.measure.rule
    if claim.exact or verdict.verdict != "reproduced" or (isinstance(rule, Fails) and rule.fails):
        return ""                                     # a claim of failure: at the trivial answer is the claim
    guard = _guard_metric(rule)
    if guard not in GUARD_SCALES:
        if rule.metric in GUARD_SCALES or rule.metric.startswith(IMAGE_METRICS):
            return f"{rule.metric} has trivial answers but the rule reads none"
        return ""                                     # a time, an error of a bound, a model's accuracy, a fit
    values, higher, scale = verdict.values, guard != "image_mse", GUARD_SCALES[guard]
    if "trivial" not in values:
        return f"its cells record no baseline for {guard}"
    if at_or_below(values["claimed"], values["trivial"], scale, higher):
        return "its working side is at or below a trivial answer"
    if _guards_both_arms(rule):
        if "reference_trivial" not in values:
            return "its reference arm is not guarded"
        if at_or_below(values["reference_claimed"], values["reference_trivial"], scale, higher):
            return "its reference arm is at or below a trivial answer"
    return ""


def test_a_reproduced_verdict_a_reviewer_could_not_sign_is_caught():
    """False reproduced verdicts the whole-ledger check must refuse. The old check let the first two through: it
    guarded the reference arm of `Close` alone and skipped an image error read with no guard."""
    beats = _claim(Beats(a=Select({"a": 1}, "A"), b=Select({"a": 2}, "B")))
    trend = _claim(Trend(select=Select({}, "x")))
    gap_to_failed = Verdict("reproduced", "", "", {"claimed": 15.0, "trivial": 10.0, "guard": "psnr",
                                                   "reference_claimed": 2.5, "reference_trivial": 10.0})
    assert why_not_signable(beats, gap_to_failed) == "its reference arm is at or below a trivial answer"
    assert why_not_signable(trend, gap_to_failed) == "its reference arm is at or below a trivial answer"
    unguarded = _claim(Beats(a=Select({"a": 1}, "A"), b=Select({"a": 2}, "B"), metric="image_mse_minmax", guard=""))
    assert why_not_signable(unguarded, Verdict("reproduced", "")) == \
        "image_mse_minmax has trivial answers but the rule reads none"
    assert why_not_signable(beats, Verdict("reproduced", "")) == "its cells record no baseline for psnr"
    defence = _claim(Beats(a=Select({"a": 1}, "A"), b=Select({"a": 2}, "B"), defended_b=True))
    assert why_not_signable(defence, gap_to_failed) == ""       # the defended arm failing is the defence's claim


def _claim(rule) -> Claim:
    return Claim("p.w.x", "p", "w", "c", "n", Measure("s", rule, "how"))


def test_no_claim_is_reproduced_at_or_below_a_trivial_baseline_in_the_shipped_results():
    """Over the whole ledger as shipped: every reproduced claim whose metric has trivial answers carries them,
    its working side is above them and, where both arms must work, so is its reference arm; a claim that
    declares no guard reads a metric without trivial answers (a time, an error of a bound, a model's accuracy,
    a fit)."""
    unsigned = {c.id: why for c in MEASURED if (why := why_not_signable(c, judge(c)))}
    assert not unsigned
    assert sum(judge(c).verdict == "reproduced" and _guard_metric(c.measure.rule) != "" for c in MEASURED) >= 9


def test_without_results_every_claim_is_not_attempted_with_a_reason():
    for claim in LEDGER:
        verdict = judge(claim, lambda sweep: None)
        assert verdict.verdict == ("not run" if claim.exact else "not attempted") and verdict.reason, claim.id


# --- the command ------------------------------------------------------------------------------------------------------

def _claims(*args):
    """`splitlab claims` in this process (a new interpreter only where what it imports is the question)."""
    from typer.testing import CliRunner

    from splitlab.cli import app
    return CliRunner().invoke(app, ["claims", *args])


def test_the_scoreboard_counts_every_claim_from_the_shipped_results_without_torch():
    import json
    import subprocess
    import sys

    record = json.loads(_claims("--json").stdout)
    counted = sum(sum(kind.values()) for paper in record["counts"].values() for kind in paper.values())
    assert counted == len(LEDGER) == len(record["claims"])
    assert set(record["meanings"]) == set(VERDICTS) | set(CHECKS)
    exact = {row["id"] for row in record["claims"] if row["kind"] == "exact check"}
    assert exact == {c.id for c in LEDGER if c.exact}
    assert sum(sum(p["exact checks"].values()) for p in record["counts"].values()) == len(exact)
    shipped_sweeps = {name for name, meta in record["results"].items() if meta is not None}
    for row in record["claims"]:
        if row["measure"] and row["measure"]["sweep"] in shipped_sweeps:
            assert row["verdict"] != "not attempted" or row["reason"], row["id"]
    probe = subprocess.run([sys.executable, "-c", "import sys; from splitlab.claims.cli import claims_command; "
                            "from splitlab.claims import scoreboard; list(scoreboard()); print('torch' in sys.modules)"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert probe.stdout.strip() == "False", probe.stderr


def test_deviations_are_listed_per_paper_and_bad_input_is_one_line():
    import json

    found = json.loads(_claims("--deviations", "--json").stdout)["deviations"]
    assert set(found) == set(PAPERS) and all(found.values())
    whats = {p: {d["what"] for d in rows} for p, rows in found.items()}
    assert "alignment accuracy" in whats["tgias"] and "GGL's generator" in whats["bounds"]
    assert {d["source"] for d in found["fedleak"]} >= {"fedleak", "invgrad", "idlg", "gi"}
    for args in (("--paper", "nope"), ("--deviations", "--run", "jast")):
        bad = _claims(*args)
        assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


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


def test_every_shipped_record_counts_its_rows_and_says_where_they_come_from():
    """A shipped file's `cells` is its row count; rows added beside the sweep's own (the label step of
    tgias-labels-all) are counted apart, so the sweep's record (6 cells) and the file (20 rows) both read true."""
    import csv
    import json

    from splitlab.claims.results import RESULTS

    for meta_path in sorted(RESULTS.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        with open(meta_path.with_suffix(".csv"), newline="") as fh:
            assert meta["cells"] == sum(1 for _ in csv.DictReader(fh)), meta_path.name
        if "label_step" in meta:
            added = sum(step["cells"] for step in meta["label_step"])
            assert all(step["cells"] == len(step["rows"]) for step in meta["label_step"]), meta_path.name
            assert meta["cells_from"] == {"sweep": meta["sweep_record"]["cells"], "label_step": added}
            assert meta["cells"] == meta["sweep_record"]["cells"] + added, meta_path.name


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

"""`splitlab matrix`: a bad grid refused before any cell runs, the DCS arithmetic, shared ranks, the report from
the cell files, resume after a kill, the worst-case search space from the attack's declarations."""
from __future__ import annotations

import csv
import json
import math

import pytest
from typer.testing import CliRunner

from splitlab import sweep_cells
from splitlab.cli import app
from splitlab.matrix_grid import NONE, parse_matrix, shipped
from splitlab.matrix_report import write_report
from splitlab.matrix_score import Interval, dcs, interval, shared_ranks
from splitlab.matrix_worst import search_space
from vfl.defences import registry as defences
from vfl.errors import SplitlabError

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")

TINY = """
description = "tiny"
seeds = {seeds}
attacks = ["label-norm"]
defences = {defences}
{extra}
[tasks.wdbc]
dataset = "wdbc"
arch = "tabular-mlp"
cut-layer = 1
epochs = 1
"""


def _tiny(seeds=(0, 1), defences_=("marvell",), extra="[strengths]\nmarvell = [1.0]"):
    return TINY.format(seeds=list(seeds), defences=json.dumps(list(defences_)), extra=extra)


def _refused(tmp_path, text):
    path = tmp_path / "grid.toml"
    path.write_text(text)
    result = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(tmp_path / "out"),
                                 "--no-progress"])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out").exists()                     # refused before anything is written
    return result.output.strip()


@pytest.mark.parametrize("text, says", [
    (_tiny(defences_=("no-such-defence",), extra=""), "unknown defence 'no-such-defence'"),
    (_tiny(extra="[strengths]\nmarvell = [-1.0]"), "strength -1.0 of marvell"),
    (_tiny(defences_=("orthogonal",), extra="[strengths]\northogonal = [1.0]"), "declares no strength option"),
    (_tiny().replace('"label-norm"', '"label-direct"').replace('"marvell"', '"mid"').replace(
        "[strengths]\nmarvell = [1.0]", ""), "label-direct x mid is refused by the defence matrix"),
    (_tiny().replace('"label-norm"', '"dlg"'), "horizontal-FL attack"),
    ("bogus = 1\n" + _tiny(), "unknown key 'bogus'"),
    (_tiny() + "bogus = 1\n", "has no option --bogus"),             # a task option its command does not take
])
def test_a_bad_grid_is_refused_in_one_line_with_exit_2_before_any_cell(tmp_path, text, says):
    output = _refused(tmp_path, text)
    assert says in output and len(output.splitlines()) == 1, output


def test_the_strength_axis_is_the_defences_own_declaration():
    matrix = parse_matrix(_tiny(defences_=("marvell", "max-norm"), extra=""), "t", "t.toml")
    declared = [s["scale"] for s in defences.spec("marvell").strengths]
    assert [a.value for a in matrix.arms if a.defence == "marvell"] == declared
    assert [a.text for a in matrix.arms][:1] == ["none"] and "max-norm" in [a.text for a in matrix.arms]
    cells = matrix.cells()
    assert len(cells) == matrix.size == 1 * 1 * (1 + len(declared) + 1) * 2
    send_back = {dict(c.swept)["send-back"] for _, _, c in cells}
    assert "marvell:scale=0.25" in send_back and {dict(c.swept)["defence"] for _, _, c in cells} == {"none"}


def test_every_shipped_matrix_parses_and_its_defences_declare_their_axis():
    for name, text in shipped().items():
        matrix = parse_matrix(text, name, f"{name}.toml")
        assert matrix.size <= 2000 and matrix.arms[0] == NONE
        if "[paper]" in text:
            assert parse_matrix(text, name, f"{name}.toml", paper_size=True).size >= matrix.size


def test_dcs_matches_a_hand_computation():
    # AP 0.9 against AP* 0.5, MP 0.8 against MP* 0.9: 1 / (1 + sqrt(0.5 * 0.16 + 0.5 * 0.01)) = 1 / 1.2915476 = 0.7742649
    assert dcs(0.9, 0.8, 0.5, 0.9) == pytest.approx(0.7742649, abs=1e-7)
    assert dcs(0.5, 0.9, 0.5, 0.9) == 1.0                     # the trivial attack at no cost to the task
    assert dcs(0.1, 0.9, 0.5, 0.9) == dcs(0.9, 0.9, 0.5, 0.9)  # a flipped leak AUC leaks as much


def test_interval_is_student_t_over_seeds():
    found = interval([1.0, 2.0, 3.0])
    assert found.mean == 2.0 and found.n == 3
    assert found.high - found.mean == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-6)
    assert interval([0.5]) == Interval(0.5, 0.5, 0.5, 1) and interval([]) is None


def test_overlapping_intervals_share_a_rank():
    ranks = shared_ranks({"a": Interval(0.85, 0.8, 0.9, 3), "b": Interval(0.8, 0.75, 0.85, 3),
                          "c": Interval(0.55, 0.5, 0.6, 3), "d": Interval(0.52, 0.45, 0.58, 3)})
    assert ranks == {"a": 1, "b": 1, "c": 3, "d": 3}


def _fake_cell(out, cell, ap, mp):
    """A finished cell as the sweep machinery leaves it, with the metrics a label attack writes."""
    folder = out / "cells" / cell.dirname
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"leak_auc": ap, "accuracy": mp, "baselines": {
        "majority": {"leak_auc": 0.5, "label_accuracy": 0.6}}}))
    (folder / "cell.json").write_text(json.dumps({"cell": cell.key, "status": "ok", "seconds": 2.0}))


def _report_of(out, values):
    """The report of the tiny matrix over seeds 0-2 whose every cell finished with the (leak AUC, accuracy) `values`
    give its (defence, seed): written into `out`, its summary returned."""
    matrix = parse_matrix(_tiny(seeds=(0, 1, 2)), "t", "t.toml")
    for _, _, cell in matrix.cells():
        arm = matrix.arm_of("wdbc", "label-norm", cell)
        _fake_cell(out, cell, *values[arm.defence, dict(cell.swept)["seed"]])
    return write_report(matrix, out)


def test_the_report_scores_each_arm_against_the_undefended_cell_of_its_seed(tmp_path):
    values = {("none", 0): (0.9, 0.90), ("none", 1): (0.8, 0.92), ("none", 2): (0.85, 0.88),
              ("marvell", 0): (0.6, 0.85), ("marvell", 1): (0.55, 0.9), ("marvell", 2): (0.5, 0.8)}
    summary = _report_of(tmp_path, values)
    assert summary["cells_ok"] == 6 and summary["figures"] == ["frontier-wdbc-label-norm.png"]
    for name in ("report.md", "matrix.csv", "scores.csv", "frontier-wdbc-label-norm.png"):
        assert (tmp_path / name).stat().st_size > 0
    rows = {r["arm"]: r for r in csv.DictReader((tmp_path / "matrix.csv").open())}
    expected = [dcs(0.6, 0.85, 0.5, 0.90), dcs(0.55, 0.9, 0.5, 0.92), dcs(0.5, 0.8, 0.5, 0.88)]
    assert float(rows["marvell:scale=1.0"]["dcs"]) == pytest.approx(sum(expected) / 3)
    scores = {r["arm"]: r for r in csv.DictReader((tmp_path / "scores.csv").open())}
    assert float(scores["marvell:scale=1.0"]["c_dcs"]) == pytest.approx(sum(expected) / 3)
    per_seed = [r for r in csv.DictReader((tmp_path / "seeds.csv").open()) if r["arm"] == "marvell:scale=1.0"]
    assert sorted(float(r["dcs"]) for r in per_seed) == pytest.approx(sorted(expected))
    assert scores["marvell:scale=1.0"]["rank"] == "1"          # intervals apart: marvell above no defence
    assert scores["no defence"]["rank"] == "2"
    assert "## Ranking" in (tmp_path / "report.md").read_text()
    assert summary["unjudged"] == [] and "cannot judge" not in (tmp_path / "report.md").read_text()


def test_an_attack_at_chance_undefended_is_named_as_unable_to_judge_a_defence(tmp_path):
    values = {("none", 0): (0.44, 0.90), ("none", 1): (0.58, 0.92), ("none", 2): (0.47, 0.88),
              ("marvell", 0): (0.5, 0.85), ("marvell", 1): (0.52, 0.9), ("marvell", 2): (0.49, 0.8)}
    summary = _report_of(tmp_path, values)
    [blind] = summary["unjudged"]
    assert (blind["task"], blind["attack"], blind["seeds"]) == ("wdbc", "label-norm", 3)
    assert blind["undefended"].mean == pytest.approx((0.44 + 0.58 + 0.47) / 3) and blind["trivial"] == 0.5
    report = (tmp_path / "report.md").read_text()
    assert "## Attacks that cannot judge a defence here" in report and "| wdbc | label-norm | leak_auc |" in report


def test_one_seed_names_no_attack_as_unable_to_judge(tmp_path):
    matrix = parse_matrix(_tiny(seeds=(0,)), "t", "t.toml")
    for _, _, cell in matrix.cells():
        _fake_cell(tmp_path, cell, 0.99 if matrix.arm_of("wdbc", "label-norm", cell).defence == "none" else 0.6, 0.9)
    assert write_report(matrix, tmp_path)["unjudged"] == []          # no interval: nothing said either way


def test_the_shipped_cpu_reports_unjudged_attacks_are_those_of_its_seeds():
    from splitlab.claims.results import RESULTS
    from splitlab.matrix_report import Row, _table, unjudged

    shipped_dir = RESULTS / "matrix-cpu"
    none = {"no defence": NONE}
    rows = [Row(task=r["task"], attack=r["attack"], arm=none.get(r["arm"], r["arm"]), seed=int(r["seed"]),
                metric=r["metric"], ap=float(r["ap"]), ap_star=float(r["ap_star"]))
            for r in csv.DictReader((shipped_dir / "seeds.csv").open())]
    blind = unjudged(rows)
    assert [(u["task"], u["attack"]) for u in blind] == [("wdbc", "label-norm"), ("mnist5k", "unsplit")]
    report = (shipped_dir / "report.md").read_text()
    table = "\n".join(_table(blind, ["task", "attack", "metric", "undefended", "trivial", "seeds"]))
    assert table in report and report.index("## Attacks that cannot judge") < report.index("## Failed cells")


def test_the_reports_intervals_stay_within_what_each_score_can_be(tmp_path):
    """A DCS lies in (0, 1], an accuracy and a leak AUC in [0, 1]: a t-interval over three seeds that reaches past
    that is cut to it, its mean kept."""
    assert interval([0.95, 1.0, 0.7], within=(0.0, 1.0)).high == 1.0
    values = {("none", 0): (0.9, 0.90), ("none", 1): (0.8, 0.92), ("none", 2): (0.85, 0.88),
              ("marvell", 0): (0.5, 0.90), ("marvell", 1): (0.5, 0.92), ("marvell", 2): (0.7, 0.7)}
    _report_of(tmp_path, values)
    cells = {r["arm"]: r for r in csv.DictReader((tmp_path / "matrix.csv").open())}
    scores = {r["arm"]: r for r in csv.DictReader((tmp_path / "scores.csv").open())}
    marvell = "marvell:scale=1.0"
    assert float(cells[marvell]["dcs_high"]) == 1.0 and float(scores[marvell]["c_dcs_high"]) == 1.0
    assert float(cells[marvell]["mp_high"]) == 1.0 and float(cells[marvell]["mp"]) == pytest.approx(2.52 / 3)
    assert float(scores[marvell]["c_dcs"]) < 1.0


def test_an_arm_whose_cell_failed_is_not_ranked_and_the_report_names_the_cell(tmp_path):
    matrix = parse_matrix(_tiny(seeds=(0, 1, 2), defences_=("marvell", "max-norm")), "t", "t.toml")
    for _, _, cell in matrix.cells():
        arm, seed = matrix.arm_of("wdbc", "label-norm", cell), dict(cell.swept)["seed"]
        _fake_cell(tmp_path, cell, 0.5 if arm.defence == "marvell" else 0.9, 0.9)
        if arm.defence == "marvell" and seed == 1:            # its training diverged at one seed
            (tmp_path / "cells" / cell.dirname / "cell.json").write_text(json.dumps({
                "cell": cell.key, "status": "failed", "error": "training diverged: the loss became non-finite\nmore"}))
    summary = write_report(matrix, tmp_path)
    assert summary["cells_failed"] == 1
    scores = {r["arm"]: r for r in csv.DictReader((tmp_path / "scores.csv").open())}
    assert scores["marvell:scale=1.0"]["rank"] == "" and scores["marvell:scale=1.0"]["failed"] == "1"
    assert float(scores["marvell:scale=1.0"]["c_dcs"]) == 1.0     # the seeds it survived, shown but not ranked
    assert (scores["no defence"]["rank"], scores["max-norm"]["rank"], scores["max-norm"]["failed"]) == ("1", "1", "0")
    report = (tmp_path / "report.md").read_text()
    assert "## Failed cells" in report
    assert "| wdbc | label-norm | marvell:scale=1.0 | 1 | training diverged: the loss became non-finite |" in report


def test_the_worst_case_ranking_gives_each_arms_place_against_default_and_strongest_attack():
    from splitlab.matrix_score import worst_ranking

    def row(attack, arm, default, worst):
        return {"task": "wdbc", "attack": attack, "arm": arm, "default_dcs": default, "worst_dcs": worst}

    ranking = worst_ranking([row("a", "x", 0.9, 0.6), row("b", "x", 0.9, 0.6),       # best by default, falls
                             row("a", "y", 0.8, 0.8), row("b", "y", 0.8, 0.8),
                             row("a", "z", 0.7, 0.7), row("b", "z", 0.6, 0.7),
                             row("a", "w", 0.95, None), row("b", "w", 0.9, 0.9)])     # a failed search: left out
    got = {r["arm"]: (r["default_rank"], r["worst_rank"], r["rank_change"]) for r in ranking}
    assert got == {"x": (1, 3, 2), "y": (2, 1, -1), "z": (3, 2, -1)}
    assert [r["arm"] for r in ranking] == ["y", "z", "x"]
    assert ranking[0]["default_dcs"] == pytest.approx(0.8) and ranking[1]["default_dcs"] == pytest.approx(0.65)


def test_the_worst_case_space_comes_from_the_attacks_declarations():
    space = search_space("label-norm")
    assert space == {"iterations": ("int", 0, 10_000_000, False)}
    assert search_space("label-norm", {"iterations": [1, 63]})["iterations"] == ("int", 1, 63, False)
    with pytest.raises(SplitlabError, match="outside its declared range"):
        search_space("label-norm", {"iterations": [-1, 63]})
    with pytest.raises(SplitlabError, match="cannot search"):
        search_space("label-norm", {"lr": [0.1, 1]})


@pytest.mark.slow
def test_resume_after_a_kill_loses_no_finished_cell(tmp_path, monkeypatch):
    path, out = tmp_path / "grid.toml", tmp_path / "out"
    path.write_text(_tiny(seeds=(0,)))
    real, calls = sweep_cells.run_cell, []

    def killed_after_one(cell, cell_dir, **kw):                # the second cell is where the kill lands
        calls.append(cell.key)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(cell, cell_dir, **kw)

    monkeypatch.setattr(sweep_cells, "run_cell", killed_after_one)
    first = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(out), "--no-progress"])
    assert first.exit_code == 130, first.output
    (done,) = [p for p in (out / "cells").iterdir() if (p / "cell.json").is_file()]
    before = (done / "cell.json").read_text()
    monkeypatch.setattr(sweep_cells, "run_cell", real)
    second = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(out), "--no-progress",
                                 "--json"])
    assert second.exit_code == 0, second.output
    record = json.loads(second.stdout)
    assert (record["ran"], record["skipped"], record["ok"]) == (1, 1, 2)
    assert (done / "cell.json").read_text() == before          # the finished cell was not run again
    assert {r["arm"] for r in csv.DictReader((out / "scores.csv").open())} == {"no defence", "marvell:scale=1.0"}


def test_a_directory_holding_another_matrix_is_refused_in_one_line_and_kept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "matrix.toml").write_text(_tiny(seeds=(0, 1, 2)))
    (out / "matrix.json").write_text(json.dumps({"matrix": "other", "paper_size": False}))
    path = tmp_path / "grid.toml"
    path.write_text(_tiny())
    result = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "holds another matrix (other)" in result.output and len(result.output.strip().splitlines()) == 1
    assert (out / "matrix.toml").read_text() == _tiny(seeds=(0, 1, 2))         # its definition kept
    (out / "matrix.toml").write_text(_tiny())                                   # the same matrix: resumes
    dry = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0, dry.output


def test_the_worst_case_rows_outlive_a_later_report_without_them(tmp_path):
    from splitlab.matrix_report import read_worst

    matrix = parse_matrix(_tiny(seeds=(0,)), "t", "t.toml")
    for _, _, cell in matrix.cells():
        _fake_cell(tmp_path, cell, 0.7, 0.9)
    worst = [{"task": "wdbc", "attack": "label-norm", "arm": "marvell:scale=1.0", "seed": 0, "default_ap": 0.7,
              "default_dcs": 0.8125, "worst_ap": None, "worst_dcs": None, "worst_options": "--iterations 3, 4"}]
    write_report(matrix, tmp_path, worst)
    write_report(matrix, tmp_path)                              # the report after a cell: no search rows given
    assert "## Worst case" in (tmp_path / "report.md").read_text()
    assert "--iterations 3, 4" in (tmp_path / "report.md").read_text()
    assert read_worst(tmp_path) == worst


def test_another_matrix_claiming_the_new_directory_before_the_lock_is_refused_under_it(tmp_path, monkeypatch):
    """Two matrix commands on one new directory: both pass the first check; the one that takes the lock second
    finds the other's matrix there and refuses, leaving it whole."""
    import contextlib

    from splitlab import matrix as command

    out, other = tmp_path / "out", _tiny(seeds=(0, 1, 2))
    real = command.locked

    @contextlib.contextmanager
    def claimed_first(sweep_dir):                  # the other command wrote its matrix between check and lock
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "matrix.toml").write_text(other)
        (sweep_dir / "matrix.json").write_text(json.dumps({"matrix": "other", "paper_size": False}))
        with real(sweep_dir):
            yield

    monkeypatch.setattr(command, "locked", claimed_first)
    path = tmp_path / "grid.toml"
    path.write_text(_tiny())
    result = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "holds another matrix (other)" in result.output
    assert (out / "matrix.toml").read_text() == other and not (out / "cells").exists()


def test_the_csv_quotes_what_needs_it(tmp_path):
    from splitlab.matrix_report import _csv

    records = [{"arm": 'mlp "client", wide', "c_dcs": Interval(0.5, 0.4, 0.6, 3)}, {"arm": "a\nb", "c_dcs": None}]
    rows = list(csv.DictReader(_csv(records, ["arm", "c_dcs"]).splitlines(keepends=True)))
    assert [r["arm"] for r in rows] == ['mlp "client", wide', "a\nb"]
    assert (rows[0]["c_dcs"], rows[0]["c_dcs_low"], rows[1]["c_dcs_high"]) == ("0.5", "0.4", "")


TWO_TASKS = """
seeds = [0, 1]
attacks = ["unsplit", "label-norm"]
defences = ["marvell"]
[strengths]
marvell = [1.0]
[tasks.digits]
dataset = "mnist5k"
task = "binary"
arch = "small-mlp"
cut-layer = 1
epochs = 1
[tasks.digits.unsplit]
arch = "cnn"
iterations = 3
[tasks.wdbc]
dataset = "wdbc"
arch = "tabular-mlp"
cut-layer = 1
epochs = 1
attacks = ["label-norm"]
[cases.mlp-client]
arch = "mlp"
tasks = ["digits"]
"""


def test_a_task_runs_its_own_attacks_with_their_own_options_and_a_case_row_changes_its_case():
    matrix = parse_matrix(TWO_TASKS, "t", "t.toml")
    assert set(matrix.sweeps()) == {("digits", "unsplit"), ("digits", "label-norm"), ("wdbc", "label-norm")}
    assert matrix.size == len(matrix.cells()) == (2 * 3 + 1 * 2) * 2           # digits: 3 arms; wdbc: 2
    for task, attack, cell in matrix.cells():
        options, arm = dict(cell.options), matrix.arm_of(task, attack, cell)
        assert ("iterations" in options) == (attack == "unsplit") and "attacks" not in options
        kept = {"digits": "cnn" if attack == "unsplit" else "small-mlp", "wdbc": "tabular-mlp"}[task]
        assert options["arch"] == ("mlp" if arm.defence == "mlp-client" else kept)
        if arm.defence == "mlp-client":
            assert (options["defence"], options["send-back"]) == ("none", "none") and arm.label == "mlp-client"
    wdbc = matrix.sweeps()["wdbc", "label-norm"]
    assert "arch" in wdbc.fixed and "arch" not in wdbc.zipped        # no case row there: cell names unchanged


@pytest.mark.parametrize("change, says", [
    (('tasks = ["digits"]', 'tasks = ["nope"]'), "[cases.mlp-client] tasks must be"),
    (('arch = "mlp"\ntasks', 'lr = 0.1\ntasks'), "changes lr, which [tasks.digits] does not set"),
    (("[cases.mlp-client]", "[cases.orthogonal]"), "named like a defence"),
    (('attacks = ["label-norm"]', 'attacks = ["label-direction"]'), "attacks must be a non-empty list"),
    (("[tasks.digits.unsplit]", "[tasks.digits.label-direction]"), "is not an attack this task runs"),
])
def test_a_bad_task_or_case_row_is_refused_in_one_line(tmp_path, change, says):
    output = _refused(tmp_path, TWO_TASKS.replace(*change))
    assert says in output and len(output.splitlines()) == 1, output


def test_the_report_shows_the_bytes_across_the_cut_beside_the_time(tmp_path):
    matrix = parse_matrix(_tiny(seeds=(0, 1)), "t", "t.toml")
    for _, _, cell in matrix.cells():
        _fake_cell(tmp_path, cell, 0.7, 0.9)
        path = tmp_path / "cells" / cell.dirname / "metrics.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "cut_bytes": {"client": 1000, "server": 800}}))
    write_report(matrix, tmp_path)
    for name in ("matrix.csv", "scores.csv"):
        rows = list(csv.DictReader((tmp_path / name).open()))
        assert {(r["seconds"], r["bytes"]) for r in rows} == {("2.0", "1800.0")}, name


def test_a_reconstruction_worse_than_the_trivial_image_leaks_nothing_but_a_flipped_auc_leaks():
    from splitlab.matrix_score import scored_ap

    assert scored_ap("ssim", 0.03, 0.12) == 0.12 and scored_ap("ssim", 0.4, 0.12) == 0.4
    assert scored_ap("leak_auc", 0.1, 0.5) == 0.1                 # the DCS's square counts it as 0.9
    assert dcs(scored_ap("ssim", 0.03, 0.12), 0.9, 0.12, 0.9) == 1.0


def test_a_pair_the_defence_matrix_refuses_may_be_skipped_and_only_such_a_pair():
    text = _tiny(defences_=("mid", "marvell"), extra='skip = [["label-direct", "mid"]]').replace(
        '"label-norm"', '"label-norm", "label-direct"')
    matrix = parse_matrix(text, "t", "t.toml")
    arms = {(attack, matrix.arm_of(task, attack, cell).defence) for task, attack, cell in matrix.cells()}
    assert ("label-norm", "mid") in arms and ("label-direct", "mid") not in arms and ("label-direct", "marvell") in arms
    assert matrix.size == len(matrix.cells())
    with pytest.raises(SplitlabError, match="which the defence matrix runs"):
        parse_matrix(text.replace('["label-direct", "mid"]', '["label-norm", "mid"]'), "t", "t.toml")


def test_cells_run_task_by_task_seed_by_seed_and_the_report_is_rewritten_twenty_times_at_most(tmp_path,
                                                                                               monkeypatch):
    from splitlab import matrix as command

    seen = []
    monkeypatch.setattr(command, "run_cells", lambda plan, pending, threads, display: seen.extend(pending) or False)
    path = tmp_path / "grid.toml"
    text = _tiny(seeds=(2, 0, 1), defences_=("marvell", "max-norm"), extra="").replace(
        '"label-norm"', '"label-norm", "label-direction"')
    path.write_text(text + '[tasks.wine]\ndataset = "wine"\narch = "tabular-mlp"\ncut-layer = 1\ntask = "binary"\n')
    result = runner.invoke(app, ["matrix", str(path), "--executor", "local", "--out", str(tmp_path / "o"),
                                 "--no-progress"])
    assert result.exit_code == 1, result.output                   # nothing ran: no cell ok
    order = [(dict(c.options)["dataset"], dict(c.swept)["seed"]) for c, _ in seen]
    assert order == [(task, seed) for task in ("wdbc", "wine") for seed in (2, 0, 1) for _ in range(2 * 5)]
    calls = []
    action = command.every(3, lambda: calls.append(1))
    for _ in range(10):
        action()
    assert len(calls) == 3


def test_the_shipped_cpu_results_are_the_shipped_cpu_matrixs():
    from splitlab.claims.results import RESULTS

    shipped_dir = RESULTS / "matrix-cpu"
    assert (shipped_dir / "matrix.toml").read_text() == shipped()["cpu"]
    ranked = list(csv.DictReader((shipped_dir / "scores.csv").open()))
    assert {r["task"] for r in ranked} == {"wdbc", "mnist5k"}
    assert all(r["rank"] == "" for r in ranked if r["failed"] != "0")     # an arm with a failed cell: unranked

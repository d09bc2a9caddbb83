"""`splitlab theory`: every lemma check matches its expected verdict, and the suite can fail."""
import functools
import json

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from theory_checks import suite
from theory_checks.records import CheckResult
from theory_checks.suite import CHECKS, run_checks
from theory_checks.adam import PaperAdam, paper_adam_direction, paper_adam_init, paper_adam_update
from theory_checks.convergence import example1_adam_rotation, example1_local_minimum
from theory_checks.invariance import (corollary1_invertible_layer, lemma1_sgd, lemma2_fake_gradients, lemma3_cut_layer,
                                      remark2_optimal_loss, remark4_adam_dense)
from theory_checks.protocol_runs import relative_gap
from theory_checks.transforms import make_transform, orthogonality_error

runner = CliRunner()

EXACT_INVARIANCES = [
    "lemma1-sgd", "lemma1-momentum", "lemma1-semi-orthogonal", "corollary2-bias-lemma1",
    "corollary1-invertible-layer", "lemma2-fake-gradients", "corollary2-bias-lemma2", "lemma3-cut-layer",
    "remark2-optimal-loss", "remark4-adam-permutation", "remark4-adam-sign-flip",
]
INEQUALITIES = ["lemma4-preconditioner-bound", "lemma5-descent", "lemma6-pl-descent"]


@pytest.fixture(autouse=True)
def _one_thread():
    with suite.one_intra_op_thread():
        yield


def test_every_check_is_registered_once_under_its_own_name():
    bounds = [name for name in CHECKS if name.startswith("bounds-")]
    assert len(bounds) == 8
    assert set(EXACT_INVARIANCES + INEQUALITIES + ["remark4-adam-dense", "example1-adam-rotation"] + bounds) == set(CHECKS)


@pytest.mark.parametrize("name", EXACT_INVARIANCES)
def test_invariance_holds_to_1e10_in_float64(name):
    result = CHECKS[name](dtype=torch.float64)
    assert isinstance(result, CheckResult) and result.name == name
    assert result.expected == "holds" and result.observed == "holds" and result.matched
    assert result.measured <= 1e-10 and result.tolerance == 1e-10


@pytest.mark.parametrize("name", INEQUALITIES)
def test_adam_bounds_hold_with_slack(name):
    result = CHECKS[name](dtype=torch.float64)
    assert result.matched and result.observed == "holds"
    assert result.measured <= 0.0            # LHS - RHS never positive: the inequality holds at every step


def test_adam_with_a_dense_orthogonal_u_breaks_the_invariance():
    result = remark4_adam_dense()
    assert result.expected == "breaks" and result.observed == "breaks" and result.matched
    assert result.details["activation_gap"] >= 1e-3 and result.measured >= 1e-3
    assert result.details["orthogonality_error"] < 1e-12     # it is U's density, not a bad U


def test_example1_reports_which_start_gets_stuck():
    result = example1_adam_rotation()
    assert result.matched and result.observed == "breaks"
    assert result.measured == pytest.approx(8.354, abs=1e-3)     # f at the local minimum minus f(0)
    # What this lab finds (the paper's sentence says the rotated start gets stuck):
    assert result.details["stuck_starts"] == {"adam": ["original"], "paper-adam": []}
    assert result.details["agrees_with_paper"]["adam"] is False
    assert "original stuck" in result.details["finding"]
    assert example1_local_minimum() == pytest.approx(2.6130, abs=1e-4)


def test_float32_invariances_hold_to_1e5():
    results = run_checks(EXACT_INVARIANCES + ["remark4-adam-dense"], dtype=torch.float32)
    assert results.all_matched
    for r in results.results:
        assert r.tolerance == 1e-5
        assert (r.measured <= 1e-5) if r.expected == "holds" else (r.measured >= 1e-3)


@pytest.mark.parametrize("check", [lemma1_sgd, lemma2_fake_gradients, lemma3_cut_layer, remark2_optimal_loss])
def test_a_non_orthogonal_u_is_reported_as_not_holding(check):
    result = check(transform="gaussian")
    assert result.details["orthogonality_error"] > 0.1
    assert result.observed == "breaks" and not result.matched and result.measured > 1e-3


def test_corollary2_closed_form_uses_the_bias_the_paper_writes():
    details = CHECKS["corollary2-bias-lemma2"]().details
    assert details["per-sample bias matrix"]["closed_form_gap"] <= 1e-10     # [I + XX^T]: the paper's B (n x d_h)
    assert details["shared bias row"]["closed_form_gap"] <= 1e-10            # [11^T + XX^T]: nn.Linear's bias
    assert details["paper_I_plus_XXt_on_shared_bias_gap"] > 1e-3


def test_an_orthogonal_u_that_hides_nothing_fails_corollary1():
    result = corollary1_invertible_layer(transform="identity")
    assert result.measured <= 1e-10                     # the server does recover XU ...
    assert result.details["distance_to_x"] < 1e-10      # ... but XU = X
    assert not result.matched


def test_random_orthogonal_and_semi_orthogonal_matrices():
    gen = torch.Generator().manual_seed(3)
    for rows, cols in [(5, 5), (4, 9)]:
        u = make_transform("orthogonal", rows, cols, gen, torch.float64)
        assert u.shape == (rows, cols) and orthogonality_error(u) < 1e-14
    assert orthogonality_error(make_transform("gaussian", 5, 5, gen, torch.float64)) > 0.1


def test_relative_gap_is_max_abs_diff_over_max_abs():
    a = torch.tensor([1.0, -4.0])
    assert relative_gap(a, torch.tensor([1.5, -4.0])) == pytest.approx(0.125)
    assert relative_gap(torch.zeros(2), torch.zeros(2)) == 0.0


def test_paper_adam_recursion_by_hand_and_as_an_optimiser():
    g0, g1 = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([1.0, 0.0, 3.0])
    m = paper_adam_init(g0)
    assert torch.equal(paper_adam_direction(m), torch.tensor([1.0, 0.0, -1.0]))   # D_0 = |g_0|; 0/0 -> 0
    m = paper_adam_update(m, g1, (0.5, 0.5))
    # m_1 = (1.5, 0, 1), D_1^2 = (2.5, 0, 5)
    assert torch.allclose(paper_adam_direction(m), torch.tensor([1.5 / 2.5 ** 0.5, 0.0, 1 / 5 ** 0.5]))

    w = torch.nn.Parameter(torch.zeros(3))
    optimizer = PaperAdam([w], lr=0.1, betas=(0.5, 0.5))
    for g in (g0, g1):
        w.grad = g.clone()
        optimizer.step()
    assert torch.allclose(w.detach(), -0.1 * (torch.tensor([1.0, 0.0, -1.0]) + paper_adam_direction(m)))


@pytest.mark.slow
def test_cli_runs_every_check_writes_the_run_and_prints_json(tmp_path):
    result = runner.invoke(app, ["theory", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    metrics = record["metrics"]
    assert metrics["all_matched"] and metrics["total"] == len(CHECKS) == metrics["matched"]
    assert [c["name"] for c in metrics["checks"]] == list(CHECKS)
    assert all({"claim", "measured", "tolerance", "expected", "observed", "matched"} <= set(c) for c in metrics["checks"])
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "metrics.json", "run.log", "example1_adam_rotation.png"} <= files
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["matched"] == len(CHECKS)
    assert metrics["seconds"] > 0


def test_cli_table_and_only(tmp_path):
    result = runner.invoke(app, ["theory", "--only", "lemma1-sgd", "--only", "remark4-adam-dense",
                                 "--dtype", "float32", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "lemma1-sgd" in result.stdout and "remark4-adam-dense" in result.stdout and "lemma3" not in result.stdout
    assert "2/2 checks matched" in result.stdout


def test_cli_exits_1_when_a_check_does_not_match(tmp_path, monkeypatch):
    monkeypatch.setitem(suite.CHECKS, "lemma1-sgd", functools.partial(lemma1_sgd, transform="gaussian"))
    result = runner.invoke(app, ["theory", "--only", "lemma1-sgd", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["metrics"]["checks"][0]["matched"] is False


@pytest.mark.parametrize("args,message", [
    (["--only", "nonsense"], "unknown check 'nonsense'; choose from: lemma1-sgd"),
    (["--dtype", "float16"], "unknown dtype 'float16'"),
])
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message):
    result = runner.invoke(app, ["theory", *args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()

"""Reconstruction-error bounds (seed paper 003): constants, FedAvg rate, Lipschitz machinery, attacks, CLI."""
from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from theory_checks.bounds.attacks import AttackSettings, attack
from theory_checks.bounds.constants import heterogeneity
from theory_checks.bounds.experiment import BoundsConfig, convergence, curvature, fl_setting, kendall_tau
from theory_checks.bounds.fedavg import schedule_gamma, split_evenly, step_sizes
from theory_checks.bounds.lipschitz import Node, autolip, chain, power_iteration, spectral_norm
from theory_checks.bounds.logreg import LogReg, load_digits, newton
from theory_checks.bounds.surrogate import checkpoints, fit, ridge_fit
from theory_checks.suite import CHECKS, one_intra_op_thread, run_checks

runner = CliRunner()
SMALL = BoundsConfig(devices=5, rounds=20, seeds=4, participation=3, sensitivity=False, trends=False)


@pytest.fixture(autouse=True)
def _one_thread():
    with one_intra_op_thread():
        yield


@pytest.fixture(scope="module")
def small():
    with one_intra_op_thread():
        return fl_setting(SMALL)


def gaussian(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- the model ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, digits", [("binary", (0, 1)), ("softmax", (0, 1, 2))])
def test_analytic_hessian_and_sample_gradients_match_autograd(kind, digits):
    data = load_digits(digits)
    model = LogReg(kind, data.dim, classes=len(digits))
    w = 0.3 * gaussian(model.params)
    x, y = data.flat[:50], data.labels[:50]
    reference = torch.autograd.functional.hessian(lambda v: model.loss(v, x, y), w)
    assert torch.allclose(model.hessian(w, x), reference, atol=1e-12)
    per_sample = torch.stack([torch.autograd.functional.jacobian(lambda v: model.loss(v, x[i:i + 1], y[i:i + 1]), w)
                              for i in range(5)])
    assert torch.allclose(model.sample_grads(w, x[:5], y[:5]), per_sample, atol=1e-12)


def test_binary_model_is_the_papers_logistic_loss():
    data = load_digits((0, 1))
    model = LogReg("binary", data.dim)
    w, x, c = 0.2 * gaussian(64), data.flat[:30], data.labels[:30]
    y = 2.0 * c - 1.0                                            # class 1 <-> y = +1
    paper = torch.log1p(torch.exp(-y * (x @ w))).mean() + 0.1 * w.square().sum()
    assert torch.allclose(model.loss(w, x, c), paper, atol=1e-14)


def test_newton_reaches_the_minimum():
    data = load_digits((0, 1))
    model = LogReg("binary", data.dim)
    w = newton(model, data.flat, data.labels)
    assert float(model.gradient(w, data.flat, data.labels).norm()) <= 1e-10


# --- constants and FedAvg -------------------------------------------------------------------------------------

def test_paper_L_and_mu_bound_the_hessian_at_random_w_and_along_the_trajectory(small):
    eig = curvature(small)
    for where in ("random", "trajectory"):
        assert eig[where]["lambda_max"] <= small.L
        assert eig[where]["lambda_min"] >= small.mu
    assert eig["trajectory"]["lambda_min"] == pytest.approx(2 * 0.1, rel=1e-9)   # the true mu is 2 lam
    assert eig["trajectory"]["lambda_max"] > small.L / 2                         # L is loose, not wildly so


@pytest.mark.parametrize("rule", ["theorem", "proof"])
def test_step_size_conditions(small, rule):
    E = SMALL.local_steps
    gamma = schedule_gamma(small.L, small.mu, E, rule)
    eta = step_sizes(small.mu, gamma, 400)
    assert eta[0] <= 1 / (4 * small.L)
    assert bool((eta[1:] <= eta[:-1]).all())
    assert bool((eta[:-E] <= 2 * eta[E:]).all())
    too_small = step_sizes(small.mu, 8 * small.L / small.mu - 2, 10)      # gamma below the rule breaks eta_1
    assert too_small[0] > 1 / (4 * small.L)


def test_gamma_is_nonnegative_and_zero_for_one_device():
    data = load_digits((0, 1))
    model = LogReg("binary", data.dim)
    assert heterogeneity(model, split_evenly(data, 1))[0] == pytest.approx(0.0, abs=1e-12)
    for n in (2, 5, 10):
        assert heterogeneity(model, split_evenly(data, n))[0] >= 0.0


def test_full_participation_averages_every_E_steps(small):
    local, glob = small.full.local_w, small.full.global_w
    E = SMALL.local_steps
    starts = local[:, ::E]                                       # (S, rounds, N, p): each round starts shared
    assert torch.allclose(starts, starts[:, :, :1].expand_as(starts), atol=0)
    assert torch.allclose(glob[:, E:-1:E], starts[:, 1:, 0], atol=1e-15)   # w_{rE+1} starts round r + 1


def test_mean_distance_to_w_star_is_below_v_over_gamma_plus_t_full_and_partial(small):
    for trajectory, c in ((small.full, small.full_constants), (small.partial, small.partial_constants)):
        result = convergence(trajectory, c)
        assert result["holds"] and result["min_slack"] > 0
        assert result["last"]["mean_dist"] < result["first"]["mean_dist"]      # FedAvg does approach w*
    assert small.partial_constants.C > 0 and small.full_constants.C == 0
    assert small.partial_constants.v > small.full_constants.v


def test_bound_algebra(small):
    c = small.full_constants
    assert c.v_max <= c.v
    assert c.phi(1) == pytest.approx(2 * (4 * c.B / c.mu ** 2 + (c.gamma + 1) * c.delta1) / (c.gamma + 1))
    assert c.bound(0.5, 2.0, 7) == pytest.approx(1.0 + 4.0 * c.phi(7))
    assert c.phi(100) < c.phi(1)


# --- Lipschitz machinery --------------------------------------------------------------------------------------

def test_power_iteration_within_1e4_of_svd_and_never_above():
    for k, (r, c) in enumerate([(64, 128), (20, 20), (5, 80)]):
        m = gaussian(r, c, seed=k)
        exact = float(torch.linalg.svdvals(m)[0])
        estimate = power_iteration(lambda v, m=m: m @ v - 3.0, c, seed=k)
        assert abs(estimate - exact) <= 1e-4 * exact and estimate <= exact * (1 + 1e-12)
        assert spectral_norm(m, "power") == pytest.approx(exact, rel=1e-4)


def test_autolip_is_the_product_of_norms_on_an_mlp_and_bounds_its_ratios():
    matrices = [gaussian(30, 20, seed=1), gaussian(25, 30, seed=2), gaussian(4, 25, seed=3)]
    L = autolip(chain(matrices), {"input": 1.0}, {"input": 20})["layer3"]
    assert L == pytest.approx(math.prod(float(torch.linalg.svdvals(m)[0]) for m in matrices), rel=1e-12)

    def net(x):
        for m in matrices:
            x = torch.relu(x @ m.T)
        return x
    a, b = gaussian(500, 20, seed=4), gaussian(500, 20, seed=5)
    assert float(((net(a) - net(b)).norm(dim=1) / (a - b).norm(dim=1)).max()) <= L


def test_autolip_sums_over_predecessors_on_a_residual_block():
    f = chain([gaussian(8, 8, seed=6), gaussian(8, 8, seed=7)])
    L_f = autolip(f, {"input": 1.0}, {"input": 8})["layer2"]
    block = f + [Node("out", ("input", "layer2"), affine=lambda x, fx: x + fx)]
    assert autolip(block, {"input": 1.0}, {"input": 8})["out"] == pytest.approx(1 + L_f, rel=1e-12)
    constant = autolip(block, {"input": 0.0}, {"input": 8})["out"]                  # a constant input: L = 0
    assert constant == 0.0


def test_surrogate_layers_fit_by_ridge_least_squares_and_its_lipschitz_bound_holds():
    a, m_true = gaussian(400, 6, seed=8), gaussian(3, 6, seed=9)
    y = a @ m_true.T + 0.5
    m, b = ridge_fit(a, y, 0.0)
    assert torch.allclose(m, m_true, atol=1e-10)
    assert torch.allclose(b, torch.full((3,), 0.5, dtype=torch.float64), atol=1e-10)
    shrunk, _ = ridge_fit(a, y, 1.0)
    assert shrunk.norm() < m.norm()                                   # the ridge shrinks the layer
    targets = torch.sigmoid(gaussian(3, 400, 5, seed=10))
    z = torch.cat([gaussian(400, 4, seed=11), torch.rand(400, 5, generator=torch.Generator().manual_seed(12),
                                                         dtype=torch.float64)], 1)
    net = fit(z, targets, (("w", 4), ("x0", 5)), ridge=1e-3)
    lip = net.lipschitz()
    za, zb = gaussian(1000, 9, seed=13), gaussian(1000, 9, seed=14)
    assert float(((net(za) - net(zb)).norm(dim=1) / (za - zb).norm(dim=1)).max()) <= lip["full"]
    zb[:, 4:] = za[:, 4:]                                             # same x'_0: only w moves
    assert float(((net(za) - net(zb)).norm(dim=1) / (za - zb).norm(dim=1)).max()) <= lip["w"] <= lip["full"]
    assert checkpoints(200, 20)[:2] == (10, 20) and checkpoints(200, 20)[-1] == 200


def test_kendall_tau():
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)


# --- attacks --------------------------------------------------------------------------------------------------

def test_attacks_run_through_the_engine_and_idlg_labels_are_exact(small):
    x, y = small.fed.all_x[:6].view(6, 1, 8, 8), small.fed.all_y[:6]
    weights = torch.stack([small.full.after_round(1)[0], small.full_constants.w_star])
    settings = AttackSettings(steps=60)
    runs = {name: attack(name, small.model, weights, x, y, inits=3, settings=settings, record=(30, 60))
            for name in ("dlg", "idlg", "invgrad", "ggl")}
    for name, run in runs.items():
        assert run.final.shape == (2, 6, 3, 64) and run.iterates.shape == (2, 2, 6, 3, 64)
        assert float(run.final.min()) >= 0.0 and float(run.final.max()) <= 1.0        # Clip(0, 1)
        assert torch.equal(run.iterates[-1], run.final)                                # snapshot at I is x'_I
        assert run.seconds > 0
    assert runs["idlg"].label_accuracy == 1.0 and runs["ggl"].label_accuracy == 1.0
    assert float(runs["idlg"].errors[0].mean()) < 0.05                                 # near-exact at round 1
    assert float(runs["idlg"].errors.mean()) < float(runs["dlg"].errors.mean())


def test_bound_checks_are_registered_and_match():
    names = [n for n in CHECKS if n.startswith("bounds-")]
    assert len(names) == 8
    suite = run_checks(names)
    assert suite.all_matched, [(r.name, r.measured) for r in suite.results if not r.matched]


# --- CLI ------------------------------------------------------------------------------------------------------

TINY = ["bounds", "--rounds", "5", "--devices", "5", "--seeds", "2", "--samples", "3", "--inits", "2",
        "--attack-steps", "20", "--layers", "5", "--no-sensitivity"]


def test_cli_bounds_writes_metrics_and_figure_and_prints_json(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, TINY + ["--trends", "--surrogate-input", "w,g,x0", "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert {p.name for p in out.iterdir()} >= {"config.json", "metrics.json", "run.log", "bounds.png"}
    assert json.loads((out / "metrics.json").read_text())["rows"] == metrics["rows"]
    assert len(metrics["rows"]) == 4 * 3                                  # 4 attacks x rounds 1, 2, 5
    for row in metrics["rows"]:
        assert row["mean"] <= row["bound"] and row["best"] <= row["mean"]
        assert row["bound/d"] == pytest.approx(row["bound"] / 64)
    assert metrics["config"]["surrogate_input"] == "w,g,x0"
    assert set(metrics["trends"]) == {"E", "N", "T"}
    assert (out / "trends.png").stat().st_size > 10_000
    assert all("tau_mean" in o and "by_bound" in o for o in metrics["orderings"])


def test_cli_bounds_table(tmp_path):
    result = runner.invoke(app, TINY + ["--no-trends", "--attacks", "idlg,dlg", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "Theorem 1 bound" in result.stdout and "iDLG < DLG by bound" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--ridge", "-1"], "--ridge"), (["--ridge", "nan"], "--ridge"), (["--layers", "30"], "--layers"),
    (["--surrogate-input", "w"], "--surrogate-input"), (["--attacks", "dlg,foo"], "--attacks"),
    (["--init-std", "0"], "--init-std"), (["--lr", "inf"], "--lr"), (["--digits", "0,1,2"], "--digits"),
    (["--samples", "400"], "--samples"), (["--digits", "0,12"], "digits"),
])
def test_cli_bounds_refuses_bad_input_before_the_run_directory(tmp_path, args, message):
    out = tmp_path / "run"
    result = runner.invoke(app, TINY + args + ["--out", str(out)])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()

"""The bounds of "Theoretically Understanding Data Reconstruction Leakage in FL": constants, rate, Lipschitz, CLI."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from splitlab.sweep_report import flatten
from theory_checks.bounds.attacks import AttackRun, AttackSettings, attack, matched
from theory_checks.bounds.constants import heterogeneity
from theory_checks.bounds.experiment import (BoundsConfig, convergence, curvature, eval_rounds, fit_pairs, fl_setting,
                                             kendall_tau, lipschitz_step, measure, monotone, ordering_flags,
                                             surrogate_fit)
from theory_checks.bounds.figures import batch_figure, trends_figure
from theory_checks.bounds.fedavg import schedule_gamma, split_evenly, step_sizes
from theory_checks.bounds.lipschitz import Node, autolip, chain, power_iteration, spectral_norm
from theory_checks.bounds.logreg import LogReg, load_digits, newton
from theory_checks.bounds.surrogate import checkpoints, fit, ridge_fit, surrogate_input
from theory_checks.suite import CHECKS, one_intra_op_thread, run_checks
from vfl.errors import SplitlabError
from vfl.options import flag_of, options_of

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


@pytest.mark.slow
def test_bound_checks_are_registered_and_match():
    names = [n for n in CHECKS if n.startswith("bounds-")]
    assert len(names) == 8
    suite = run_checks(names)
    assert suite.all_matched, [(r.name, r.measured) for r in suite.results if not r.matched]


# --- CLI ------------------------------------------------------------------------------------------------------

TINY = ["bounds", "--rounds", "5", "--devices", "5", "--seeds", "2", "--samples", "3", "--inits", "2",
        "--attack-steps", "20", "--layers", "5", "--no-sensitivity"]


@pytest.mark.slow
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


# --- the surrogate as the paper fits it: 1,000 pairs, no ridge ------------------------------------------------------

def test_the_default_fit_is_1000_pairs_by_plain_least_squares():
    config = BoundsConfig()
    assert config.ridge == 0.0 and config.fit_pairs == 1000
    trials = (len(eval_rounds(config.rounds)) + 1) * config.batches * config.inits     # 8 models x 100 x 10
    chosen = fit_pairs(trials, config.fit_pairs, config.seed)
    assert trials == 8000 and len(chosen) == 1000 == len(set(chosen.tolist()))
    assert bool((chosen[1:] > chosen[:-1]).all()) and int(chosen.max()) < trials
    assert fit_pairs(trials, 0, 0) is None and fit_pairs(500, 1000, 0) is None          # every trial
    assert not torch.equal(chosen, fit_pairs(trials, 1000, 1))                          # the seed draws them


def _fake_run(P=3, M=4, R=5, d=64, steps=(5, 10), seed=0) -> AttackRun:
    iterates = torch.rand(len(steps), P, M, R, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    start = torch.randn(M, R, d, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    return AttackRun("dlg", steps, iterates, iterates[-1], start, torch.zeros(P, M, R), None, 0.0)


def test_the_lipschitz_step_takes_a_vacuous_l_r_past_the_float_range():
    """A softmax surrogate's L_R reached 1e160 (8 classes): L_R ** 2 raised OverflowError mid-run."""
    run, weights = _fake_run(P=3), gaussian(3, 64, seed=20)
    huge = lipschitz_step(run, weights, 1e200)
    assert huge == {"pass_rate": 1.0, "worst_ratio": 0.0}
    small = lipschitz_step(run, weights, 1e-6)
    assert small["pass_rate"] == 0.0 and small["worst_ratio"] > 1


def test_the_surrogate_is_fitted_on_the_chosen_pairs_only_and_scored_on_the_rest():
    run, weights = _fake_run(), gaussian(3, 64, seed=20)
    grads = gaussian(3, 4, 64, seed=21)
    pairs = fit_pairs(60, 40, 0)
    got = surrogate_fit(run, weights, grads, kind="w,x0", ridge=0.0, layers=2, feed="fitted", steps=10, L_g=1.0,
                        pairs=pairs)
    z0, blocks = surrogate_input("w,x0", weights, grads, run.start)
    targets = run.iterates.flatten(1, 3)
    net = fit(z0[pairs], targets[:, pairs], blocks, ridge=0.0)
    error = (net(z0) - targets[-1]).square().sum(-1)
    rest = torch.ones(60, dtype=torch.bool)
    rest[pairs] = False
    assert got["fit_pairs"] == 40 and got["full"] == pytest.approx(net.lipschitz(L_g=1.0)["full"], rel=1e-12)
    assert got["fit_mse"] == pytest.approx(float(error[pairs].mean()), rel=1e-12)
    assert got["fit_mse_heldout"] == pytest.approx(float(error[rest].mean()), rel=1e-12)
    every = surrogate_fit(run, weights, grads, kind="w,x0", ridge=0.0, layers=2, feed="fitted", steps=10, L_g=1.0)
    assert every["fit_pairs"] == 60 and every["fit_mse_heldout"] is None


def test_the_ridge_shrinks_L_R_so_the_unregularised_fit_has_the_larger_constant():
    run, weights, grads = _fake_run(seed=3), gaussian(3, 64, seed=22), gaussian(3, 4, 64, seed=23)
    lip = {r: surrogate_fit(run, weights, grads, kind="w,x0", ridge=r, layers=2, feed="fitted", steps=10,
                            L_g=1.0)["full"] for r in (0.0, 1e-2)}
    assert lip[0.0] > lip[1e-2]


# --- options declared once -------------------------------------------------------------------------------------

OLD_FLAGS = {"--surrogate-input", "--ridge", "--layers", "--rounds", "--devices", "--local-steps", "--seeds",
             "--participation", "--samples", "--inits", "--attack-steps", "--lr", "--ggl-clip", "--attacks",
             "--lipschitz", "--feed", "--gamma-rule", "--mu", "--init-mean", "--init-std", "--model", "--digits",
             "--sensitivity", "--trends", "--seed"}
OPTIONS = [(f.name, flag_of(f, o), o.check.refused) for f, o in options_of(BoundsConfig) if o.check is not None]


def test_the_command_keeps_its_flags_and_adds_fit_pairs_batch_and_dataset():
    flags = {flag_of(f, o) for f, o in options_of(BoundsConfig)}
    assert flags == OLD_FLAGS | {"--fit-pairs", "--batch", "--dataset"}
    result = runner.invoke(app, ["bounds", "--help"])
    assert result.exit_code == 0
    assert all(flag in result.output for flag in flags | {"--no-sensitivity", "--no-trends", "--out", "--json"})


@pytest.mark.parametrize("name, flag, refused", OPTIONS, ids=[o[1] for o in OPTIONS])
def test_every_generated_option_refuses_its_out_of_range_value_in_one_line(tmp_path, name, flag, refused):
    assert refused is not None, f"{flag} declares no refused value"
    with pytest.raises(SplitlabError, match=flag):
        BoundsConfig(**{name: refused})
    out = tmp_path / "run"
    result = runner.invoke(app, ["bounds", flag, str(refused), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert flag in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_cross_field_rules_and_the_old_defaults_through_options(tmp_path):
    old = BoundsConfig(samples=40, ridge=1e-2, fit_pairs=0)
    assert (old.samples, old.ridge, old.fit_pairs, old.digits, old.attacks) == \
        (40, 1e-2, 0, (0, 1), ("dlg", "idlg", "invgrad", "ggl"))
    assert BoundsConfig(digits="0,1,2", model="softmax").digits == (0, 1, 2)
    for bad, flag in (({"batch": 8, "samples": 4}, "--batch"), ({"layers": 30, "attack_steps": 20}, "--layers"),
                      ({"devices": 400}, "--devices"), ({"digits": (0, 1, 2)}, "--digits")):
        with pytest.raises(SplitlabError, match=flag):
            BoundsConfig(**bad)
    with pytest.raises(SplitlabError, match="--samples"):
        dataclasses.replace(BoundsConfig(), samples=361)


# --- batches ----------------------------------------------------------------------------------------------------

def test_matching_finds_the_slot_order_and_scores_per_image():
    truth = torch.rand(2, 3, 64, generator=torch.Generator().manual_seed(5), dtype=torch.float64)   # M = 2, B = 3
    order = torch.tensor([2, 0, 1])
    final = truth[:, order][None, :, None].repeat(1, 1, 2, 1, 1)                                   # P = 1, R = 2
    final[0, 1, 1, 0] += 0.5                                                                         # one slot off
    errors, slots = matched(final, truth)
    assert errors.shape == (1, 2, 2) and slots.shape == (1, 2, 2, 3)
    assert torch.equal(slots[0, 0, 0], order) and float(errors[0, 0].max()) == 0.0
    assert float(errors[0, 1, 1]) == pytest.approx(64 * 0.25 / 3)                                   # per image
    single, _ = matched(final[..., :1, :], truth[:, :1])
    assert torch.allclose(single, (final[..., 0, :] - truth[None, :, None, 0]).square().sum(-1))


def test_batch_attacks_reconstruct_b_images_from_one_averaged_gradient(small):
    x, y = small.fed.all_x[:8].view(4, 2, 1, 8, 8), small.fed.all_y[:8].view(4, 2)
    weights = torch.stack([small.full.after_round(1)[0], small.full_constants.w_star])
    runs = {name: attack(name, small.model, weights, x, y, inits=2, settings=AttackSettings(steps=30), record=(30,))
            for name in ("dlg", "idlg", "ggl")}
    for name, run in runs.items():
        assert run.final.shape == (2, 4, 2, 2 * 64) and run.errors.shape == (2, 4, 2) and run.batch == 2
        assert run.start.shape == (4, 2, 2 * 64) and run.iterates.shape == (1, 2, 4, 2, 2 * 64)
        per_slot = (run.final.unflatten(-1, (2, 64)) - x.flatten(2)[None, :, None]).square().sum(-1).mean(-1)
        assert bool((run.errors <= per_slot + 1e-12).all())                  # matching never does worse
    assert runs["idlg"].labels == "given" and runs["idlg"].label_accuracy is None
    assert runs["dlg"].labels == "optimised" and 0.0 <= runs["dlg"].label_accuracy <= 1.0


@pytest.fixture(scope="module")
def tiny_batch():
    with one_intra_op_thread():
        config = BoundsConfig(batch=2, samples=8, inits=2, attack_steps=20, layers=5, rounds=5, devices=5, seeds=2,
                              ridge=1e-2, sensitivity=False, trends=False)
        return config, measure(config)


def test_the_batch_bound_is_per_image_and_holds_on_a_tiny_setting(tiny_batch):
    config, metrics = tiny_batch
    c = fl_setting(config, partial=False).full_constants
    assert metrics["config"]["batches"] == 4 and metrics["config"]["trials_per_attack"] == 4 * 4 * 2
    for row in metrics["rows"]:
        a = metrics["attacks"][row["attack"]]
        assert row["bound"] == pytest.approx(2 * a["err_w_star"] + a["L_R"] ** 2 / 2 * c.phi(row["round"]), rel=1e-9)
        assert row["best"] <= row["mean"] <= row["bound"]
    assert metrics["all_mean_below_bound"] and "batch labels" in metrics["deviations"]
    assert metrics["attacks"]["idlg"]["labels"] == "given"


def test_batch_figure_draws_bounds_past_the_log_axis_range(tiny_batch):
    _, metrics = tiny_batch
    huge = json.loads(json.dumps(metrics))
    huge["config"]["batch"] = 4
    huge["attacks"]["ggl"]["bound_T"] = 7e300
    fig = batch_figure({2: metrics, 4: huge})
    fig.savefig(__import__("io").BytesIO(), format="png")
    assert len(fig.axes) == 2


# --- orderings and trends as flat keys -------------------------------------------------------------------------

def test_ordering_flags_read_the_papers_claims_at_T():
    rows = [{"attack": n, "round": 100, "bound": b, "mean": m, "best": e} for n, b, m, e in
            (("dlg", 40.0, 6.0, 0.3), ("idlg", 30.0, 0.2, 0.03), ("invgrad", 35.0, 4.0, 3.9), ("ggl", 3.0, 1.8, 0.9))]
    flags = ordering_flags(rows, 100)
    assert flags["bound"]["idlg_below_dlg"] and flags["bound"]["ggl_smallest"] and not flags["bound"]["paper_order"]
    assert flags["bound"]["invgrad_below_dlg"] and not flags["bound"]["invgrad_below_idlg"]
    assert not flags["error"]["ggl_smallest"] and flags["error"]["idlg_below_dlg"]
    assert flags["gap"]["bound_above_mean"] and flags["gap"]["bound_over_best"]["ggl"] == pytest.approx(3 / 0.9)
    assert flags["gap"]["ggl_tightest"] and flags["tau_mean"] == pytest.approx(kendall_tau([40, 30, 35, 3],
                                                                                          [6, 0.2, 4, 1.8]))
    two = ordering_flags(rows[:2], 100)
    assert two["bound"]["ggl_smallest"] is None and two["bound"]["paper_order"] is None
    assert monotone([1, 2, 3], "increasing") and not monotone([1, 3, 2], "increasing")
    assert monotone([3, 2, 1], "decreasing")


def test_trends_and_orderings_are_scalar_keys_for_results_csv_and_draw(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, TINY + ["--trends", "--attacks", "dlg,idlg", "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    flat = flatten(metrics)
    for key in ("trends.E.2.bound_T.dlg", "trends.N.20.phi_T", "trends.T.25.bound_T.idlg", "trends.E.increasing",
                "trends.T.decreasing", "ordering.bound.idlg_below_dlg", "ordering.error.idlg_below_dlg",
                "ordering.mean_error.idlg_below_dlg", "ordering.tau_mean", "attacks.dlg.fit_mse",
                "attacks.dlg.paper_fit_mse", "attacks.dlg.L_R_full", "attacks.dlg.bound_T",
                "attacks.dlg.mean_error_T", "attacks.idlg.fit_pairs", "idlg_below_dlg_by_bound"):
        assert key in flat, key
    assert flat["attacks.dlg.paper_fit_mse"] == 1.22 and flat["ordering.bound.ggl_smallest"] is None
    phi = [metrics["trends"]["E"][str(v)]["phi_T"] for v in metrics["trends"]["E"]["values"]]
    assert metrics["trends"]["E"]["phi_increasing"] == (phi == sorted(phi) and len(set(phi)) == len(phi))
    # every trial is fitted: (rounds 1, 2, 5 and w*) x 3 samples x 2 starts, fewer than 1,000
    assert flat["attacks.idlg.fit_pairs"] == metrics["config"]["fit_pairs_used"] == 4 * 3 * 2
    assert (out / "trends.png").stat().st_size > 10_000
    fig = trends_figure(metrics)
    assert len(fig.axes) == 6                                            # three panels and their Phi axes


def test_the_theory_page_names_every_bounds_option():
    page = (Path(__file__).resolve().parents[1] / "docs" / "theory.md").read_text()
    missing = [flag_of(f, o) for f, o in options_of(BoundsConfig) if f"`{flag_of(f, o)}" not in page]
    assert missing == []


def test_a_sweep_tells_the_default_on_switch_from_a_switch_turned_off(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('command = "bounds"\n[axes]\nno-trends = [true, false]\n')
    result = runner.invoke(app, ["sweep", str(grid), "--dry-run", "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    grid.write_text('command = "bounds"\n[axes]\ntrends = [true, false]\n')
    result = runner.invoke(app, ["sweep", str(grid), "--dry-run", "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "write no-trends = true" in result.output


@pytest.mark.parametrize("name", ["bounds-surrogate", "bounds-trends", "bounds-batch"])
@pytest.mark.parametrize("paper", [False, True])
def test_every_cell_of_the_bounds_sweeps_passes_the_configs_own_rules(name, paper):
    """The sweep's dry run parses each cell; the cross-field rules (samples per device, batch) run only when
    the config is built, so build them all."""
    from splitlab.sweep_file import load_sweep

    cells = load_sweep(paper=name, paper_size=paper).cells()
    for cell in cells:
        given = {("mu_rule" if k == "mu" else k.removeprefix("no-").replace("-", "_")):
                 ((not v) if k.startswith("no-") else v) for k, v in cell.options}
        BoundsConfig(**given)
    assert len(cells) == {("bounds-surrogate", False): 5, ("bounds-surrogate", True): 10,
                          ("bounds-trends", False): 60, ("bounds-trends", True): 120,
                          ("bounds-batch", False): 15, ("bounds-batch", True): 50}[name, paper]


def test_mnist5k_gives_the_papers_image_size_to_the_data_the_targets_and_ggls_decoder():
    from types import SimpleNamespace

    from theory_checks.bounds.attacks import pca_decoder
    from theory_checks.bounds.experiment import targets as attacked

    data = load_digits((0, 1), "mnist5k")
    assert data.images.shape == (800, 1, 28, 28) and data.dim == 784 and float(data.labels.float().mean()) == 0.5
    assert 0.0 <= float(data.images.min()) and float(data.images.max()) <= 1.0
    assert pca_decoder(4, "mnist5k").basis.shape == (4, 784) and pca_decoder(4).basis.shape == (4, 64)
    config = BoundsConfig(dataset="mnist5k", samples=3)
    x, y = attacked(SimpleNamespace(fed=split_evenly(data, config.devices)), config)
    assert x.shape == (3, 1, 28, 28) and y.shape == (3,)
    assert config.attack.dataset == "mnist5k"
    with pytest.raises(SplitlabError, match="--samples"):
        BoundsConfig(dataset="mnist5k", samples=801)

"""AWA and AGIC: interpolation identities, exact replay in the client's order, the dispatcher, layer
groups, ramps and enhancement (the digest's values), EnhancedSquaredL2 under vmap, Bayesian
optimisation, the attacks end to end, and the CLI's checks."""
import dataclasses
import math

import pytest
import torch
from torch.func import vmap
from typer.testing import CliRunner

from attacks.engine import EngineOptions, FedAvgUpdate, LayerGroups, SquaredL2, ramp
from attacks.hfl.agic import AGIC, AGICSettings
from attacks.hfl.agic.attack import agic_weights
from attacks.hfl.awa import AWA, AWASettings
from attacks.hfl.awa.bo import bayes_optimise, best_so_far
from attacks.hfl.awa.diagnostics import _spearman, bo_scores
from attacks.hfl.fedavg import interpolated_path, interpolation_errors, plan_replication
from attacks.hfl.awa.match import EnhancedSquaredL2, enhancement_counts
from attacks.hfl.awa.settings import TABLE_III, UNWEIGHTED
from attacks.hfl.experiment import HFLConfig
from attacks.hfl.observations import observe_fedavg
from attacks.metrics import score
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.models.hfl import build_hfl_model
from splitlab.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def batch():
    data = datasets.load("mnist5k")
    return data.images[:4], data.labels[:4]


def _observe(batch, epochs, local_batch, lr=1e-3, seed=3, arch="convnet"):
    x, y = batch
    model = build_hfl_model(arch, (1, 28, 28), 10, seed=0)
    return observe_fedavg(model, x, y, lr=lr, epochs=epochs, batch_size=local_batch, arch=arch,
                          generator=torch.Generator().manual_seed(seed), reveal_labels=True)


def _rel(a, b):
    num = math.sqrt(sum(float((s - o).double().square().sum()) for s, o in zip(a, b)))
    return num / math.sqrt(sum(float(o.double().square().sum()) for o in b))


# --- interpolation and exact replay -----------------------------------------------------------------

def test_interpolated_path_ends_at_the_client_weights_and_sums_to_the_update(batch):
    obs = _observe(batch, epochs=2, local_batch=2)
    path = interpolated_path(dict(obs.model.params), obs.update, obs.local_epochs)
    final = obs.epoch_params[-1]
    assert all(torch.allclose(path[-1][k], final[k], atol=1e-6, rtol=0) for k in final)   # theta~_E = theta_{t+1}
    steps = [{k: path[e - 1][k] - path[e][k] for k in final} for e in range(1, 3)]
    for k, u in zip(final, obs.update):
        assert torch.allclose(steps[0][k] + steps[1][k], u, atol=1e-6, rtol=0)         # sum_e = the update
        assert torch.allclose(steps[0][k], u / 2, atol=1e-7, rtol=0)                      # each = u / E
    # the true epochs are not equal at a larger local lr, so the interpolation has an error that grows with it
    errors = [interpolation_errors(_observe(batch, 2, 2, lr=lr))["update_error"] for lr in (1e-3, 1e-1)]
    assert 0 < errors[0] < 0.1 and errors[1] > 2 * errors[0]


def test_the_clients_order_reproduces_the_update_and_index_order_does_not(batch):
    x, y = batch
    obs = _observe(batch, epochs=1, local_batch=1, lr=1e-2, seed=5)
    order = torch.randperm(4, generator=torch.Generator().manual_seed(5))      # the client's one shuffle
    assert not torch.equal(order, torch.arange(4))
    context = {"params": dict(obs.model.params), "buffers": dict(obs.model.buffers)}
    replay = FedAvgUpdate(obs.model.network, lr=1e-2, epochs=1, batch_size=1)
    client = replay({"x": x[order]}, {**context, "labels": y[order]})
    index = replay({"x": x}, {**context, "labels": y})
    assert _rel(client, obs.update) < 1e-5
    assert _rel(index, obs.update) > 1e-3
    # through AWA's own problem (scaled by 1 / lr): f at the true batch in the client's order is ~0
    problem = AWA(AWASettings(preset="t")).problem(dataclasses.replace(obs, labels=y[order]))
    f = problem.mismatch(x[order][None], torch.zeros(1, dtype=torch.bool))
    assert float(f) / sum(float(o.square().sum()) for o in problem.observed) < 1e-10


def test_the_dispatcher_replays_exactly_where_it_can_and_interpolates_otherwise():
    cases = {(1, 4): "exact", (4, 4): "exact", (1, 1): "exact", (2, 2): "interpolation"}     # (E, M), N = 4
    for (epochs, m), method in cases.items():
        assert plan_replication(epochs, 4, m).method == method
    plan = plan_replication(3, 4, 2, target_epoch=2)
    assert (plan.epochs, plan.start_fraction, plan.divisor) == (1, 1 / 3, 3)
    assert plan_replication(1, 4, 1, "interpolate").method == "interpolation"
    with pytest.raises(ValueError, match="no exact replication"):
        plan_replication(2, 4, 2, "exact")


# --- layer groups, ramps, enhancement ---------------------------------------------------------------

def test_ramps_and_enhancement_counts_match_the_digest():
    q = ramp(TABLE_III[1][0], 20)                                  # case-1 q_cv over L_cv = 20
    assert q[0] == 1 and q[9] == pytest.approx(246.46, abs=0.01) and q[19] == pytest.approx(519.19)
    assert ramp(42.83, 1) == [42.83]                               # one FC layer: q_fc itself
    resnet = build_hfl_model("resnet18", (3, 32, 32), 10)
    groups = LayerGroups.of(resnet)
    assert (groups.layers, groups.count("conv"), groups.count("bn"), groups.count("fc")) == (41, 20, 20, 1)
    assert LayerGroups.of(resnet, "parameter").layers == 62
    expected = {1: (10, 3), 2: (5, 6), 3: (13, 1), 4: (17, 14)}
    for case, counts in expected.items():
        assert enhancement_counts(*TABLE_III[case][4:], 41) == counts


def _toy():
    """Three layers (conv, bn, fc) of one tensor each, with controlled mean / variance errors."""
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1, bias=False), torch.nn.Linear(2, 2, bias=False),
                                torch.nn.BatchNorm1d(2))
    groups = LayerGroups.of(model)
    observed = [torch.ones(2, 1, 1, 1), torch.ones(2, 2), torch.ones(2), torch.ones(2)]
    return groups, observed


def test_enhancement_overrides_the_layers_with_both_errors_large():
    groups, observed = _toy()
    assert groups.kinds == ("conv", "fc", "bn") and groups.members == ((0,), (1,), (2, 3))
    # layer 0: mean and variance both off; layer 1: only the mean off; layer 2: exact
    simulated = [torch.tensor([1.0, 5.0]).view(2, 1, 1, 1), torch.full((2, 2), 3.0), torch.ones(2), torch.ones(2)]
    match = EnhancedSquaredL2(groups)
    q = torch.tensor([5.0, 7.0, 9.0, 100.0, 2 / 3, 1 / 3])       # top-2 by mean, top-1 by variance
    assert match.weights(simulated, match.target(observed, q)).tolist() == [100.0, 9.0, 7.0]
    q0 = torch.tensor([5.0, 7.0, 9.0, 100.0, 0.0, 0.0])          # p = 0: nothing enhanced, ramps only
    assert match.weights(simulated, match.target(observed, q0)).tolist() == [5.0, 9.0, 7.0]
    errors = [float((s - o).square().sum()) for s, o in zip(simulated, observed)]
    assert float(match(simulated, match.target(observed, q))) == pytest.approx(100 * errors[0] + 9 * errors[1])


def test_every_q_one_is_squared_l2_and_q_values_batch_under_vmap(batch):
    obs = _observe(batch, epochs=2, local_batch=2)
    groups = LayerGroups.of(obs.model.network)
    observed = list(obs.update)
    simulated = [u * (1 + 0.3 * torch.randn_like(u)) for u in observed]
    match = EnhancedSquaredL2(groups)
    for p in (0.0, 0.3, 0.5):
        ones = torch.tensor([1.0, 1.0, 1.0, 1.0, p, p])
        assert float(match(simulated, match.target(observed, ones))) == pytest.approx(
            float(SquaredL2()(simulated, observed)), rel=1e-6)
    qs = torch.tensor([TABLE_III[c] for c in (1, 2, 3, 4)])
    batched = vmap(lambda q: match(simulated, match.target(observed, q)))(qs)
    one_by_one = torch.stack([match(simulated, match.target(observed, q)) for q in qs])
    assert torch.allclose(batched, one_by_one, rtol=1e-6)
    assert len(set(batched.tolist())) == 4


# --- Bayesian optimisation --------------------------------------------------------------------------

def test_bo_best_so_far_never_rises_and_the_first_trials_are_random():
    target = torch.tensor([300.0, 0.2])

    def f(qs):
        return ((qs - target) / torch.tensor([1000.0, 0.5])).square().sum(1)

    trace = bayes_optimise(f, trials=9, random=4, box=((1, 1000), (0, 0.5)), names=("a", "b"), seed=0)
    curve = best_so_far(trace.values)
    assert len(trace.values) == 9 and trace.random == [True] * 4 + [False] * 5 and trace.batches == [4] + [1] * 5
    assert all(b <= a for a, b in zip(curve, curve[1:]))
    assert curve[-1] == min(trace.values) == trace.values[trace.best_index]
    assert all(1 <= a <= 1000 and 0 <= b <= 0.5 for a, b in trace.params)
    assert best_so_far([3.0, float("inf"), 2.0, 5.0]) == [3.0, 3.0, 2.0, 2.0]


def test_spearman_gives_tied_values_their_mean_rank():
    assert _spearman([1.0, 2.0, 3.0], [10.0, 30.0, 20.0]) == pytest.approx(0.5)
    # ranks (0.5, 0.5, 2) against (0, 1, 2): 0.866; distinct ranks for the tie would give 0.5 or 1
    assert _spearman([1.0, 1.0, 2.0], [0.0, 1.0, 2.0]) == pytest.approx(math.sqrt(3) / 2)
    assert _spearman([1.0, 1.0, 1.0], [0.0, 1.0, 2.0]) is None                    # no spread: undefined


# --- the attacks end to end -------------------------------------------------------------------------

def test_awa_with_bo_keeps_every_trial_and_the_rerun(batch):
    x, y = batch
    obs = _observe(batch, epochs=2, local_batch=2)
    rec = AWA(AWASettings(preset="t", iterations=4, bo_trials=3, bo_random=2))(obs, seed=0)
    bo = rec.extras["bo"]
    assert rec.trials.shape == (4, 4, 1, 28, 28) and bo["rerun_trial"] == 3 and rec.extras["replication"] == "interpolation"
    assert rec.best_trial in (bo["best_trial"], 3)                 # the lower-f of the best trial and the re-run
    assert rec.history["match"].shape == (4, 4)
    assert torch.equal(rec.initial[0], rec.initial[2]) and not torch.equal(rec.initial[0], rec.initial[3])
    assert float(rec.initial.min()) >= 0 and float(rec.initial.max()) <= 1        # x ~ U(0, 1)
    metrics = score(rec, x, y)
    scores = bo_scores(bo, metrics["per_trial"])
    assert scores["rerun_psnr"] == metrics["per_trial"][3]["psnr"]


@pytest.mark.slow
def test_awa_reconstructs_and_never_reads_the_true_epoch_weights(batch):
    x, y = batch
    obs = _observe(batch, epochs=2, local_batch=2)
    attack = AWA(AWASettings(preset="t", iterations=60))
    rec = attack(obs, seed=0)
    garbage = tuple({k: torch.full_like(v, float("nan")) for k, v in p.items()} for p in obs.epoch_params)
    again = attack(dataclasses.replace(obs, epoch_params=garbage), seed=0)
    assert torch.equal(rec.trials, again.trials)
    m = score(rec, x, y)
    assert m["psnr"] > m["baselines"]["initial"]["psnr"] + 3
    unweighted = AWA(AWASettings(preset="u", iterations=60, q=UNWEIGHTED))(obs, seed=0)
    assert not torch.equal(unweighted.trials, rec.trials)


def test_agic_weights_rise_over_conv_and_fc_and_it_runs_every_case(batch):
    obs = _observe(batch, epochs=2, local_batch=2)
    groups = LayerGroups.of(obs.model.network)
    w = agic_weights(groups)
    ramped = [w[m[0]] for m, k in zip(groups.members, groups.kinds) if k != "bn"]
    assert ramped == [1.0, 2.0, 3.0, 4.0, 5.0]                     # 4 convs and the FC of the ConvNet
    assert all(w[i] == 1.0 for m, k in zip(groups.members, groups.kinds) if k == "bn" for i in m)
    rec = AGIC(AGICSettings(preset="a", iterations=5))(obs, seed=0)
    assert rec.trials.shape == (1, 4, 1, 28, 28) and rec.label_rule == "known"


@pytest.mark.parametrize("mode", ["batched", "sequential"])
def test_the_trajectory_ends_at_each_trials_last_iterate_in_either_mode(batch, mode):
    from attacks.driver import Truth
    from attacks.hfl.trajectory import evaluation
    x, y = batch
    obs = _observe(batch, epochs=2, local_batch=2)
    attack = AWA(AWASettings(preset="t", iterations=7, restarts=2, answer="final", trajectory=3))
    rec = attack(obs, seed=0, engine=EngineOptions(mode=mode))
    record = rec.artefacts["trajectory"]
    assert record["iterations"] == [3, 6, 7] and record["images"].shape == (2, 3, 4, 1, 28, 28)
    assert torch.equal(record["images"][:, -1], rec.trials)                 # answer "final": the last iterate
    assert not torch.equal(record["images"][:, 0], record["images"][:, 1])
    curve = evaluation(rec, {}, Truth(x, y))["trajectory"]
    assert curve["trial"] == rec.best_trial and curve["ssim"][-1] == score(rec, x, y)["ssim"]
    assert curve["ssim_global"][-1] == score(rec, x, y)["ssim_global"] and len(curve["ssim_global"]) == 3


def test_recording_a_trajectory_changes_no_number(batch):
    obs = _observe(batch, epochs=1, local_batch=4)
    plain = AGIC(AGICSettings(preset="a", iterations=6))(obs, seed=0)
    recorded = AGIC(AGICSettings(preset="a", iterations=6, trajectory=2))(obs, seed=0)
    assert torch.equal(plain.trials, recorded.trials) and "trajectory" not in plain.artefacts
    assert recorded.artefacts["trajectory"]["iterations"] == [2, 4, 6]


# --- CLI --------------------------------------------------------------------------------------------

def test_cli_checks_for_the_fedavg_attacks(tmp_path):
    base = dict(attack="awa", arch="convnet", observe="fedavg", batch_size=4, labels="known")
    HFLConfig.of(**base, bo_trials=4, bo_random=2)
    with pytest.raises(SplitlabError, match="BO random trials 5 exceed its 4 trials"):
        HFLConfig.of(**base, bo_trials=4, bo_random=5)
    with pytest.raises(SplitlabError, match="unknown option 'bo_trials' for agic"):       # AWA's option only
        HFLConfig.of(**{**base, "attack": "agic"}, bo_trials=4)
    with pytest.raises(SplitlabError, match="give --bo-trials too"):
        HFLConfig.of(**base, bo_random=3)
    with pytest.raises(SplitlabError, match="the BO trials are the restarts"):
        HFLConfig.of(**base, bo_trials=4, bo_random=2, restarts=2)
    with pytest.raises(SplitlabError, match="--labels known does not apply to dlg"):
        HFLConfig.of(**{**base, "attack": "dlg", "observe": "fedsgd"})
    args = ["hfl", "--attack", "awa", "--preset", "awa.dlg", "--arch", "convnet", "--observe", "fedavg",
            "--batch-size", "4", "--local-epochs", "2", "--local-batch-size", "2", "--labels", "known",
            "--out", str(tmp_path / "dlg")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and "no exact replication" in result.output
    assert not (tmp_path / "dlg").exists()

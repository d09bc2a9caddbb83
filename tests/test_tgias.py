"""TGIAs-RO: data-space aggregators on synthetic points, the engine's consensus between rounds, the temporal
simulator, the FL trace and its invalid gradients, label optimisation, alignment, T = 1 == iDLG, the CLI."""
import json
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from attacks.engine import LBFGS, Block, Consensus, EngineOptions, Objective, Schedule, SquaredL2, run
from attacks import registry
from attacks.hfl.dlg import DLG
from attacks.hfl.experiment import HFLConfig
from attacks.hfl.observations import RoundLog, observe_fedsgd
from attacks.hfl.tgias import TGIAsRO, TGIAsSettings
from attacks.hfl.tgias.aggregators import aggregator, krum, median, trimmed_mean
from attacks.hfl.tgias.aggregators import mean as mean_of
from attacks.hfl.tgias.attack import _agree, layer_ramp, start_images
from attacks.hfl.tgias.label_optimisation import optimise_labels
from attacks.hfl.tgias.temporal import TemporalFedSGDGradient, TemporalSquaredL2
from attacks.hfl.tgias.trace import align, alignment_accuracy, rand_index, client_data, converged_model, observe_trace
from vfl.cli_options import values
from vfl.errors import SplitlabError
from vfl.models.hfl import build_hfl_model
from splitlab.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")


def preset(name):
    return registry.preset(name).settings()


# --- aggregators -------------------------------------------------------------------------------------

def _inliers_and_outliers(m, t=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    centre = torch.randn(3, 4, generator=g)
    points = centre + 0.01 * torch.randn(t, 3, 4, generator=g)
    points[:m] = 1e6 * torch.randn(m, 3, 4, generator=g)
    return centre, points


@pytest.mark.parametrize("m", [0, 1, 2, 3, 4])
def test_the_median_ignores_fewer_than_half_outliers(m):
    centre, points = _inliers_and_outliers(m)
    inliers = points[m:]
    out = median(points)
    assert bool(((out >= inliers.min(0).values) & (out <= inliers.max(0).values)).all())
    assert (out - centre).abs().max() < 0.1
    assert (points.mean(0) - centre).abs().max() > 1e3 if m else True


def test_the_median_breaks_down_at_half_outliers():
    centre, points = _inliers_and_outliers(5)
    assert (median(points) - centre).abs().max() > 1e3


def test_krum_returns_one_of_its_inputs_and_an_inlier():
    _, points = _inliers_and_outliers(3)
    out = krum(points, f=3)
    assert any(torch.equal(out, p) for p in points[3:])
    assert torch.equal(krum(points[:1], f=3), points[0])


def test_the_trimmed_mean_with_beta_zero_is_the_mean_and_trims_outliers():
    _, points = _inliers_and_outliers(3)
    assert torch.equal(trimmed_mean(points, 0.0), points.mean(0))
    centre, points = _inliers_and_outliers(2)
    assert (trimmed_mean(points, 0.3) - centre).abs().max() < 0.1
    with pytest.raises(ValueError):
        aggregator("geomedian")


# --- engine: consensus between rounds, the temporal simulator ----------------------------------------

def test_a_consensus_overwrites_every_trial_and_can_reset_the_optimiser():
    target = {"observed": [torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])], "context": {}}
    objective = Objective(lambda v, c: [v["x"]], SquaredL2())
    start = {"x": torch.zeros(3, 2)}
    mean = Consensus(("x",), lambda v, alive: {"x": v["x"].mean(0).expand_as(v["x"])}, reset=True)
    result = run(objective, start, target, Schedule((Block(("x",), LBFGS(), 1),), rounds=3, consensus=mean),
                 per_trial_target=True)
    final = result.final["x"]
    assert torch.equal(final[0], final[1]) and torch.equal(final[1], final[2])
    torch.testing.assert_close(final[0], torch.tensor([3.0, 4.0]))     # the consensus of three exact solves
    with pytest.raises(ValueError, match="batched"):
        run(objective, start, target, Schedule((Block(("x",), LBFGS(), 1),), consensus=mean),
            EngineOptions(mode="sequential"), per_trial_target=True)


def test_reset_rebuilds_the_optimiser_and_a_diverged_trial_does_not_vote():
    # an ill-conditioned quadratic that two L-BFGS iterations per round do not solve: carried curvature differs
    scale = torch.tensor([1.0, 30.0])
    target = {"observed": [torch.tensor([[1.0, 2.0], [3.0, 4.0]])], "context": {}}
    objective = Objective(lambda v, c: [v["x"] * scale], SquaredL2())
    seen = []

    def mean(v, alive):
        seen.append(alive.tolist())
        return {"x": v["x"][alive].mean(0).expand_as(v["x"])}

    finals = {}
    for reset in (True, False):
        schedule = Schedule((Block(("x",), LBFGS(max_iter=2), 1),), rounds=3, consensus=Consensus(("x",), mean, reset))
        finals[reset] = run(objective, {"x": torch.zeros(2, 2)}, target, schedule, per_trial_target=True).final["x"]
    assert not torch.allclose(finals[True], finals[False])
    nan_target = {"observed": [torch.tensor([[1.0, 2.0], [float("nan"), 4.0]])], "context": {}}
    seen.clear()
    result = run(objective, {"x": torch.zeros(2, 2)}, nan_target,
                 Schedule((Block(("x",), LBFGS(max_iter=2), 1),), rounds=2, consensus=Consensus(("x",), mean)),
                 per_trial_target=True)
    assert seen[0] == [True, False]                      # the diverged copy is offered as not alive
    assert torch.isfinite(result.final["x"]).all()       # and the agreed point comes from the live one
    points = torch.tensor([[0.0], [1.0], [100.0]])
    assert _agree(mean_of, points, torch.tensor([True, True, False])).item() == 0.5


def test_temporal_gradients_vectorised_equal_one_at_a_time(mnist, lenet):
    trace = observe_trace(lenet, mnist, batch_size=2, temporal=3, arch="lenet")
    params = {k: torch.stack([u.model.params[k] for u in trace.log.rounds]) for k in trace.log.model.param_names}
    x = torch.randn(2, 1, 28, 28, requires_grad=True)
    context = {"params": params, "buffers": {}, "labels": mnist.labels[:2]}
    together = TemporalFedSGDGradient(lenet)({"x": x}, context)
    apart = TemporalFedSGDGradient(lenet, vectorised=False)({"x": x}, context)
    for a, b in zip(together, apart):
        torch.testing.assert_close(a, b)
    observed = [torch.stack(layer) for layer in zip(*(u.gradient for u in trace.log.rounds))]
    match = TemporalSquaredL2([0.2, 0.3, 0.5], layer_ramp(lenet))
    ga, = torch.autograd.grad(match(together, observed), x)
    gb, = torch.autograd.grad(match(apart, observed), x)
    torch.testing.assert_close(ga, gb)
    assert layer_ramp(lenet) == [0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]


# --- the FL trace ------------------------------------------------------------------------------------

def test_more_local_batches_space_the_sightings_further_apart(mnist, lenet):
    near = observe_trace(lenet, mnist, batch_size=2, temporal=3, clients=2, arch="lenet", seed=1)
    far = observe_trace(lenet, mnist, batch_size=2, temporal=3, clients=2, local_batches=8, arch="lenet", seed=1)
    gaps = lambda t: [b - a for a, b in zip(t.log.round_numbers, t.log.round_numbers[1:])]
    assert max(gaps(near)) <= 5 and min(gaps(far)) >= 1 and sum(gaps(far)) > sum(gaps(near))
    assert set(far.client_batches) == set(range(8))       # client 0 walks through all eight of its batches


def test_other_clients_move_the_weights_between_sightings(mnist, lenet):
    trace = observe_trace(lenet, mnist, batch_size=2, temporal=4, clients=4, server_lr=0.1, arch="lenet", seed=1)
    log = trace.log
    assert len(log.rounds) == 4 and list(log.round_numbers) == sorted(set(log.round_numbers))
    assert len(trace.client_log) == len(trace.client_batches) and trace.client_batches.count(0) == 4
    # one sighting per epoch of client 0's three local batches: never more than 5 rounds apart
    assert all(0 < b - a <= 5 for a, b in zip(log.round_numbers, log.round_numbers[1:]))
    for a, b in zip(log.rounds, log.rounds[1:]):
        w_a, w_b = a.model.params["fc.weight"], b.model.params["fc.weight"]
        own_step = w_a - 0.1 * a.named()["fc.weight"] / 4
        assert not torch.allclose(w_b, own_step)        # other batches moved w as well
    x, y = mnist.images[:2], mnist.labels[:2]
    for u in log.rounds:                                  # every upload is the target batch's at its w_t
        again = observe_fedsgd(u.model.network, x, y)
        torch.testing.assert_close(list(again.gradient), list(u.gradient))


@pytest.mark.parametrize("kind", ["other-batch", "noise", "trained"])
def test_invalid_gradients_replace_the_last_m(mnist, lenet, kind):
    trained = build_hfl_model("lenet", seed=5) if kind == "trained" else None
    clean = observe_trace(lenet, mnist, batch_size=2, temporal=4, arch="lenet", seed=2)
    dirty = observe_trace(lenet, mnist, batch_size=2, temporal=4, arch="lenet", seed=2, invalid=2,
                          invalid_kind=kind, trained=trained)
    x, y = mnist.images[:2], mnist.labels[:2]
    for t, u in enumerate(dirty.log.rounds):
        truth = observe_fedsgd(u.model.network, x, y).gradient
        same = all(torch.allclose(a, b) for a, b in zip(truth, u.gradient))
        if kind == "trained" and t >= 2:
            assert same and torch.equal(u.model.params["fc.weight"], trained.fc.weight)
        else:
            assert same == (t < 2)
    torch.testing.assert_close(list(dirty.log.rounds[0].gradient), list(clean.log.rounds[0].gradient))


def test_the_trained_kind_comes_from_a_model_converged_on_the_clients_data(mnist, lenet):
    held = client_data(mnist, clients=2, batch_size=2, index=3)
    assert len(held) == 12 and torch.equal(held.images[:2], mnist.images[3:5])    # target batch first
    before = {k: v.clone() for k, v in lenet.state_dict().items()}
    trained, loss = converged_model(lenet, held, steps=600)
    x, y = held.images[:2], held.labels[:2]
    norm = lambda m: torch.cat([g.flatten() for g in observe_fedsgd(m, x, y).gradient]).norm()
    assert loss < 0.05 and norm(trained) < 0.05 * norm(lenet)      # Prop. 1: next to no information left
    assert all(torch.equal(v, before[k]) for k, v in lenet.state_dict().items())   # a copy was trained


def test_alignment_by_label_multiset_and_cosine(mnist, lenet):
    # a slowly moving model: one batch's gradients stay aligned (cosine > 0.999) while another batch with the same
    # label multiset points elsewhere (cosine 0.98-0.99)
    trace = observe_trace(lenet, mnist, batch_size=4, temporal=3, arch="lenet", reveal_labels=True, server_lr=1e-4)
    clusters = align(trace.client_log, labels=lambda obs: obs.labels, threshold=0.995)
    assert alignment_accuracy(clusters, trace.client_batches) == 1.0
    one_label = align(trace.client_log, labels=lambda obs: torch.zeros(4), threshold=-1.0)
    assert len(set(one_label)) == 1
    assert alignment_accuracy([0, 0, 0, 0], [0, 1, 0, 1]) == 0.5         # one cluster holds one batch's two
    assert rand_index([0, 0, 0, 0], [0, 1, 0, 1]) == pytest.approx(2 / 6)
    assert alignment_accuracy([1, 1, 0, 0], [0, 0, 1, 1]) == 1.0         # cluster names do not matter
    assert alignment_accuracy([0, 1, 2, 3], [0, 0, 0, 0]) == 0.25        # one batch split four ways


@pytest.mark.xfail(strict=False, reason="label optimisation with 10 steps finds [6, 8, 8, 9] for [6, 6, 9, 9] on "
                                        "torch 2.14.1")
def test_label_optimisation_finds_a_batch_of_four(mnist, lenet):
    x, y = mnist.images[8:12], mnist.labels[8:12]
    labels = optimise_labels([observe_fedsgd(lenet, x, y)], steps=10, starts=4)
    assert labels.tolist() == sorted(y.tolist())


@pytest.mark.parametrize("index", [302, 402])
def test_step_one_recovers_distinct_labels_as_gradinversions_rule_does(mnist, index):
    """A ReLU ConvNet at initialisation (features about 0.015, far below sigmoid(N(0, 1))), a batch of 8 distinct
    labels, T = 3 temporal gradients: GradInversion's rule reads the labels exactly off the first gradient, and
    Step I must find them too. With dummy features at a fixed unit scale it found the model's favourite class in
    nearly every slot (1 or 2 of 8 right)."""
    from attacks.hfl.labels import yin_labels
    from attacks.hfl.tgias.label_optimisation import feature_scale

    convnet = build_hfl_model("convnet", (1, 28, 28), 10, seed=0)
    trace = observe_trace(convnet, mnist, batch_size=8, temporal=3, index=index, arch="convnet")
    truth = sorted(mnist.labels[index:index + 8].tolist())
    assert len(set(truth)) == 8 and yin_labels(trace.log.rounds[0]).tolist() == truth
    found = optimise_labels(trace.log.rounds, steps=6, starts=2).tolist()
    assert sum(min(found.count(c), 1) for c in truth) >= 7, (found, truth)
    grads = trace.log.rounds[0].named()
    assert 0.003 < float(feature_scale(grads["fc.weight"].double(), grads["fc.bias"].double())) < 0.1


@pytest.mark.parametrize("which, read", [("all", 3), ("first", 1)])
def test_step_one_optimises_the_labels_over_all_temporal_gradients_or_the_first(mnist, lenet, monkeypatch, which,
                                                                                   read):
    trace = observe_trace(lenet, mnist, batch_size=2, temporal=4, arch="lenet")
    seen = []
    monkeypatch.setattr("attacks.hfl.tgias.attack.optimise_labels",
                        lambda uploads, **kw: seen.append(list(uploads)) or torch.tensor([1, 2]))
    settings = replace(preset("tgias-ro.paper"), temporal=3, label_gradients=which)
    labels, rule = TGIAsRO(settings).labels(trace.log, seed=0)
    assert rule == "optimised" and labels.tolist() == [1, 2]
    assert len(seen) == 1 and all(a is b for a, b in zip(seen[0], trace.log.rounds)) and len(seen[0]) == read


def test_the_paper_preset_recovers_labels_from_all_t_and_the_quick_one_from_the_first():
    assert preset("tgias-ro.paper").label_gradients == "all"
    assert preset("tgias-ro.quick").label_gradients == "first"


# --- the attack --------------------------------------------------------------------------------------

def test_one_temporal_gradient_with_the_mean_and_carried_state_is_idlg(mnist, lenet):
    x, y = mnist.images[5:6], mnist.labels[5:6]
    upload = observe_fedsgd(lenet, x, y)
    known = observe_fedsgd(lenet, x, y, reveal_labels=True)
    idlg = DLG(replace(preset("idlg.original"), iterations=6))(upload, seed=3)
    settings = replace(preset("tgias-ro.paper"), temporal=1, aggregator="mean", iterations=6, ramp=False, reset=False)
    ours = TGIAsRO(settings)(RoundLog((known,)), seed=3)
    assert torch.equal(idlg.labels, ours.labels) and ours.label_rule == "known"
    assert torch.equal(idlg.trials, ours.trials)
    assert idlg.history["match"].shape == ours.history["match"].shape


def test_algorithm_one_and_joint_run_and_agree_on_shapes(mnist, lenet):
    trace = observe_trace(lenet, mnist, batch_size=2, temporal=3, arch="lenet", reveal_labels=True)
    for agg in ("median", "krum", "joint"):
        krum_f = 0 if agg == "krum" else None           # Krum needs T >= f + 3: at T = 3 it expects no invalid copy
        settings = replace(preset("tgias-ro.quick"), temporal=3, aggregator=agg, iterations=2, krum_f=krum_f)
        rec = TGIAsRO(settings)(trace.log, seed=0)
        assert rec.trials.shape == (1, 2, 1, 28, 28) and rec.steps == 2 and bool(torch.isfinite(rec.loss).all())
        assert rec.extras["aggregator"] == agg


@pytest.mark.parametrize("starts", ["same", "distinct"])
def test_algorithm_one_copies_start_from_one_draw_or_each_from_its_own(mnist, lenet, monkeypatch, starts):
    import attacks.hfl.tgias.attack as module
    seen = []
    real = module.run
    monkeypatch.setattr(module, "run", lambda objective, variables, *a, **kw: seen.append(variables["x"].clone())
                        or real(objective, variables, *a, **kw))
    trace = observe_trace(lenet, mnist, batch_size=2, temporal=3, arch="lenet", reveal_labels=True)
    settings = replace(preset("tgias-ro.quick"), temporal=3, aggregator="median", iterations=1, copy_starts=starts)
    rec = TGIAsRO(settings)(trace.log, seed=0)
    copies = seen[0]
    assert copies.shape[0] == 3 and bool(torch.isfinite(rec.loss).all())
    assert torch.equal(copies[0], rec.initial[0])                  # copy 0 starts where the shared start would
    assert (torch.equal(copies[1], copies[0]) and torch.equal(copies[2], copies[0])) == (starts == "same")


@pytest.mark.parametrize("start", ["normal", "mnist-units", "zero"])
def test_the_start_is_one_seeded_draw_read_on_the_pixels_in_mnist_units_or_zero(mnist, lenet, start):
    trace = observe_trace(lenet, mnist, batch_size=2, temporal=2, arch="lenet", reveal_labels=True)
    settings = replace(preset("tgias-ro.quick"), temporal=2, iterations=1, start=start)
    z = TGIAsRO(replace(settings, start="normal"))(trace.log, seed=3).initial
    rec = TGIAsRO(settings)(trace.log, seed=3)
    expected = {"normal": z, "mnist-units": 0.1307 + 0.3081 * z, "zero": torch.zeros_like(z)}[start]
    assert torch.allclose(rec.initial, expected) and torch.equal(start_images(start, z), rec.initial)
    assert bool(torch.isfinite(rec.loss).all())


def test_mnist_units_refuse_colour_images():
    model = build_hfl_model("lenet", (3, 32, 32), 10, seed=0)
    obs = observe_fedsgd(model, torch.rand(1, 3, 32, 32), torch.tensor([1]), arch="lenet", reveal_labels=True)
    with pytest.raises(SplitlabError, match="--start mnist-units .* these have 3 channels"):
        TGIAsRO(replace(preset("tgias-ro.quick"), temporal=1, start="mnist-units")).check(RoundLog((obs,)))


def test_distinct_copy_starts_need_copies():
    with pytest.raises(SplitlabError, match="--copy-starts does not apply"):
        replace(preset("tgias-ro.quick"), copy_starts="distinct").check()


def test_a_tv_prior_smooths_the_reconstruction(mnist, lenet):
    from attacks.engine.priors import tv_l1
    trace = observe_trace(lenet, mnist, batch_size=1, temporal=2, arch="lenet", reveal_labels=True)
    smooth = {}
    for tv in (0.0, 10.0):
        settings = replace(preset("tgias-ro.quick"), temporal=2, iterations=2, tv=tv)
        smooth[tv] = float(tv_l1(TGIAsRO(settings)(trace.log, seed=0).trials[0]))
    assert smooth[10.0] < 0.5 * smooth[0.0]


def test_cli_trained_kind_records_how_converged(tmp_path):
    result = _hfl(tmp_path / "run", "--observe", "rounds", "--temporal", "2", "--iterations", "1", "--batch-size", "2",
                  "--labels", "known", "--invalid", "1", "--invalid-kind", "trained", "--trained-steps", "300")
    assert result.exit_code == 0, result.output
    m = json.loads(result.stdout)["metrics"]
    assert m["invalid_kind"] == "trained" and 0 < m["trained_loss"] < 0.5
    assert 0 < m["invalid_norm_ratio"] < 0.5                     # the converged model's gradient is the small one


def test_a_switch_left_off_is_not_given_from_the_cli_or_the_python_api():
    # --carry-state left off arrives as reset=False (the switch's off state): it is not a value for reset
    assert values(TGIAsSettings, {"reset": False, "ramp": None, "beta": None}) == {}
    assert values(TGIAsSettings, {"reset": True}) == {"reset": False}         # --carry-state given
    config = HFLConfig.of(attack="tgias-ro", observe="rounds", aggregator="joint", reset=None)
    assert "reset" not in config.options                # not "--carry-state does not apply to --aggregator joint"
    assert config.plan.settings.reset is True
    median = HFLConfig.of(attack="tgias-ro", observe="rounds", preset="tgias-ro.paper", reset=None)
    assert median.plan.settings.reset is True            # off keeps the preset's fresh state
    assert HFLConfig.of(attack="tgias-ro", observe="rounds", preset="tgias-ro.paper",
                        reset=False).plan.settings.reset is False


def test_presets_give_each_copy_dlgs_budget():
    assert {p.name for p in registry.spec("tgias-ro").presets} == {"tgias-ro.paper", "tgias-ro.quick"}
    paper = preset("tgias-ro.paper")
    assert (paper.temporal, paper.aggregator, paper.iterations, paper.local_steps, paper.max_iter, paper.ramp) == \
        (10, "median", 300, 1, 20, True)
    assert paper.evaluations == preset("dlg.original").iterations * preset("dlg.original").max_iter


def _hfl(out, *args):
    return CliRunner().invoke(app, ["hfl", "--json", "--device", "cpu", "--out", str(out), "--attack", "tgias-ro",
                                    *args])


def test_cli_run_records_the_trace(tmp_path):
    result = _hfl(tmp_path / "run", "--observe", "rounds", "--temporal", "2", "--iterations", "2", "--batch-size", "2",
                  "--labels", "known", "--invalid", "1", "--invalid-kind", "noise", "--clients", "3", "--local-batches", "4",
                  "--aggregator", "trimmed", "--trim-beta", "0", "--local-steps", "2", "--carry-state", "--layer-ramp")
    assert result.exit_code == 0, result.output
    m = json.loads(result.stdout)["metrics"]
    settings = json.loads((tmp_path / "run" / "config.json").read_text())["config"]["settings"]
    assert (settings["beta"], settings["local_steps"], settings["reset"], settings["ramp"]) == \
        (0.0, 2, False, True) and m["steps"] == 4
    assert m["label_rule"] == "known" and m["invalid"] == 1 and m["invalid_kind"] == "noise"
    assert len(m["target_rounds"]) == 2 and m["extras"]["temporal"] == 2 and m["observation"] == "rounds"
    assert m["client_batches_seen"] == 4                  # a sighting every epoch of client 0's four batches


@pytest.mark.parametrize("args,message", [
    (["--observe", "fedsgd"], "use --observe rounds"),
    (["--observe", "rounds", "--trim-beta", "0.2"], "--trim-beta does not apply to --aggregator joint"),
    (["--observe", "rounds", "--aggregator", "krum", "--temporal", "4", "--krum-f", "3"], "needs T >= f + 3"),
    (["--observe", "rounds", "--carry-state"], "--carry-state does not apply to --aggregator joint"),
    (["--observe", "rounds", "--invalid", "11"], "--invalid 11 exceeds the 10 temporal gradients"),
    (["--observe", "rounds", "--aggregator", "geomedian"], "--aggregator must be one of joint"),
    (["--observe", "rounds", "--sample-fraction", "0"], "--sample-fraction must be"),
    (["--observe", "rounds", "--invalid-kind", "zeros"], "--invalid-kind must be one of"),
    (["--observe", "rounds", "--invalid", "1", "--trained-steps", "10"], "--trained-steps applies to"),
    (["--observe", "rounds", "--invalid", "1", "--invalid-kind", "trained", "--trained-steps", "0"],
     "--trained-steps must be"),
    (["--observe", "rounds", "--invalid", "1", "--invalid-kind", "trained", "--trained-steps", "20000"],
     "--trained-steps must be"),
    (["--observe", "rounds", "--invalid", "1", "--invalid-kind", "trained", "--clients", "400", "--batch-size", "4"],
     "trains on all 4800 client images"),
    (["--observe", "rounds", "--restarts", "2"], "No such option: --restarts"),      # its copies are not restarts
    (["--observe", "rounds", "--temporal", "0"], "--temporal must be"),
    (["--observe", "rounds", "--local-batches", "0"], "--local-batches must be"),
    (["--observe", "rounds", "--clients", "101", "--local-batches", "10", "--batch-size", "4"],
     "lower --clients, --local-batches or --batch-size"),
    (["--observe", "rounds", "--trim-beta", "0.5"], "--trim-beta must be"),
    (["--observe", "rounds", "--local-steps", "0"], "--local-steps must be"),
    (["--observe", "rounds", "--start", "uniform"], "--start must be one of"),
    (["--observe", "rounds", "--aggregator", "median", "--mode", "sequential"], "applies to the joint form only"),
])
def test_bad_input_exits_2(tmp_path, args, message):
    result = _hfl(tmp_path / "run", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()

"""FedLeak: its engine parts (global top-R%, the frozen subset at the probe), its protocol knobs and the
attack on a small setting."""
import math
from dataclasses import replace

import pytest
import torch

from attacks import registry
from attacks.engine import L1, SGD, Block, EngineOptions, FedSGDGradient, Objective, Schedule, run
from vfl.defences.upload import DPGaussian, parse_defence
from attacks.hfl.experiment import HFLConfig
from attacks.hfl.fedleak import FedLeak, FedLeakSettings
from attacks.hfl.fedleak.attack import estimated_gradient, infer_labels
from attacks.hfl.fedleak.parts import ActivationL1, GlobalTopMagnitude, GradientBlend, TopMagnitude, activation_l1
from attacks.hfl.labels import fedleak_labels
from attacks.hfl.observations import observe_fedavg, observe_fedsgd
from attacks.hfl.secagg import observe_clients
from attacks.hfl.variables import initial_variables
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.models.hfl import build_hfl_model

pytestmark = pytest.mark.usefixtures("one_thread")


def preset(name):
    return registry.preset(name).settings()


def test_global_top_r_keeps_ceil_r_n_entries_over_all_layers():
    torch.manual_seed(0)
    layers = [torch.randn(7, 5), 1e-3 * torch.randn(40), torch.randn(3)]       # the middle layer is tiny
    n = sum(t.numel() for t in layers)
    for ratio in (0.05, 0.3, 0.5, 1.0):
        masks = GlobalTopMagnitude(ratio)(layers, layers)
        assert sum(int(m.sum()) for m in masks) == math.ceil(ratio * n)
    masks = GlobalTopMagnitude(0.3)(layers, layers)
    assert int(masks[1].sum()) == 0                      # global: the small layer loses everything ...
    assert int(TopMagnitude(0.3)(layers, layers)[1].sum()) == 12     # ... per layer it keeps its share
    kept = torch.cat([t.abs().flatten()[m.flatten() > 0] for t, m in zip(layers, masks)])
    dropped = torch.cat([t.abs().flatten()[m.flatten() == 0] for t, m in zip(layers, masks)])
    assert kept.min() > dropped.max()


@pytest.mark.parametrize("trials", [1, 2])
@pytest.mark.parametrize("same_subset", [True, False])
def test_the_probe_reuses_the_subset_chosen_at_x(trials, same_subset):
    # D = sum over the top-2 |x| of |x|. At x = (1, .9, .8, .1) the subset is {0, 1}; the look-ahead probe
    # x - (1, 1, 0, 0)/sqrt(2) has top-2 {2, 0}. With weight 1 the step is the probe's gradient alone:
    # sign on the frozen subset {0, 1}, or on the recomputed one {0, 2}.
    x = torch.tensor([1.0, 0.9, 0.8, 0.1], dtype=torch.float64)
    objective = Objective(lambda v, c: [v["x"]], L1(subset=TopMagnitude(0.5)))
    blend = GradientBlend(weight=1.0, k=1.0, lookahead=True, same_subset=same_subset)
    result = run(objective, {"x": x.expand(trials, 4).clone()}, {"observed": [torch.zeros(4, dtype=torch.float64)]},
                 Schedule((Block(("x",), SGD(0.1), 1, hooks=(blend,)),)))
    step = torch.tensor([1.0, 1.0, 0.0, 0.0] if same_subset else [1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(result.final["x"], (x - 0.1 * step).expand(trials, 4))


def test_uniform_initialisation_lies_in_the_box():
    model = build_hfl_model("convnet", seed=0)
    mnist = datasets.load("mnist5k")
    obs = observe_fedsgd(model, mnist.images[:4], mnist.labels[:4], arch="convnet")
    x = initial_variables(obs, 3, seed=0, label_logits=False, images="uniform")["x"]
    assert x.shape == (3, 4, 1, 28, 28) and float(x.min()) >= 0 and float(x.max()) <= 1 and float(x.std()) > 0.25
    assert float(initial_variables(obs, 3, seed=0, label_logits=False)["x"].min()) < 0          # N(0, 1) default


def test_fedleak_label_rule_reads_distinct_labels_and_fills_larger_batches():
    mnist = datasets.load("mnist5k")
    model = build_hfl_model("convnet", seed=0)
    labels = mnist.labels[:200]
    idx = torch.stack([torch.nonzero(labels == c)[0, 0] for c in (1, 4, 7)])       # three distinct classes
    obs = observe_fedsgd(model, mnist.images[idx], labels[idx], arch="convnet")
    assert fedleak_labels(obs).tolist() == [1, 4, 7]
    big = observe_fedsgd(model, mnist.images[:12], mnist.labels[:12], arch="convnet")     # B > N = 10
    inferred = fedleak_labels(big)
    assert len(inferred) == 12 and inferred.tolist() == sorted(inferred.tolist())


def test_dp_from_epsilon_and_secure_aggregation_and_the_fedavg_estimate():
    dp = parse_defence("upload-dp:epsilon=100")
    assert isinstance(dp, DPGaussian) and dp.spec == "upload-dp:epsilon=100"
    assert dp.sigma == pytest.approx(math.sqrt(2 * math.log(1e5)) / 100)
    with pytest.raises(SplitlabError):
        parse_defence("upload-dp:epsilon=0")
    model = build_hfl_model("convnet", seed=0).double()
    mnist = datasets.load("mnist5k")
    x, y = mnist.images[:4].double(), mnist.labels[:4]
    whole = observe_fedsgd(model, x, y, arch="convnet")
    summed = observe_clients(lambda a, b: observe_fedsgd(model, a, b, arch="convnet"), x, y, 2)
    assert summed.clients == 2 and summed.batch_size == 4
    for mean, estimate in zip(whole.gradient, estimated_gradient(summed)):    # sum of 2 means / 2 = mean of 4
        torch.testing.assert_close(estimate, mean)
    one_step = observe_fedavg(model, x, y, lr=0.1, epochs=1, batch_size=4, arch="convnet")
    for g, estimate in zip(whole.gradient, estimated_gradient(one_step)):
        torch.testing.assert_close(estimate, g)
    # 4 tiny steps of one image: the estimate is their mean, the whole batch's gradient (a smooth model: the
    # ConvNet's ReLUs sit exactly at their kink on blank pixels at initialisation)
    lenet = build_hfl_model("lenet", seed=0).double()
    four = observe_fedavg(lenet, x, y, lr=1e-7, epochs=1, batch_size=1, arch="lenet")
    for g, estimate in zip(observe_fedsgd(lenet, x, y).gradient, estimated_gradient(four)):
        assert float((estimate - g).norm() / g.norm()) < 1e-4
    assert infer_labels(four, "count").tolist() == sorted(y.tolist())


@pytest.mark.slow
def test_fedleak_reconstructs_a_small_batch_and_refines_labels():
    mnist = datasets.load("mnist5k")
    model = build_hfl_model("convnet", seed=0)
    x, y = mnist.images[:2], mnist.labels[:2]
    obs = observe_fedsgd(model, x, y, arch="convnet")
    attack = FedLeak(replace(preset("fedleak.quick"), iterations=40, restarts=2))
    result = attack(obs, seed=0)
    assert result.label_rule == "count+joint" and result.labels.shape == (2, 2)
    assert sorted(result.labels[0].tolist()) == sorted(y.tolist())
    assert float(result.trials.min()) >= 0 and float(result.trials.max()) <= 1
    start, end = result.history["match"][0], result.history["match"][-1]
    assert bool((end < 0.5 * start).all())
    # batched and sequential restarts are the same computation (float64: float32 rounding grows over steps)
    double = observe_fedsgd(model.double(), x.double(), y, arch="convnet")
    few = FedLeak(replace(preset("fedleak.quick"), iterations=3, restarts=2))
    sequential = few(double, seed=0, engine=EngineOptions(mode="sequential"))
    torch.testing.assert_close(sequential.trials, few(double, seed=0).trials, rtol=0, atol=1e-12)


@pytest.mark.parametrize("logit", [10.0, 0.0])
def test_refined_labels_start_on_the_inferred_class_or_uniform_without_inference(monkeypatch, logit):
    import attacks.hfl.fedleak.attack as module
    mnist = datasets.load("mnist5k")
    x, y = mnist.images[:2], mnist.labels[:2]
    obs = observe_fedsgd(build_hfl_model("convnet", seed=0), x, y, arch="convnet")
    seen = []
    real = module.run
    monkeypatch.setattr(module, "run", lambda objective, variables, *a, **kw: seen.append(
        variables["label_logits"].clone()) or real(objective, variables, *a, **kw))
    FedLeak(replace(preset("fedleak.quick"), iterations=1, label_logit=logit))(obs, seed=0)
    start = seen[0][0]                                           # (B, classes) of the first restart
    inferred = torch.nn.functional.one_hot(infer_labels(obs, "count"), start.shape[-1]).to(start.dtype)
    torch.testing.assert_close(start, logit * inferred)
    assert bool((start == 0).all()) == (logit == 0)


@pytest.mark.slow(seconds=35)
def test_fedleak_answer_final_is_algorithm_1s_last_iterate_and_best_the_lowest_loss_one():
    mnist = datasets.load("mnist5k")
    obs = observe_fedsgd(build_hfl_model("convnet", seed=0).double(), mnist.images[:2].double(), mnist.labels[:2],
                         arch="convnet")
    quick = replace(preset("fedleak.quick"), restarts=2, refine_labels=False)
    best = FedLeak(replace(quick, iterations=30))(obs, seed=0)
    final = FedLeak(replace(quick, iterations=30, answer="final"))(obs, seed=0)
    longer = FedLeak(replace(quick, iterations=31))(obs, seed=0)
    # a 31-step run records D at the iterate the 30-step run ends on (its last row), with the preset's weights
    h = longer.history
    d30 = h["match"][30] + quick.alpha * h["tv"][30] + quick.beta * h["activations"][30]
    torch.testing.assert_close(final.loss.float(), d30, rtol=1e-6, atol=0)          # the trace is float32
    # restart 1 saw a lower D before its last step (Adam at lr 0.1 overshoots): best keeps that iterate
    assert float(best.loss[1]) < float(final.loss[1]) and not torch.equal(best.trials[1], final.trials[1])
    assert float(best.loss[0]) == float(final.loss[0]) and torch.equal(best.trials[0], final.trials[0])


def test_fedleak_options_are_checked_and_dispatched():
    config = HFLConfig.of(attack="fedleak", arch="convnet", batch_size=8, ratio=0.3, blend=0.0, probe="lookahead",
                          selection="layer", label_rule="fedleak", refine_labels=False)
    s = config.plan.settings
    assert (s.ratio, s.blend, s.probe, s.selection, s.label_rule, s.refine_labels) == \
        (0.3, 0.0, "lookahead", "layer", "fedleak", False)
    assert isinstance(config.plan.spec.make(s), FedLeak) and s.iterations == 600 and s.lr == 0.1   # fedleak.quick
    for bad in (dict(ratio=0.0), dict(ratio=1.5), dict(blend=-0.1), dict(selection="row"), dict(probe="down"),
                dict(label_rule="magic"), dict(alpha=-1.0), dict(answer="last")):
        with pytest.raises(SplitlabError):              # refused when the config is built
            HFLConfig.of(attack="fedleak", arch="convnet", batch_size=8, **bad)
    for bad in (dict(ratio=0.0), dict(blend=2.0), dict(k=float("nan")), dict(selection="row"), dict(fedavg="x")):
        with pytest.raises(SplitlabError):              # settings built in Python are held to the same checks
            FedLeakSettings(preset="t", **bad)
    with pytest.raises(SplitlabError, match="unknown option 'ratio' for invgrad"):    # FedLeak's option only
        HFLConfig.of(attack="invgrad", arch="convnet", ratio=0.5)
    # the options and the observation options may come whole (as HFLConfig's fields), flat values overriding them
    whole = HFLConfig.of(attack="fedleak", arch="convnet", options={"ratio": 0.3, "blend": 0.1}, blend=0.2)
    assert whole.options == {"ratio": 0.3, "blend": 0.2} and whole.plan.settings.blend == 0.2
    traced = HFLConfig.of(attack="tgias-ro", observation_options={"clients": 6, "server_lr": 0.1}, server_lr=0.5)
    trace = traced.plan.observation_options
    assert traced.observation_options == {"clients": 6, "server_lr": 0.5}
    assert (trace.clients, trace.server_lr) == (6, 0.5)
    with pytest.raises(SplitlabError, match="unknown option 'server_lr' for fedleak"):     # a trace's option
        HFLConfig.of(attack="fedleak", server_lr=0.5)
    with pytest.raises(SplitlabError, match="secure-aggregation does not apply to invgrad"):
        HFLConfig.of(attack="invgrad", arch="convnet", secure_aggregation=2)


def test_an_unknown_trace_option_given_whole_is_a_one_line_error():
    with pytest.raises(SplitlabError, match="client"):
        HFLConfig.of(attack="tgias-ro", observation_options={"client": 6})


def test_the_activation_prior_on_the_simulators_pass_equals_its_own_forward_pass():
    model = build_hfl_model("convnet", seed=0).double()
    mnist = datasets.load("mnist5k")
    x = mnist.images[:2].double().requires_grad_(True)
    obs = observe_fedsgd(model, x.detach(), mnist.labels[:2], arch="convnet")
    params = dict(obs.model.params)
    context = {"params": params, "buffers": dict(obs.model.buffers), "labels": mnist.labels[:2]}
    simulated = FedSGDGradient(obs.model.network, record=(torch.nn.ReLU,))({"x": x}, context)
    shared = activation_l1(simulated.outputs)
    own = ActivationL1(obs.model.network, params)(x)
    torch.testing.assert_close(shared, own)
    torch.testing.assert_close(torch.autograd.grad(shared, x)[0], torch.autograd.grad(own, x)[0])
    for a, b in zip(simulated, FedSGDGradient(obs.model.network)({"x": x}, context)):
        torch.testing.assert_close(a, b)


def test_the_activation_prior_needs_relu_outputs():
    lenet = build_hfl_model("lenet", seed=0)
    x, y = torch.rand(2, 1, 28, 28), torch.tensor([1, 2])
    observation = observe_fedsgd(lenet, x, y, arch="lenet")
    with pytest.raises(SplitlabError, match="has none; use --beta 0"):
        FedLeak(preset("fedleak.quick")).check(observation)
    FedLeak(replace(preset("fedleak.quick"), beta=0.0)).check(observation)

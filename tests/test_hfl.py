"""HFL: observations and the threat-model contract, defences, label recovery, DLG / iDLG / Inverting
Gradients through the engine, batched == sequential trials, divergence, models."""
import copy
import dataclasses
import importlib
import json
from dataclasses import replace

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from attacks import registry
from attacks.engine import EngineOptions, FedSGDGradient
from vfl.defences.upload import GaussianNoise, NoDefence, Quantise, TopK, parse_defence
from attacks.hfl.dlg import DLG
from attacks.hfl.experiment import HFLConfig
from attacks.hfl.fedleak import FedLeak
from attacks.hfl.invgrad import InvertingGradients
from attacks.hfl.labels import count_labels, idlg_labels
from attacks.metrics import label_accuracy, score
from attacks.hfl.observations import (FedSGDObservation, RoundLog, check_requirements, observe_fedavg,
                                      observe_fedsgd)
from vfl.errors import SplitlabError
from vfl.models import describe_hfl
from vfl.models.hfl import HFL_MODELS, build_hfl_model, final_linear
from splitlab.cli import app

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("one_thread")


def preset(name):
    return registry.preset(name).settings()


def _psnr(model, x, y, settings, defence="none", seed=0):
    obs = observe_fedsgd(model, x, y, arch="lenet", defence=parse_defence(defence),
                         generator=torch.Generator().manual_seed(0))
    return score(DLG(settings)(obs, seed=seed), x, y)["psnr"]


# --- models ----------------------------------------------------------------------------------------

def test_hfl_model_parameter_counts():
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(build_hfl_model("resnet10", (1, 28, 28), 10)) == 4_902_090
    assert count(build_hfl_model("resnet18", (3, 32, 32), 10)) == 11_173_962      # the usual CIFAR ResNet-18
    assert build_hfl_model("lenet", (1, 28, 28), 10).hidden == 588                 # iDLG's MNIST LeNet
    assert build_hfl_model("lenet", (3, 32, 32), 100).hidden == 768                # DLG's CIFAR-100 LeNet
    for spec in HFL_MODELS.values():
        if spec.total_params is not None:
            assert count(build_hfl_model(spec.name, (1, 28, 28), 10)) == spec.total_params


@pytest.mark.parametrize("name", ["lenet", "convnet"])
@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_models_adapt_to_the_dataset(name, shape):
    model = build_hfl_model(name, shape, 7, seed=1)
    assert model(torch.rand(2, *shape)).shape == (2, 7)
    assert not model.training and final_linear(model) == "fc.weight"
    lenet = build_hfl_model("lenet", seed=3)
    assert all(float(p.detach().abs().max()) <= 0.5 for p in lenet.parameters())     # DLG's U(-0.5, 0.5) init


def test_relu_lenet_initialisations_differ_only_in_the_draw():
    default, uniform = build_hfl_model("lenet-relu", seed=3), build_hfl_model("lenet-relu-uniform", seed=3)
    shapes = lambda m: [(n, p.shape) for n, p in m.named_parameters()]
    assert shapes(default) == shapes(uniform)
    fc1 = dict(default.named_parameters())["classifier.0.weight"]            # fan-in 256: torch's U(+-1/16)
    assert float(fc1.detach().abs().max()) <= 1 / 16
    values = torch.cat([p.detach().flatten() for p in uniform.parameters()])  # DLG's U(-0.5, 0.5), every tensor
    assert float(values.abs().max()) <= 0.5 and abs(float(values.std()) - 12 ** -0.5) < 0.01


def test_model_zoo_lists_the_hfl_models():
    rows = describe_hfl()
    assert [r["arch"] for r in rows] == list(HFL_MODELS)
    assert {r["arch"]: r["total_params"] for r in rows}["resnet10"] == 4_902_090
    result = runner.invoke(app, ["models", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["hfl_models"] == rows


def test_bad_model_names_and_shapes():
    with pytest.raises(SplitlabError, match="unknown HFL model"):
        build_hfl_model("vgg")
    with pytest.raises(SplitlabError, match="at least 8"):
        build_hfl_model("convnet", (1, 4, 4))


# --- observations and the contract ------------------------------------------------------------------

def test_fedsgd_observation_holds_the_upload_and_no_private_data(mnist, lenet):
    x, y = mnist.images[:2], mnist.labels[:2]
    obs = observe_fedsgd(lenet, x, y, arch="lenet")
    fields = {f.name for f in dataclasses.fields(FedSGDObservation)}
    assert fields == {"model", "gradient", "batch_size", "defence", "labels", "clients"}
    assert obs.labels is None and obs.batch_size == 2 and obs.defence == "none"
    assert obs.provides >= {"gradient", "batch_size", "weights", "final_linear"} and "labels" not in obs.provides
    params = {k: v.detach() for k, v in lenet.named_parameters()}
    expected = FedSGDGradient(lenet)({"x": x}, {"params": params, "labels": y})
    for a, b in zip(obs.gradient, expected):
        torch.testing.assert_close(a, b)
    model = build_hfl_model("lenet", seed=0)
    obs = observe_fedsgd(model, x, y, arch="lenet")
    with torch.no_grad():                       # the server's copy is its own: the client training on does
        model.fc.bias.add_(1.0)                 # not change what was observed
    assert not torch.equal(obs.model.params["fc.bias"], model.fc.bias)
    assert observe_fedsgd(lenet, x, y, arch="lenet", reveal_labels=True).labels.tolist() == y.tolist()


def test_fedavg_update_is_local_sgd_with_reshuffling(mnist, lenet):
    x, y = mnist.images[:4].double(), mnist.labels[:4]
    model = build_hfl_model("lenet", seed=0).double()
    one_step = observe_fedavg(model, x, y, lr=0.1, epochs=1, batch_size=4)
    gradient = observe_fedsgd(model, x, y)
    for u, g in zip(one_step.update, gradient.gradient):
        torch.testing.assert_close(u, 0.1 * g)
    assert one_step.provides >= {"update", "local_hyperparameters"} and "gradient" not in one_step.provides
    a = observe_fedavg(model, x, y, lr=0.1, epochs=2, batch_size=2, generator=torch.Generator().manual_seed(0))
    b = observe_fedavg(model, x, y, lr=0.1, epochs=2, batch_size=2, generator=torch.Generator().manual_seed(5))
    assert not torch.allclose(a.update[0], b.update[0])                 # the order of mini-batches matters


def observe_rounds(model, x, y, *, rounds: int, lr: float, arch: str) -> RoundLog:
    """One client's FedSGD uploads while a single-client FedSGD loop trains: theta_{t+1} = theta_t - lr g_t."""
    log, network = [], copy.deepcopy(model)
    for _ in range(rounds):
        obs = observe_fedsgd(network, x, y, arch=arch)
        log.append(obs)
        with torch.no_grad():
            for (_, p), g in zip(network.named_parameters(), obs.gradient):
                p -= lr * g
    return RoundLog(tuple(log))


def test_round_log_follows_the_global_model(mnist, lenet):
    log = observe_rounds(lenet, mnist.images[:1], mnist.labels[:1], rounds=3, lr=0.5, arch="lenet")
    assert len(log.rounds) == 3 and "rounds" in log.provides
    w0, g0 = log.rounds[0].model.params["fc.weight"], log.rounds[0].named()["fc.weight"]
    torch.testing.assert_close(log.rounds[1].model.params["fc.weight"], w0 - 0.5 * g0)


def test_attacks_refuse_observations_that_lack_what_they_need(mnist, lenet):
    fedavg = observe_fedavg(lenet, mnist.images[:1], mnist.labels[:1], lr=0.1, epochs=1, batch_size=1, arch="lenet")
    with pytest.raises(SplitlabError, match="attack dlg needs a FedSGD gradient"):
        DLG(preset("dlg.quick"))(fedavg)
    with pytest.raises(SplitlabError, match="the client's labels"):
        InvertingGradients(preset("invgrad.quick")).check(fedavg)
    no_linear = nn.Sequential(nn.Conv2d(1, 10, 28), nn.Flatten())          # logits straight from a conv
    obs = observe_fedsgd(no_linear, mnist.images[:1], mnist.labels[:1], arch="allconv")
    DLG(preset("dlg.quick")).check(obs)                                     # joint labels: fine
    with pytest.raises(SplitlabError, match="final linear layer"):
        DLG(preset("idlg.quick")).check(obs)
    with pytest.raises(SplitlabError, match="final linear layer"):
        idlg_labels(obs)
    check_requirements("x", ("gradient",), obs)
    log = observe_rounds(lenet, mnist.images[:1], mnist.labels[:1], rounds=1, lr=0.5, arch="lenet")
    for attack in (InvertingGradients(preset("invgrad.quick")), FedLeak(preset("fedleak.quick"))):
        with pytest.raises(SplitlabError, match="observes fedsgd or fedavg, not rounds"):
            attack.check(log)


# --- defences --------------------------------------------------------------------------------------

def test_defences_do_what_they_say():
    g = torch.Generator().manual_seed(0)
    upload = [torch.randn(100, generator=g) * 3, torch.randn(10, 10, generator=g)]
    clipped = GaussianNoise(sigma=0.0, clip=1.0)(upload)
    assert abs(float(torch.sqrt(sum(t.pow(2).sum() for t in clipped))) - 1.0) < 1e-5
    noisy = GaussianNoise(sigma=0.5)(upload, torch.Generator().manual_seed(1))
    residual = torch.cat([(n - u).flatten() for n, u in zip(noisy, upload)])
    assert abs(float(residual.std()) - 0.5) < 0.08
    sparse = TopK(keep=0.1)(upload)
    assert [int((t != 0).sum()) for t in sparse] == [10, 10]
    assert float(sparse[0].abs().max()) == float(upload[0].abs().max())
    quantised = Quantise(bits=3)(upload)                                    # 3 levels each side of 0
    for q, u in zip(quantised, upload):
        assert len(torch.unique(q)) <= 7 and float((q - u).abs().max()) <= float(u.abs().max()) / 6 + 1e-6
    assert NoDefence()(upload)[0] is not upload[0]


@pytest.mark.parametrize("spec,expected", [
    ("none", NoDefence()), ("gaussian:sigma=1e-3,clip=4", GaussianNoise(1e-3, 4.0)),
    ("topk:keep=0.1", TopK(0.1)), ("quant:bits=4", Quantise(4))])
def test_defence_specs_parse_and_round_trip(spec, expected):
    assert parse_defence(spec) == expected
    assert parse_defence(expected.spec) == expected


@pytest.mark.parametrize("spec,message", [
    ("blur", "unknown defence"), ("gaussian", "needs option sigma"), ("gaussian:sigma=-1", "sigma >= 0"),
    ("topk:keep=2", "0 < keep <= 1"), ("quant:bits=0", "1 <= bits"), ("quant:bits=x", "not an integer"),
    ("topk:ratio=0.1", "takes keep")])
def test_bad_defence_specs_are_refused_naming_the_fix(spec, message):
    with pytest.raises(SplitlabError, match=message):
        parse_defence(spec)


@pytest.mark.slow
def test_stronger_gaussian_noise_lowers_psnr(mnist, lenet):
    x, y = mnist.images[:1], mnist.labels[:1]
    settings = replace(preset("idlg.quick"), iterations=12, restarts=1)
    weak = _psnr(lenet, x, y, settings, "gaussian:sigma=1e-4")
    strong = _psnr(lenet, x, y, settings, "gaussian:sigma=1e-1")
    assert weak > 40 and strong < weak - 20


@pytest.mark.slow
def test_stronger_sparsification_lowers_psnr(mnist, lenet):
    x, y = mnist.images[:1], mnist.labels[:1]
    settings = replace(preset("idlg.quick"), iterations=12, restarts=1)
    weak = _psnr(lenet, x, y, settings, "topk:keep=0.9")
    strong = _psnr(lenet, x, y, settings, "topk:keep=0.05")
    assert strong < weak - 5


# --- labels ----------------------------------------------------------------------------------------

def test_idlg_labels_are_exact_at_batch_one(mnist, lenet):
    correct = [label_accuracy(idlg_labels(observe_fedsgd(lenet, mnist.images[i:i + 1], mnist.labels[i:i + 1])),
                              mnist.labels[i:i + 1]) for i in range(20)]
    assert sum(correct) == 20


def test_count_rule_on_a_batch_of_distinct_labels(mnist):
    model = build_hfl_model("convnet", seed=0)
    idx = torch.tensor([int(torch.nonzero(mnist.labels == c)[0]) for c in (7, 1, 4, 0, 9, 2, 5, 3)])
    obs = observe_fedsgd(model, mnist.images[idx], mnist.labels[idx])
    assert sorted(count_labels(obs).tolist()) == sorted(mnist.labels[idx].tolist())


def test_count_rule_with_repeated_labels(mnist):
    model = build_hfl_model("convnet", seed=0)
    idx = torch.cat([torch.nonzero(mnist.labels == 3)[:3].flatten(), torch.nonzero(mnist.labels == 8)[:1].flatten()])
    obs = observe_fedsgd(model, mnist.images[idx], mnist.labels[idx])
    assert count_labels(obs).tolist() == [3, 3, 3, 8]


def test_label_accuracy_is_multiset_accuracy():
    assert label_accuracy(torch.tensor([1, 2, 2]), torch.tensor([2, 1, 2])) == 1.0
    assert label_accuracy(torch.tensor([2, 2, 2]), torch.tensor([2, 1, 3])) == pytest.approx(1 / 3)


# --- attacks ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_dlg_reconstructs_an_mnist5k_image_on_lenet(mnist, lenet):
    x, y = mnist.images[:1], mnist.labels[:1]
    rec = DLG(preset("dlg.quick"))(observe_fedsgd(lenet, x, y, arch="lenet"), seed=0)
    metrics = score(rec, x, y)
    assert metrics["psnr"] >= 30 and metrics["label_accuracy"] == 1.0
    assert metrics["label_rule"] == "joint" and len(metrics["per_trial"]) == 4
    assert rec.loss[rec.best_trial] == rec.loss.min()


def _double_problem(mnist, name="convnet", batch=1):
    model = build_hfl_model(name, seed=0).double()
    x, y = mnist.images[:batch].double(), mnist.labels[:batch]
    return observe_fedsgd(model, x, y, arch=name), x, y


def test_inverting_gradients_batched_equals_sequential(mnist):
    obs, _, _ = _double_problem(mnist)
    attack = InvertingGradients(replace(preset("invgrad.quick"), iterations=12, restarts=3, tv=1e-2))
    engines = EngineOptions().recording(), EngineOptions(mode="sequential").recording()
    batched, sequential = (attack(obs, seed=4, engine=engine) for engine in engines)
    assert [engine.report.mode for engine in engines] == ["batched", "sequential"]
    torch.testing.assert_close(batched.trials, sequential.trials, rtol=0, atol=1e-10)
    torch.testing.assert_close(batched.loss, sequential.loss, rtol=1e-9, atol=1e-12)
    assert batched.best_trial == sequential.best_trial


def test_dlg_batched_equals_sequential_after_one_step(mnist):
    # L-BFGS without a line search amplifies round-off chaotically, so compare after one step.
    obs, _, _ = _double_problem(mnist, "lenet")
    attack = DLG(replace(preset("dlg.quick"), iterations=1, restarts=3))
    batched, sequential = attack(obs, seed=2), attack(obs, seed=2, engine=EngineOptions(mode="sequential"))
    torch.testing.assert_close(batched.trials, sequential.trials, rtol=1e-6, atol=1e-6)
    assert torch.equal(batched.labels, sequential.labels)


def test_a_diverging_restart_is_reported_and_the_others_finish(mnist):
    obs, x, y = _double_problem(mnist)
    attack = InvertingGradients(replace(preset("invgrad.quick"), iterations=10, restarts=3))
    init = {"x": torch.randn(3, 1, 1, 28, 28, dtype=torch.float64, generator=torch.Generator().manual_seed(0))}
    init["x"][1, 0, 0, 0, 0] = float("nan")
    rec = attack(obs, init=init)
    assert rec.diverged.tolist() == [False, True, False] and rec.best_trial in (0, 2)
    metrics = score(rec, x.float(), y)
    assert metrics["diverged_trials"] == [1] and metrics["psnr"] is not None
    assert metrics["per_trial"][1]["diverged"] is True and "psnr" not in metrics["per_trial"][1]
    assert all("psnr" in metrics["per_trial"][r] for r in (0, 2))


def test_when_every_restart_diverges_nothing_is_reported_as_a_result(mnist):
    obs, x, y = _double_problem(mnist)
    attack = InvertingGradients(replace(preset("invgrad.quick"), iterations=3, restarts=2))
    rec = attack(obs, init={"x": torch.full((2, 1, 1, 28, 28), float("nan"), dtype=torch.float64)})
    assert rec.best_trial is None and not rec.kept.any()
    metrics = score(rec, x.float(), y)
    assert metrics["psnr"] is None and metrics["label_accuracy"] is None
    assert metrics["unavailable"]["psnr"] == "every trial diverged"


def test_presets_carry_their_sources_and_the_papers_numbers():
    names = {p.name for a in ("dlg", "idlg", "invgrad") for p in registry.spec(a).presets}
    assert names == {"dlg.original", "dlg.quick", "idlg.original", "idlg.quick", "invgrad.paper", "invgrad.quick"}
    assert all(p.source and p.name.startswith(p.attack + ".") for p in registry.presets())
    dlg = preset("dlg.original")
    assert (dlg.iterations, dlg.lr, dlg.max_iter, dlg.labels, dlg.attack) == (300, 1.0, 20, "joint", "dlg")
    assert preset("idlg.original").attack == "idlg"
    ig = preset("invgrad.paper")
    assert (ig.iterations, ig.lr, ig.signed, ig.boxed, ig.decay) == (24_000, 0.1, True, True, (3 / 8, 5 / 8, 7 / 8))
    tv = {d: HFLConfig(attack="invgrad", preset="invgrad.paper", dataset=d).plan.settings.tv
          for d in ("cifar10", "mnist5k")}
    assert tv == {"cifar10": 1e-6, "mnist5k": 1e-4}                  # the TV weight follows the dataset
    with pytest.raises(SplitlabError, match="unknown preset 'dlg.fast' for dlg; choose one of: .*dlg.original"):
        preset("dlg.fast")


MODULES = ["observations", "labels", "variables", "dlg", "dlg.attack", "dlg.settings", "invgrad",
           "invgrad.attack", "invgrad.settings", "experiment", "cli"]


@pytest.mark.parametrize("module", MODULES)
def test_public_names_import(module):
    mod = importlib.import_module(f"attacks.hfl.{module}")
    for name in mod.__all__:
        assert getattr(mod, name) is not None


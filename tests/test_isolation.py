"""The threat model in tests: what each attacker object receives holds nothing of the private data, the
UnSplit attacker knows the architecture but never the victim's weights, and runs are reproducible."""
import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import attacks.split.unsplit.attack as unsplit_module
from attacks import registry
from attacks.driver import Truth, attack_and_score
from attacks.hfl.observations import observe_fedavg, observe_fedsgd
from attacks.result import Reconstruction
from attacks.split.unsplit import UnSplit
from attacks.split.observations import observe_cut as observe
from splitlab.cli import app
from vfl import data
from vfl.models import build_split
from vfl.models.hfl import build_hfl_model
from vfl.runs import Run
from vfl.training import TrainConfig, load_data, train_split

runner = CliRunner()


def tensors_in(obj, seen=None):
    """Every tensor reachable from an observation: dataclass fields, containers, modules (parameters and
    buffers), bound state of objects."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, nn.Module):
        yield from obj.state_dict(keep_vars=True).values()
        yield from (t for t in vars(obj).values() if isinstance(t, torch.Tensor))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from tensors_in(getattr(obj, field.name), seen)
    elif isinstance(obj, dict) or type(obj).__name__ == "mappingproxy":
        for v in obj.values():
            yield from tensors_in(v, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from tensors_in(v, seen)


def holds_private(tensor: torch.Tensor, images: torch.Tensor, labels: torch.Tensor) -> bool:
    """Whether a tensor is, or contains as rows, a private image, or is the private label vector."""
    t = tensor.detach().cpu().double()
    flat = images.detach().cpu().double().flatten(1)
    if t.numel() >= flat.shape[1] and t.numel() % flat.shape[1] == 0:
        rows = t.reshape(-1, flat.shape[1])
        if any(torch.isclose(rows, image, atol=1e-7).all(1).any() for image in flat):
            return True
    return t.shape == labels.shape and torch.equal(t.long(), labels.cpu().long())


@pytest.mark.parametrize("kind", ["fedsgd", "fedavg"])
def test_hfl_observations_hold_no_private_image_or_label(kind):
    train = data.load("mnist5k", "train")
    x, y = train.images[:4], train.labels[:4]
    model = build_hfl_model("convnet", seed=0)
    obs = observe_fedsgd(model, x, y, arch="convnet") if kind == "fedsgd" else \
        observe_fedavg(model, x, y, lr=0.1, epochs=2, batch_size=2, arch="convnet")
    found = list(tensors_in(obs))
    assert len(found) > 10                                      # the walk does reach the model copy
    assert not any(holds_private(t, x, y) for t in found)
    # the check itself would catch the batch riding along as a buffer of the model copy
    obs.model.network.register_buffer("leak", x.clone())
    assert any(holds_private(t, x, y) for t in tensors_in(obs))


@pytest.fixture(scope="module")
def victim():
    config = TrainConfig(arch="small-mlp", epochs=1, device="cpu", seed=0)
    train, test = load_data(config)
    initial, _ = build_split("small-mlp", 1, seed=0)            # the victim's own initialisation
    return train_split(config, train, test, progress=False), initial, test


@pytest.mark.parametrize("clone", ["shared", "per-target"])
def test_unsplit_clones_never_start_from_the_victims_weights(victim, clone, monkeypatch):
    trained, initial, test = victim
    started = []
    real_run = unsplit_module.run

    def spy(objective, variables, *args, **kwargs):             # what the attacker optimises from
        started.append({k: v.detach().clone() for k, v in variables["clone"].items()})
        return real_run(objective, variables, *args, **kwargs)

    monkeypatch.setattr(unsplit_module, "run", spy)
    x = data.first_of_each_class(test)[0][:3]
    attack = UnSplit(registry.preset("quick", "unsplit").settings(iterations=1, input_steps=1, clone_steps=1,
                                                                   clone=clone))
    attack(observe(trained.client, x, "small-mlp", 1), seed=0)     # the same seed as the victim's
    victim_weights = [dict(initial.named_parameters()), dict(trained.client.model.named_parameters())]
    assert started
    for params in started:
        for trial in range(next(iter(params.values())).shape[0]):
            for weights in victim_weights:
                assert not any(torch.allclose(params[k][trial], w.detach()) for k, w in weights.items())


class _AllDiverged:
    name, observes = "stub", "anything"

    def __call__(self, observation, *, seed=0, engine=None):
        nan = torch.full((2, 1, 1, 28, 28), float("nan"))
        return Reconstruction(attack="stub", preset="stub.none", trials=nan, loss=torch.full((2,), float("nan")),
                              history={"match": torch.full((3, 2), float("nan"))}, diverged=torch.ones(2, dtype=bool),
                              seconds=0.1, steps=3, per_target=True)


_STUB = SimpleNamespace(name="stub", display="clamp", evaluate=None, write=None)


def test_an_attack_whose_trials_all_diverge_still_writes_its_metrics(tmp_path):
    targets = torch.rand(2, 1, 28, 28)
    with Run.create("test", {}, tmp_path / "run") as run:
        outcome = attack_and_score(_STUB, _AllDiverged(), None, Truth(targets), run=run)
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["image_mse"] is None and m["diverged_trials"] == [0, 1]
    assert m["unavailable"]["psnr"] == "every trial diverged" and outcome.metrics["psnr"] is None
    assert (tmp_path / "run" / "reconstruction.png").exists() and (tmp_path / "run" / "loss_curve.png").exists()


@pytest.mark.parametrize("args", [
    ["train", "--arch", "small-mlp", "--epochs", "1", "--seed", "3"],
    pytest.param(["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset", "quick", "--iterations",
                  "2"], marks=pytest.mark.slow),
    ["hfl", "--attack", "invgrad", "--arch", "convnet", "--preset", "invgrad.quick", "--iterations", "4",
     "--defence", "gaussian:sigma=0.01"],
])
@pytest.mark.slow
def test_the_same_command_and_seed_twice_give_identical_metrics(tmp_path, args):
    def metrics(out):
        result = runner.invoke(app, [*args, "--device", "cpu", "--json", "--out", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
        m = json.loads(result.stdout)["metrics"]
        return {k: v for k, v in m.items() if "seconds" not in k}

    first, second = metrics("a"), metrics("b")
    if "history" in first:
        for row in first["history"] + second["history"]:
            row.pop("seconds", None)
    assert first == second

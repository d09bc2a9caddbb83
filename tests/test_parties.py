"""K feature parties in one process (vfl.parties): each party sees only its vertical strip, the server joins
their activations, the explicit protocol gives joint backpropagation's gradients, and bad splits are refused."""
import copy
import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.defences import ClientDefence, OrthogonalTransform
from vfl.errors import SplitlabError
from vfl.parties import CutLayout, Parties, strip_bounds, take_strip
from vfl.protocol import Client, exchange
from vfl.training import TrainConfig, build_parties

runner = CliRunner()


def test_strips_cover_the_width_once_wider_ones_first():
    assert strip_bounds(28, 2) == [(0, 14), (14, 28)]
    assert strip_bounds(28, 3) == [(0, 10), (10, 19), (19, 28)]
    x = torch.arange(2 * 28 * 28.0).view(2, 1, 28, 28)
    assert torch.equal(torch.cat([take_strip(x, 3, k) for k in range(3)], dim=-1), x)


def test_one_party_is_the_classic_client():
    client, _ = build_parties(TrainConfig(arch="small-mlp", device="cpu"), torch.device("cpu"))
    assert type(client) is Client


@pytest.mark.parametrize("arch,cut,joined", [("cnn", 1, (8, 24, 20)), ("mlp", 1, (2048,)), ("small-mlp", 1, (20,))])
def test_two_parties_get_joint_backpropagations_gradients(arch, cut, joined):
    config = TrainConfig(arch=arch, cut_layer=cut, parties=2, optimizer="sgd", lr=1.0, device="cpu")
    client, server = build_parties(config, torch.device("cpu"), role="curious")
    assert isinstance(client, Parties) and client.layout.joined_shape == joined
    for optimizer in [c.optimizer for c in client.clients] + [server.optimizer]:
        optimizer.param_groups[0]["lr"] = 0.0            # the step leaves .grad to compare
    bottoms, top = [copy.deepcopy(c.model) for c in client.clients], copy.deepcopy(server.model)
    torch.manual_seed(0)
    x, y = torch.rand(6, 1, 28, 28), torch.randint(0, 10, (6,))
    exchange(client, server, x, y, step=0)

    left, right = take_strip(x, 2, 0), take_strip(x, 2, 1)
    nn.functional.cross_entropy(top(torch.cat([bottoms[0](left), bottoms[1](right)], dim=-1)), y).backward()
    explicit = [p for c in client.clients for p in c.model.parameters()] + list(server.model.parameters())
    joint = [p for m in bottoms for p in m.parameters()] + list(top.parameters())
    for p, q in zip(explicit, joint):
        assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7)
    (kept,) = server.seen.entries                       # the server saw the two halves' activations side by side
    assert kept.shape == (6, *joined)


def test_each_party_sees_only_its_strip_and_gets_its_slice_of_the_gradient():
    seen = []

    class Spy(ClientDefence):
        def on_input(self, x, training):
            seen.append(x.clone())
            return x

        def on_gradient(self, g):
            seen.append(g.clone())
            return g

    config = TrainConfig(arch="small-mlp", parties=2, device="cpu")
    client, server = build_parties(config, torch.device("cpu"))
    client.clients[1].defences = (Spy(),)
    x = torch.rand(3, 1, 28, 28)
    h = client.send(x, 0)
    g = server.respond(h, torch.tensor([1, 2, 3]))
    client.receive(g)
    assert torch.equal(seen[0], x[..., 14:])
    assert torch.equal(seen[1], g.tensor[:, 10:])       # party 1's slice of the joined dL/dH


def test_the_orthogonal_defence_is_drawn_per_party_for_its_strip():
    client, _ = build_parties(TrainConfig(arch="mlp", parties=2, defence="orthogonal", device="cpu"),
                              torch.device("cpu"))
    for party in client.clients:
        (defence,) = party.defences
        assert isinstance(defence, OrthogonalTransform) and defence.matrix.shape == (392, 392)


@pytest.mark.parametrize("change,message", [
    ({"arch": "mlp-mixer", "dataset": "cifar10"}, "cannot be split between feature parties"),
    ({"parties": 8}, "cannot take inputs of 1x28x4"),
    ({"cut_layer": 6}, "client layers at cut 6 cannot take inputs of 1x28x14"),
    ({"parties": 29}, "--parties must be >= 1 and <= 28"),
    ({"defence": "patch-orthogonal:patch=4", "parties": 3}, "must divide the image size 28x10"),
])
def test_splits_the_layers_cannot_take_are_refused(change, message):
    with pytest.raises(SplitlabError, match=message):
        TrainConfig(**{"parties": 2, **change})


def test_layouts_refuse_activations_that_cannot_be_joined():
    with pytest.raises(SplitlabError, match="cannot be joined"):
        CutLayout([(8, 24, 10), (8, 12, 10)])


def test_two_parties_train_and_their_checkpoint_evaluates(tmp_path):
    result = runner.invoke(app, ["train", "--arch", "small-mlp", "--parties", "2", "--epochs", "1", "--device", "cpu",
                                 "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    accuracy = json.loads(result.stdout)["metrics"]["accuracy"]
    assert accuracy > 0.4
    evaluated = runner.invoke(app, ["evaluate", "--checkpoint", str(tmp_path / "run" / "checkpoint.pt"), "--json"])
    assert evaluated.exit_code == 0 and json.loads(evaluated.stdout)["metrics"]["accuracy"] == accuracy


@pytest.mark.slow(seconds=55)
def test_two_halves_reach_the_whole_images_accuracy_within_two_points(tmp_path):
    """mnist5k, the CNN at cut 1, 10 epochs (the paper's default), in process: left/right halves against one
    party holding whole images."""
    accuracy = {}
    for parties in (1, 2):
        result = runner.invoke(app, ["train", "--arch", "cnn", "--parties", str(parties), "--epochs", "10",
                                     "--device", "cpu", "--json", "--out", str(tmp_path / str(parties))])
        assert result.exit_code == 0, result.output
        accuracy[parties] = json.loads(result.stdout)["metrics"]["accuracy"]
    assert accuracy[1] > 0.9 and abs(accuracy[2] - accuracy[1]) <= 0.02, accuracy

import pytest
import torch
from torch import nn

from vfl.defences import ActivationNoise, ClientDefence, GradientNoise, parse_defences
from vfl.errors import SplitlabError
from vfl.models import build_split
from vfl.protocol import (Client, CuriousServer, CutGradient, MaliciousServer, Server, Transcript, exchange,
                          make_optimizer)


def _parties(arch, cut, server_cls=Server, lr=0.1, defences=()):
    client_model, server_model = build_split(arch, cut, seed=0)
    client = Client(client_model, make_optimizer("sgd", client_model.parameters(), lr), defences)
    server = server_cls(server_model, make_optimizer("sgd", server_model.parameters(), lr))
    return client, server


@pytest.mark.parametrize("arch,cut", [("cnn", 1), ("cnn", 4), ("mlp", 1), ("mlp", 3)])
def test_explicit_exchange_gives_joint_backprop_gradients(arch, cut):
    torch.manual_seed(1)
    x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
    client, server = _parties(arch, cut, lr=0.0)      # lr 0: the step leaves .grad to compare
    exchange(client, server, x, y, step=0)

    joint_client, joint_server = build_split(arch, cut, seed=0)
    nn.functional.cross_entropy(joint_server(joint_client(x)), y).backward()
    for explicit, joint in [(client.model, joint_client), (server.model, joint_server)]:
        for p, q in zip(explicit.parameters(), joint.parameters()):
            scale = q.grad.abs().max().clamp_min(1e-30)
            assert float((p.grad - q.grad).abs().max() / scale) <= 1e-6


def test_transcript_records_both_directions_with_matching_shapes():
    client, server = _parties("cnn", 1)
    transcript = Transcript()
    for step in range(3):
        exchange(client, server, torch.rand(4, 1, 28, 28), torch.randint(0, 10, (4,)), step, transcript)
    assert [e.sender for e in transcript.entries] == ["client", "server"] * 3
    assert all(e.shape == (4, 8, 24, 24) for e in transcript.entries)
    assert all(e.tensor is None for e in transcript.entries)        # not kept unless asked


def test_curious_server_keeps_exactly_what_was_sent():
    client, server = _parties("mlp", 1, server_cls=CuriousServer)
    x = torch.rand(5, 1, 28, 28)
    with torch.no_grad():
        expected = client.model(x)
    exchange(client, server, x, torch.randint(0, 10, (5,)), step=0)
    (kept,) = server.seen.entries
    torch.testing.assert_close(kept.tensor, expected)


def test_malicious_server_gradient_is_what_the_client_backpropagates():
    client_model, _ = build_split("mlp", 1, seed=0)
    client = Client(client_model, make_optimizer("sgd", client_model.parameters(), 1.0))
    before = client_model[1].bias.detach().clone()
    server = MaliciousServer(lambda h, step: torch.ones_like(h))
    exchange(client, server, torch.rand(3, 1, 28, 28), None, step=0)
    # dL/db = sum over the batch of the returned gradient = 3 for every unit.
    torch.testing.assert_close(client_model[1].bias.detach(), before - 3.0)


def test_client_rejects_gradients_for_other_steps_or_shapes():
    client, server = _parties("mlp", 1)
    h = client.send(torch.rand(2, 1, 28, 28), step=0)
    with pytest.raises(RuntimeError, match="did not send"):
        client.receive(CutGradient(step=1, tensor=torch.zeros_like(h.tensor)))
    with pytest.raises(RuntimeError, match="shape"):
        client.receive(CutGradient(step=0, tensor=torch.zeros(2, 3)))


def test_defence_hooks_are_applied_at_their_points():
    calls = []

    class Spy(ClientDefence):
        def on_input(self, x, training):
            calls.append("input")
            return x * 0                      # the server must then see the bias only
        def on_gradient(self, g):
            calls.append("gradient")
            return g

    client, server = _parties("mlp", 1, server_cls=CuriousServer, defences=[Spy()])
    bias = client.model[1].bias.detach().clone()
    exchange(client, server, torch.rand(2, 1, 28, 28), torch.randint(0, 10, (2,)), step=0)
    assert calls == ["input", "gradient"]
    torch.testing.assert_close(server.seen.entries[0].tensor, bias.expand(2, -1))


def test_noise_defences_perturb_activations_and_gradients():
    torch.manual_seed(0)
    h = torch.zeros(1000)
    assert abs(float(ActivationNoise(0.5).on_activations(h, True).std()) - 0.5) < 0.05
    assert abs(float(GradientNoise(2.0).on_gradient(h).std()) - 2.0) < 0.2
    assert parse_defences("none") == []
    assert isinstance(parse_defences("activation-noise:sigma=0.1")[0], ActivationNoise)
    with pytest.raises(SplitlabError, match="unknown defence"):
        parse_defences("magic")
    with pytest.raises(SplitlabError, match="needs option sigma"):
        parse_defences("received-gradient-noise")
    with pytest.raises(SplitlabError, match="gradient-noise acts at the send-back point .* --send-back"):
        parse_defences("gradient-noise:ratio=1")          # one meaning per name: the label party's


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adam-amsgrad"])
def test_optimizers(name):
    p = nn.Parameter(torch.ones(3))
    opt = make_optimizer(name, [p], 0.1)
    p.sum().backward()
    opt.step()
    assert float(p.detach().max()) < 1.0
    if name == "adam-amsgrad":
        assert opt.param_groups[0]["amsgrad"]
    with pytest.raises(SplitlabError):
        make_optimizer("lion", [p], 0.1)


def test_training_accuracy_on_soft_labels_counts_the_decoded_predictions_against_the_true_labels():
    from torch import nn
    from vfl.defences.send_back import SendBackDefence
    from vfl.protocol import Client, Server, train_epoch

    class Decoder(SendBackDefence):                         # as cae's: the top model's classes are not the task's
        def on_predict(self, scores):
            return scores.roll(1, dims=1)

    torch.manual_seed(0)
    bottom, top = nn.Linear(6, 4), nn.Linear(4, 3)
    client = Client(bottom, torch.optim.SGD(bottom.parameters(), lr=0.0))
    server = Server(top, None, lambda logits, soft: -(soft * logits.log_softmax(1)).sum(1).mean(), [Decoder()])
    x = torch.randn(40, 6)
    with torch.no_grad():
        raw = top(bottom(x)).argmax(1)
    truth = (raw + 1) % 3                                   # what the fixed model predicts, decoded
    confused = nn.functional.one_hot((raw + 2) % 3, 3).float()     # soft labels whose likeliest class is neither
    stats = train_epoch(client, server, [(x[:20], confused[:20], truth[:20]), (x[20:], confused[20:], truth[20:])],
                        torch.device("cpu"))
    assert stats["train_accuracy"] == 1.0


def test_the_transcript_counts_the_bytes_each_side_sent():
    from vfl.protocol import ask

    client, server = _parties("cnn", 1)
    transcript = Transcript()
    exchange(client, server, torch.rand(4, 1, 28, 28), torch.randint(0, 10, (4,)), 0, transcript)
    ask(client, server, torch.rand(3, 1, 28, 28), 1, transcript)
    activations = 4 * 8 * 24 * 24 * 4                        # float32 H, and its gradient back
    assert transcript.bytes_sent() == {"client": activations + 3 * 8 * 24 * 24 * 4, "server": activations + 3 * 8}
    assert [e.nbytes for e in transcript.entries] == [activations, activations, 3 * 8 * 24 * 24 * 4, 3 * 8]

"""FSHA: networks per level, the protocol boundary, the gradient penalty, the attack contract, runs and the CLI."""
import copy
import dataclasses
import json
import math
import os
import re
import signal
import time
from dataclasses import replace

import pytest
import torch
from torch.nn import functional as F
from typer.testing import CliRunner

from attacks.metrics import METRICS_SCHEMA
from attacks import registry
from attacks.result import Reconstruction
from attacks.split.fsha import FSHA, FshaObservation
from attacks.split.fsha.attack import HISTORY_FIELDS, _Server, gradient_penalty, penalty_from_gradient
from attacks.split.session.rounds import LOG_FIELDS
from attacks.split.session.experiment import FshaConfig, run_fsha, victim_for
from vfl.runtime import terminate_as_interrupt
from attacks.split.fsha.images import BatchStream, from_fsha_images, to_dataset_images, to_fsha_images
from attacks.split.fsha.networks import build_attacker, discriminator_cnn
from attacks.split.session.victim import FshaVictim, load_split
from vfl import data as datasets
from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.case import SplitCase
from vfl.fsha_victim import FSHA_DEFAULTS, FSHA_MEANING, RENAMED, FshaCase
from vfl.models.fsha import LEVELS, SETUPS, build_client, feature_shape
from vfl.protocol import Client, ClientSession, CutGradient, MaliciousServer, Transcript
from vfl.runtime import generator, stream_seed

runner = CliRunner()
W = 1 / 16
TINY_ARGS = ["--width", "0.0625", "--batch-size", "8", "--device", "cpu", "--eval-images", "16"]


def settings(name, attack, **overrides):
    return registry.preset(name, attack).settings(**overrides)


def _tiny(arch: str = "resnet", iterations: int = 4, log_every: int = 2, **attack) -> tuple[FshaVictim, FSHA]:
    s = settings("quick", "fsha", iterations=iterations, log_every=log_every, width=W, batch_size=8, **attack)
    return victim_for(s, arch=arch, width=W, batch_size=8, device="cpu", eval_images=16), FSHA(s)


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- networks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("level", LEVELS)
def test_every_level_has_matching_client_pilot_decoder_and_critic_shapes(setup, level):
    shape = feature_shape(level, 1 / 8)
    client = build_client(setup, level, 1 / 8, seed=0)
    nets = build_attacker(setup, shape, 1 / 8, seed=1)
    x = torch.rand(2, 3, 32, 32) * 2 - 1
    h, z = client(x), nets.pilot(x)
    assert tuple(h.shape[1:]) == tuple(z.shape[1:]) == nets.feature_shape == shape
    rec = nets.decoder(z)
    assert rec.shape == x.shape and rec.abs().max() <= 1
    assert nets.discriminator(h).shape == (2, 1)
    if setup == "resnet":
        assert discriminator_cnn(shape, 1 / 8, entry="strided")(h).shape == (2, 1)
    # a server at another width still speaks the client's feature space
    assert tuple(build_attacker(setup, shape, 1 / 4).pilot(x).shape[1:]) == shape


def test_full_size_feature_shapes_and_parameter_counts():
    assert [feature_shape(level) for level in LEVELS] == [(64, 16, 16), (128, 8, 8), (128, 8, 8), (256, 4, 4)]
    with torch.device("meta"):                      # counts without allocating 100M parameters
        client4, client1 = build_client("mlp", 4), build_client("mlp", 1)
        mlp4, mlp1 = build_attacker("mlp", feature_shape(4)), build_attacker("mlp", feature_shape(1))
        resnet4 = build_client("resnet", 4)
    # JAST (arXiv 2412.11689) section 4.2: level 4 client ~22.0M, pilot ~31.5M, D ~50.3M; level 1 client ~59.8M, D ~100.7M
    millions = lambda m: round(_count(m) / 1e6, 1)
    assert (millions(client4), millions(mlp4.pilot), millions(mlp4.discriminator)) == (22.0, 31.5, 50.3)
    assert (millions(client1), millions(mlp1.discriminator)) == (59.8, 100.7)
    # the MLP client's last layer is a dense linear cut layer emitting the whole feature
    assert isinstance(client4[3], torch.nn.Linear) and client4[3].out_features == 4096
    assert _count(resnet4) < _count(client4) / 10


def test_client_and_attacker_initialise_from_their_own_seeds_without_global_seeding():
    state = torch.random.get_rng_state()
    a, b = build_client("resnet", 4, W, seed=0), build_client("resnet", 4, W, seed=0)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert torch.equal(torch.random.get_rng_state(), state)          # the caller's stream is untouched
    v, attack = _tiny(iterations=1, log_every=1)
    run_fsha(v, attack, seed=0, progress=False)
    assert torch.equal(torch.random.get_rng_state(), state)


# --- presets, images, penalty ---------------------------------------------------------------------------

def test_presets_carry_the_papers_numbers():
    paper = settings("paper", "fsha")
    assert (paper.lr_pilot, paper.lr_discriminator) == (1e-5, 1e-4)
    assert (paper.batch_size, paper.gp_weight, paper.loss) == (64, 500.0, "wgan")
    assert paper.iterations == 3000 and paper.preset == "fsha.paper"
    assert paper.width == 1.0 and paper.adam_eps == 1e-7 and paper.gp_norm == "full"
    victim = victim_for(paper)
    assert (victim.cut_layer, victim.lr, victim.batch_size, victim.adam_eps) == (4, 1e-5, 64, 1e-7)
    fashion = settings("fsha.paper-fashion", "fsha")
    assert fashion.iterations == 5000 and victim_for(fashion).dataset == "fashion-mnist"
    quick = settings("quick", "fsha")
    assert (quick.preset, quick.iterations, quick.batch_size, quick.width, quick.lr_pilot, quick.lr_discriminator,
            quick.log_every) == ("fsha.quick", 1000, 32, 0.25, 1e-4, 1e-3, 50)
    assert quick.loss == "wgan" and quick.gp_weight == 500.0
    v = victim_for(quick, arch="mlp")
    assert (v.arch, v.cut_layer, v.batch_size, v.width, v.lr) == ("mlp", 4, 32, 0.25, 1e-4)
    for field in ("iterations", "batch_size", "lr_pilot", "lr_discriminator", "adam_eps", "loss", "gp_weight",
                  "gp_norm", "width", "discriminator_entry", "log_every"):
        assert field in type(quick).__dataclass_fields__          # the attack's settings only
    assert not {"arch", "cut_layer", "dataset", "lr", "seed", "device"} & set(type(quick).__dataclass_fields__)


def test_images_become_3x32x32_in_minus_one_one_and_back():
    x = torch.rand(5, 1, 28, 28)
    y = to_fsha_images(x)
    assert y.shape == (5, 3, 32, 32) and y.min() >= -1 and y.max() <= 1
    assert torch.equal(y[:, 0], y[:, 2])
    z = torch.rand(2, 3, 32, 32)
    assert torch.allclose(from_fsha_images(to_fsha_images(z)), z, atol=1e-6)
    assert torch.allclose(to_dataset_images(to_fsha_images(z), (3, 32, 32)), z, atol=1e-6)
    ramp = torch.linspace(0, 1, 28).view(1, 1, 1, 28).expand(2, 1, 28, 28)
    back = to_dataset_images(to_fsha_images(ramp), (1, 28, 28))   # grey: channel mean, resized to the dataset's size
    assert back.shape == ramp.shape and (back - ramp).abs().mean() < 0.01


def test_gradient_penalty_norm_option_full_vs_spatial_on_known_tensors():
    grad = torch.ones(2, 4, 3, 3)
    assert penalty_from_gradient(grad, "full").item() == pytest.approx((6 - 1) ** 2)      # ||g|| = sqrt(36)
    assert penalty_from_gradient(grad, "spatial").item() == pytest.approx((3 - 1) ** 2)   # per channel sqrt(9)

    class Linear(torch.nn.Module):                  # D(z) = <w, z>: its gradient is w at every point
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.full((4, 3, 3), 0.5))

        def forward(self, z):
            return (z * self.w).flatten(1).sum(1, keepdim=True)

    critic, real, fake = Linear(), torch.randn(3, 4, 3, 3), torch.randn(3, 4, 3, 3)
    full = gradient_penalty(critic, real, fake, draws=generator(0), norm="full")
    spatial = gradient_penalty(critic, real, fake, draws=generator(0), norm="spatial")
    assert full.item() == pytest.approx((3 - 1) ** 2) and spatial.item() == pytest.approx((1.5 - 1) ** 2)
    full.backward()                                 # differentiable in the critic (double backprop)
    assert critic.w.grad is not None and critic.w.grad.abs().sum() > 0


# --- the protocol boundary --------------------------------------------------------------------------------

class _SpyClient(Client):
    """The honest client, remembering every object it was handed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = []

    def receive(self, message):
        self.received.append(message)
        super().receive(message)


class _SpySession:
    """Only what a ClientSession offers the server, recording every tensor handed to the attacker."""

    def __init__(self, real: ClientSession):
        self._real = real
        self.handed: list[torch.Tensor] = []

    def round(self, choose_gradient):
        def spied(h, step):
            self.handed.append(h.detach().clone())
            return choose_gradient(h, step)
        return self._real.round(spied)

    def target_activations(self):
        h = self._real.target_activations()
        self.handed.append(h.detach().clone())
        return h


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["wgan", "bce"])
def test_client_receives_only_the_adversarial_cut_gradient(loss):
    s = settings("quick", "fsha", loss=loss, width=W, batch_size=8)
    shape = feature_shape(4, W)
    model = build_client("resnet", 4, W, seed=0)
    client = _SpyClient(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    public, private = torch.rand(40, 1, 28, 28), torch.rand(40, 1, 28, 28)
    server = _Server(s, build_attacker("resnet", shape, W, seed=1), public, 0, torch.device("cpu"))
    sent = []

    def choose(h, step):                            # check the gradient against an independent copy of D
        critic = copy.deepcopy(server.discriminator)
        hh = h.detach().clone().requires_grad_(True)
        d = critic(hh)
        target = d.mean() if loss == "wgan" else F.binary_cross_entropy_with_logits(d, torch.ones_like(d))
        (expected,) = torch.autograd.grad(target, hh)
        sent.append(h.shape)
        g = server.choose_gradient(h, step)
        assert torch.allclose(g, expected, atol=1e-6, rtol=1e-4)
        return g

    transcript = Transcript(keep_tensors=True)
    session = ClientSession(client, BatchStream(private, 8, generator(0), torch.device("cpu")),
                            to_fsha_images(private[:10]), transcript)
    before = [p.detach().clone() for p in model.parameters()]
    assert [session.round(choose) for _ in range(3)] == [0, 1, 2]

    assert all(type(m) is CutGradient for m in client.received) and len(client.received) == 3
    received, sent_entries = transcript.received_by_client(), transcript.sent_by_client()
    assert [e.kind for e in received] == ["cut_gradient"] * 3 and [e.kind for e in sent_entries] == ["activations"] * 3
    assert len(transcript.entries) == 6
    for mine, theirs, shape_sent in zip(received, sent_entries, sent):
        assert mine.step == theirs.step and mine.shape == theirs.shape == tuple(shape_sent) == (8, *shape)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))   # it did train
    assert session.target_activations().shape == (10, *shape)


@pytest.mark.slow
def test_the_attack_never_receives_a_private_image():
    """The server gets public images, a feature shape, the client family, and through the session only
    activations: no tensor it is handed equals (or has the shape of) a private image; public and private
    images are disjoint; the client receives only cut gradients."""
    private, public = datasets.private_public_split("mnist5k")
    hashes = lambda images: {x.numpy().tobytes() for x in images}
    assert not hashes(private.images) & hashes(public.images)            # disjoint splits
    private_images = private.images[:64]
    model = build_client("mlp", 4, W, seed=0)
    client = _SpyClient(model, torch.optim.Adam(model.parameters(), lr=1e-4))
    targets, _ = datasets.first_of_each_class(private)
    transcript = Transcript()
    spy = _SpySession(ClientSession(client, BatchStream(private_images, 8, generator(0), torch.device("cpu")),
                                    to_fsha_images(targets), transcript))
    shape = feature_shape(4, W)
    observation = FshaObservation(public.images[:64], shape, spy, "mlp")
    s = settings("quick", "fsha", iterations=3, log_every=1, width=W, batch_size=8)
    rec = FSHA(s)(observation, seed=0)

    assert set(vars(observation)) == {"public_images", "feature_shape", "session", "client_arch"}
    assert len(spy.handed) == 4                                            # 3 rounds + the targets at the end
    forms = [private_images, to_fsha_images(private_images), targets, to_fsha_images(targets)]
    for tensor in spy.handed:
        assert tuple(tensor.shape[1:]) == shape                            # activations, never images
        flat = tensor.flatten(1)
        for form in forms:
            if form.flatten(1).shape[1] == flat.shape[1]:
                assert not (torch.cdist(flat, form.flatten(1)) == 0).any()
    assert all(type(m) is CutGradient for m in client.received) and len(client.received) == 3
    assert {e.kind for e in transcript.received_by_client()} == {"cut_gradient"}
    assert isinstance(rec, Reconstruction) and rec.per_target and rec.trials.shape == (10, 1, 1, 28, 28)


@pytest.mark.slow
def test_the_observation_a_run_hands_the_attack_has_only_public_images_and_no_label_reaches_the_server(monkeypatch):
    """What `run_fsha` hands the attacker: public images disjoint from every private image the client
    trains on; and in every round the malicious server's label slot stays empty."""
    victim, attack = _tiny("mlp", iterations=2)
    handed = []
    call = FSHA.__call__
    monkeypatch.setattr(FSHA, "__call__", lambda self, observation, **kw: handed.append(observation) or
                        call(self, observation, **kw))
    labels_seen = []
    respond = MaliciousServer.respond
    monkeypatch.setattr(MaliciousServer, "respond",
                        lambda self, message, labels=None: labels_seen.append(labels) or respond(self, message, labels))
    run_fsha(victim, attack, seed=0, progress=False)
    private, _ = load_split(victim)
    hashes = lambda images: {x.cpu().numpy().tobytes() for x in images}
    assert len(handed) == 1 and not hashes(handed[0].public_images) & hashes(private.images)
    assert len(labels_seen) == 2 and all(labels is None for labels in labels_seen)


# --- the attack contract and the experiment ------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("arch", SETUPS)
def test_tiny_run_logs_errors_and_records_only_gradients(arch):
    victim, attack = _tiny(arch)
    outcome = run_fsha(victim, attack, progress=False)
    m, rec = outcome.metrics, outcome.reconstruction
    e = m["extras"]
    assert [row["iteration"] for row in e["log"]] == [2, 4]
    for row in e["log"]:
        assert set(row) == {"iteration", *LOG_FIELDS}
        assert row["reconstruction_mse01"] == pytest.approx(row["reconstruction_mse"] / 4, rel=1e-4)
        assert all(math.isfinite(v) for v in row.values())
    assert e["training_interval_mse_pm1_best"] <= e["training_interval_mse_pm1_final"]
    assert e["training_interval_mse01_final"] == pytest.approx(e["training_interval_mse_pm1_final"] / 4, rel=1e-4)
    assert e["encoder_decoder_mse_pm1_final"] == pytest.approx(e["log"][-1]["encoder_decoder_mse"], rel=1e-5)
    assert e["transcript"] == {"sent_by_client": 4, "received_by_client": 4, "received_kinds": ["cut_gradient"]}
    assert {"reconstruction_mse_pm1", "reconstruction_mse01", "control_mse_pm1", "control_mse01",
            "image_mse"} <= set(e["eval"])
    # the contract: per-target, on the dataset's own scale and shape, history per step on the device
    assert rec.attack == "fsha" and rec.per_target and rec.steps == 4 and m["steps"] == 4
    assert rec.trials.shape == rec.initial.shape == (10, 1, 1, 28, 28) and outcome.targets.shape == (10, 1, 28, 28)
    assert set(rec.history) == set(HISTORY_FIELDS) and all(v.shape == (4, 1) for v in rec.history.values())
    assert -0.01 <= rec.trials.min() and rec.trials.max() <= 1.01
    # image_mse is attacks.metrics.score's: clamped [0,1] MSE of the targets, as for UnSplit
    expected = ((rec.images.clamp(0, 1) - outcome.targets) ** 2).flatten(1).mean(1).mean()
    assert m["image_mse"] == pytest.approx(float(expected), rel=1e-5)
    assert m["arch"] == arch and m["level"] == 4 and m["dataset"] == "mnist5k"


@pytest.mark.slow
def test_interrupted_run_still_reports_what_it_reached(monkeypatch):
    real_round = ClientSession.round

    def round_then_interrupt(self, choose_gradient):
        if self._step == 3:
            raise KeyboardInterrupt
        return real_round(self, choose_gradient)

    monkeypatch.setattr(ClientSession, "round", round_then_interrupt)
    victim, attack = _tiny(iterations=10)
    with pytest.raises(KeyboardInterrupt):                   # by default Ctrl-C stops the caller (compare)
        run_fsha(victim, attack, progress=False)
    outcome = run_fsha(victim, attack, progress=False, interruptible=True)
    e = outcome.metrics["extras"]
    assert e["interrupted"] and outcome.metrics["steps"] == 3 and e["rounds"] == 3
    assert [row["iteration"] for row in e["log"]] == [2, 3]      # the partial interval is logged too
    assert math.isfinite(e["training_interval_mse_pm1_final"]) and outcome.reconstruction.trials.shape[0] == 10
    assert outcome.metrics["image_mse"] is not None


@pytest.mark.slow
def test_a_monitor_that_finds_divergence_stops_the_attack():
    victim, attack = _tiny(iterations=6, log_every=2)
    private, public = datasets.private_public_split("mnist5k")
    model = build_client("resnet", 4, W, seed=0)
    session = ClientSession(Client(model, torch.optim.Adam(model.parameters(), lr=1e-4)),
                            BatchStream(private.images[:32], 8, generator(0), torch.device("cpu")),
                            to_fsha_images(private.images[:10]))
    seen = []

    def monitor(step, reconstruction, losses):
        seen.append((step, tuple(reconstruction.shape), tuple(losses.shape)))
        return step == 2                                     # "non-finite" at the first check

    rec = attack(FshaObservation(public.images[:32], feature_shape(4, W), session), seed=0, monitor=monitor)
    assert seen == [(1, (8, 3, 32, 32), (3,)), (2, (8, 3, 32, 32), (3,))]
    assert rec.extras["diverged_at"] == 2 and rec.steps == 2 and bool(rec.diverged.all())
    assert rec.extras["encoder_decoder_mse_pm1_final"] is None


@pytest.mark.slow
def test_same_seed_same_metrics_and_the_attack_seed_is_its_own():
    victim, attack = _tiny(iterations=2, log_every=1)
    timing = {"seconds", "seconds_per_step"}

    def numbers(outcome):
        m = {k: v for k, v in outcome.metrics.items() if k not in timing}
        m["extras"] = {k: v for k, v in m["extras"].items() if k != "iterations_per_second"}
        return m

    first, second = (run_fsha(victim, attack, seed=0, progress=False) for _ in range(2))
    assert numbers(first) == numbers(second)
    assert torch.equal(first.reconstruction.trials, second.reconstruction.trials)
    other = run_fsha(victim, attack, seed=1, progress=False)
    assert not torch.equal(first.reconstruction.trials, other.reconstruction.trials)
    # the attacker's networks do not copy the client's initialisation at the same seed
    client = build_client("resnet", 4, W, seed=0)
    pilot = build_attacker("resnet", feature_shape(4, W), W, seed=stream_seed(0, "networks")).pilot
    assert client[0].weight.shape == pilot[0].weight.shape and not torch.equal(client[0].weight, pilot[0].weight)


# Pre-refactor numbers (tree 4ba6cd7, old API: settings_from("quick", arch=..., iterations=4, log_every=2,
# width=1/16, batch_size=8, device="cpu", eval_images=16)): the log rows and the eval.
_OLD_TINY = {
    "resnet": ([(-3.1020188331604004, 0.8810425996780396, 228.1314697265625, 0.8980928659439087),
                (-0.9697116613388062, 0.8681597709655762, 30.075088500976562, 0.8945497274398804)],
               (0.8832852244377136, 0.8825597763061523)),
    "mlp": ([(0.12470690906047821, 0.8830729722976685, 114.29620361328125, 0.8931974768638611),
             (-1.2117183208465576, 0.8675218820571899, 50.24981689453125, 0.8930873870849609)],
            (0.8986346125602722, 0.8812643885612488)),
}


@pytest.mark.parametrize("arch", SETUPS)
def test_under_the_old_seeding_the_new_code_gives_the_old_numbers(arch, monkeypatch):
    """The refactor changed the numbers only by giving victim and attacker their own seeds: with the old
    seeding put back (one global seed; client, pilot, decoder, critic built in that order; one generator
    for both batch orders; penalty draws continuing the global stream) the old log and eval come back."""
    from attacks.split.fsha import attack as server, networks as nets
    from vfl import fsha_victim as client_side
    victim, attack = _tiny(arch)                     # built first: the victim's check counts parameters on meta
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    shape = feature_shape(4, W)
    client = build_client(arch, 4, W)
    if arch == "resnet":
        attacker = nets.AttackerNetworks(nets.pilot_cnn(shape, W), nets.decoder(shape, W),
                                         nets.discriminator_cnn(shape, W), shape)
    else:
        attacker = nets.AttackerNetworks(nets.pilot_mlp(shape, W), nets.decoder(shape, W),
                                         nets.discriminator_mlp(shape, W), shape)
    penalty = torch.Generator()
    penalty.set_state(torch.random.get_rng_state())
    torch.random.set_rng_state(state)
    shared = generator(0)
    streams = iter([shared, penalty])                # _Server: public order, penalty
    monkeypatch.setattr(client_side, "build_client", lambda *a, **k: client)
    monkeypatch.setattr(client_side, "generator", lambda seed: shared)      # honest_client: private order
    monkeypatch.setattr(server, "build_attacker", lambda *a, **k: attacker)
    monkeypatch.setattr(server, "generator", lambda seed: next(streams))
    e = run_fsha(victim, attack, progress=False).metrics["extras"]
    rows, (rec, ctl) = _OLD_TINY[arch]
    for got, (client_loss, ae, critic_loss, reconstruction) in zip(e["log"], rows):
        # MSEs to 1e-4; the critic's scores are differences of large numbers, so they get 1e-2 absolute
        # (the thread count moves them by ~1e-3; another seeding moves them by tens)
        assert (got["encoder_decoder_mse"], got["reconstruction_mse"]) == pytest.approx((ae, reconstruction), rel=1e-4)
        assert (got["client_loss"], got["discriminator_loss"]) == pytest.approx((client_loss, critic_loss), abs=1e-2)
    assert (e["eval"]["reconstruction_mse_pm1"], e["eval"]["control_mse_pm1"]) == pytest.approx((rec, ctl), rel=1e-4)


# --- the command ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_writes_metrics_with_the_schema_curves_and_grids(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["attack", "fsha", "--arch", "mlp", "--iterations", "4", "--log-every", "2",
                                    *TINY_ARGS, "--gp-norm", "spatial", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["metrics"]["steps"] == 4 and [r["iteration"] for r in record["metrics"]["extras"]["log"]] == [2, 4]
    assert {"config.json", "metrics.json", "curves.png", "reconstruction.png", "reconstruction_control.png",
            "loss_curve.png", "reconstruction.pt", "run.log"} <= {p.name for p in out.iterdir()}
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(METRICS_SCHEMA) <= set(metrics), set(METRICS_SCHEMA) - set(metrics)
    assert metrics["attack"] == "fsha" and metrics["preset"] == "fsha.quick" and metrics["per_target"]
    for key in ("training_interval_mse_pm1_final", "training_interval_mse_pm1_best", "training_interval_mse01_final",
                "training_interval_mse01_best", "encoder_decoder_mse_pm1_final", "discriminator_loss_final",
                "client_loss_final", "iterations_per_second"):
        assert isinstance(metrics["extras"][key], float), key
    assert isinstance(metrics["image_mse"], float) and 0 <= metrics["image_mse"] <= 1
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["victim"]["arch"] == "mlp" and config["settings"]["gp_norm"] == "spatial" and config["device"] == "cpu"
    assert config["settings"]["preset"] == "fsha.quick" and config["settings"]["width"] == W
    grid = torch.load(out / "reconstruction.pt", weights_only=True)
    assert grid["originals"].shape == grid["reconstructions"].shape == grid["controls"].shape == (10, 1, 28, 28)


def _fsha_help() -> str:
    result = runner.invoke(app, ["attack", "fsha", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    return " ".join(result.output.split())


def test_cli_help_lists_every_option_and_the_defaults_that_do_not_depend_on_the_preset():
    from vfl.options import flag_of, options_of
    from attacks.split.fsha import FshaSettings
    text = _fsha_help()
    assert "(default fsha.quick)" in text                       # the preset run without --preset
    assert re.search(r"--arch [^│]*\[default: \(?resnet\)?\]", text)
    assert re.search(r"--cut-layer [^│]*\[default: \(?4\)?\]", text)
    hidden = ("seed", "device", "data_root", *FshaConfig.victim_hidden)
    for cls in (FshaSettings, FshaVictim):
        for field, opt in options_of(cls):
            if field.name not in hidden:
                shown = FSHA_MEANING.get(field.name, opt.help) if cls is FshaVictim else opt.help
                assert flag_of(field, opt) in text and " ".join(shown.split()) in text, field.name
    for old in RENAMED:                                          # earlier names: taken, not shown
        assert f"--{old.replace('_', '-')} " not in text


def test_cli_help_shows_the_client_learning_rate_each_preset_runs():
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", _fsha_help()).split())
    for preset in ("quick", "paper"):
        assert f"{preset} {victim_for(settings(preset, 'fsha')).lr:g}" in text


@pytest.mark.parametrize("args,message", [
    (["--preset", "fast"], "unknown preset 'fast' for fsha"),
    (["--preset", "unsplit.jast"], "preset unsplit.jast is for attack unsplit, not fsha"),
    (["--arch", "vit"], "--arch must be one of resnet, mlp"),
    (["--dataset", "imagenet"], "unknown dataset"),
    (["--cut-layer", "5"], "--cut-layer must be >= 1 and <= 4, got 5"),
    (["--cut-layer", "0"], "--cut-layer must be >= 1 and <= 4, got 0"),
    (["--level", "5"], "--cut-layer must be >= 1 and <= 4, got 5"),          # its earlier name, still taken
    (["--level", "4", "--cut-layer", "4"], "--level is the earlier name of --cut-layer: give only one of them"),
    (["--optimizer", "sgd"], "No such option"),
    (["--loss", "hinge"], "--loss must be one of wgan, bce"),
    (["--gp-norm", "l1"], "--gp-norm must be one of full, spatial"),
    (["--iterations", "0"], "--iterations must be >= 1"),
    (["--width", "-1"], "--width must be > 0"),
    (["--lr-pilot", "nan"], "--lr-pilot must be finite"),
    (["--lr", "inf"], "--lr must be finite"),
    (["--lr-client", "inf"], "--lr must be finite"),
    (["--gp-weight", "-1"], "--gp-weight must be >= 0"),
    (["--eval-images", "0"], "--eval-images must be >= 1"),
    (["--batch-size", "5000"], "fewer than --batch-size 5000"),
    (["--transport", "udp"], "--transport must be one of local, tcp"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "run"
    result = runner.invoke(app, ["attack", "fsha", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_the_client_is_the_split_case_with_fshas_defaults():
    """One vocabulary: FSHA's client is the case (its cut layer is FSHA's split level, its lr the client's Adam
    rate), FSHA's own field is its model family's width; the defaults are FSHA's, the earlier names aliases."""
    case = {f.name for f in dataclasses.fields(SplitCase)}
    assert issubclass(FshaVictim, SplitCase) and set(f.name for f in dataclasses.fields(FshaCase)) - case == \
        {"width", "adam_eps"}
    client = FshaCase()
    assert {k: getattr(client, k) for k in FSHA_DEFAULTS} == {"arch": "resnet", "cut_layer": 4, "lr": 1e-5,
                                                               "optimizer": "adam"}
    assert SplitCase().cut_layer == 1 and SplitCase().lr == 1e-3            # the case's own defaults unchanged
    quick = settings("quick", "fsha")
    assert victim_for(quick, level=2, lr_client=3e-4) == victim_for(quick, cut_layer=2, lr=3e-4)
    assert FshaConfig.of(preset="fsha.quick", level=2).victim_config.cut_layer == 2
    with pytest.raises(SplitlabError, match="--lr-client is the earlier name of --lr: give only one of them"):
        victim_for(quick, lr_client=1e-4, lr=1e-4)


def test_victim_and_settings_refuse_bad_numbers_when_built():
    with pytest.raises(SplitlabError, match="--lr must be finite"):
        FshaVictim(lr=float("nan"))
    with pytest.raises(SplitlabError, match="--epochs 3: FSHA's client does not take it"):
        FshaVictim(epochs=3)
    with pytest.raises(SplitlabError, match="--log-every must be an integer"):
        settings("quick", "fsha", log_every=2.5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tiny_run_on_cuda_is_finite_and_close_to_cpu_at_the_first_log():
    victim, attack = _tiny(iterations=2, log_every=1)
    gpu = run_fsha(replace(victim, device="cuda"), attack, progress=False).metrics["extras"]
    cpu = run_fsha(victim, attack, progress=False).metrics["extras"]
    assert gpu["device"].startswith("cuda") and all(math.isfinite(v) for v in gpu["log"][-1].values())
    # same seeds, data order and penalty draws; the first step precedes any update (cuDNN may use TF32)
    assert gpu["log"][0]["encoder_decoder_mse"] == pytest.approx(cpu["log"][0]["encoder_decoder_mse"], rel=1e-2)


def test_first_sigterm_interrupts_like_ctrl_c_and_hands_the_signal_back():
    def previous(signum, frame):
        raise AssertionError("reached the previous handler")

    before = signal.signal(signal.SIGTERM, previous)
    try:
        with terminate_as_interrupt():
            assert signal.getsignal(signal.SIGTERM) is not previous
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)                   # the handler runs between bytecodes, well before this ends
            assert signal.getsignal(signal.SIGTERM) is previous    # a second kill is not caught
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, before)

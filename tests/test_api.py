"""The Python API: results in memory, a run directory only when asked, the same numbers as the command."""
import json

import pytest
from typer.testing import CliRunner

from attacks.metrics import METRICS_SCHEMA
from splitlab import api
from splitlab.cli import app
from vfl.errors import SplitlabError


@pytest.mark.slow
def test_train_then_unsplit_in_memory_and_into_a_run_directory(tmp_path):
    victim = api.train("small-mlp", epochs=1, device="cpu")
    assert victim.accuracy > 0.3 and not any(tmp_path.iterdir())          # 10 classes: chance is 0.1
    outcome = api.unsplit(victim, preset="quick", iterations=2, out=tmp_path / "run")
    assert set(outcome.metrics) >= set(METRICS_SCHEMA) and outcome.reconstruction.images.shape == (10, 1, 28, 28)
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["image_mse"] == outcome.metrics["image_mse"]
    command = CliRunner().invoke(app, ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset",
                                       "quick", "--iterations", "2", "--device", "cpu", "--json", "--out",
                                       str(tmp_path / "cli")])
    assert json.loads(command.stdout)["metrics"]["image_mse"] == outcome.metrics["image_mse"]


@pytest.mark.slow
def test_hfl_and_bad_input():
    outcome = api.hfl("idlg", arch="lenet", preset="idlg.quick", iterations=3, device="cpu")
    assert outcome.metrics["label_accuracy"] == 1.0 and outcome.reconstruction.n_trials == 4
    with pytest.raises(SplitlabError, match="unknown architecture"):
        api.train("vit")


ARGUMENTS = {    # a call with a wrong argument: (the call, a stable part of the one-line error naming it)
    "attack-a-list": (lambda: api.hfl(["dlg"]), "api.hfl: attack must be text"),
    "options-a-list": (lambda: api.hfl("dlg", options=[1, 2]), "api.hfl: options must be a dict"),
    "victim-a-string": (lambda: api.fsha("resnet", victim="width=0.5"), "api.fsha: victim must be a dict"),
    "preset-a-number": (lambda: api.hfl("dlg", preset=5), "--preset must be text, got 5"),
    "compile-a-bool": (lambda: api.hfl("dlg", compile=True), "--compile must be one of off, on, auto, got True"),
    "parties-a-string": (lambda: api.train("small-mlp", epochs=1, parties="2"), "--parties must be an integer"),
    "clients-a-float": (lambda: api.hfl("tgias-ro", clients=4.5), "--clients must be an integer, got 4.5"),
    "iterations-a-tensor": (lambda: api.hfl("dlg", iterations=__import__("torch").tensor(2)),
                            "--iterations must be an integer"),
    "preset-a-list": (lambda: api.unsplit("missing.pt", preset=["quick"]), "api.unsplit: preset must be text"),
    "ratio-a-string": (lambda: api.hfl("fedleak", ratio="0.5"), "--ratio must be a number, got '0.5'"),
    "out-a-float": (lambda: api.hfl("dlg", out=3.5), "api.hfl: out must be a folder path"),
    "seed-negative": (lambda: api.fsha("mlp", seed=-1), "api.fsha: seed must be >= 0"),
}


@pytest.mark.parametrize("name", list(ARGUMENTS))
def test_a_wrong_argument_is_the_labs_one_line_error_naming_it(name):
    call, message = ARGUMENTS[name]
    with pytest.raises(SplitlabError) as error:
        call()
    assert message in str(error.value) and len(str(error.value).splitlines()) == 1

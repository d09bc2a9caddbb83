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

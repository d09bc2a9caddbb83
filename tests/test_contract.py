"""One contract: every attack is a class with a name, what it observes, frozen settings from the one
preset registry, and `__call__(observation, *, seed, ...) -> Reconstruction`; every command that attacks
writes metrics.json with the schema the README documents."""
import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attacks.hfl.dlg import DLG
from attacks.hfl.invgrad import InvertingGradients
from attacks.metrics import METRICS_SCHEMA
from attacks.presets import DEFAULT_PRESET, PRESETS
from attacks.split.fsha import FSHA
from attacks.split.unsplit import UnSplit
from splitlab.cli import app

runner = CliRunner()
README = Path(__file__).resolve().parents[1] / "README.md"

COMMANDS = {
    "dlg": ["hfl", "--attack", "dlg", "--preset", "dlg.quick", "--iterations", "2", "--restarts", "2"],
    "idlg": ["hfl", "--attack", "idlg", "--preset", "idlg.quick", "--iterations", "2", "--batch-size", "2"],
    "invgrad": ["hfl", "--attack", "invgrad", "--arch", "convnet", "--preset", "invgrad.quick", "--iterations", "3"],
    "unsplit": ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset", "quick", "--iterations", "1"],
    "fsha": ["attack", "fsha", "--iterations", "2", "--log-every", "1", "--width", "0.0625", "--batch-size", "8",
             "--eval-images", "16"],
}


@pytest.mark.parametrize("cls", [DLG, InvertingGradients, UnSplit, FSHA])
def test_every_attack_is_one_class_on_the_contract(cls):
    attack = cls()
    assert isinstance(attack.name, str) and attack.observes
    assert dataclasses.is_dataclass(attack.settings) and attack.settings.__dataclass_params__.frozen
    parameters = inspect.signature(cls.__call__).parameters
    assert parameters["seed"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "Reconstruction" in str(inspect.signature(cls.__call__).return_annotation)


def test_one_registry_of_dotted_presets_with_sources():
    for name, entry in PRESETS.items():
        assert name == f"{entry.attack}.{name.split('.', 1)[1]}" and entry.source
        settings = entry.settings()
        assert dataclasses.is_dataclass(settings)
        assert getattr(settings, "name", getattr(settings, "preset", None)) == name
    assert set(DEFAULT_PRESET) == {p.attack for p in PRESETS.values()}


def test_the_readme_documents_exactly_the_schema():
    table = README.read_text().split("### metrics.json", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_0-9]+)` \|", table, flags=re.M))
    assert documented == set(METRICS_SCHEMA)


@pytest.mark.parametrize("attack", list(COMMANDS))
def test_every_attack_runs_through_the_driver_and_writes_the_schema(tmp_path, attack):
    result = runner.invoke(app, [*COMMANDS[attack], "--device", "cpu", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert set(metrics) >= set(METRICS_SCHEMA), set(METRICS_SCHEMA) - set(metrics)
    assert metrics["attack"] == attack and metrics["preset"].startswith(attack + ".")
    assert set(metrics["baselines"]) == {"zero", "mean", "initial"}
    assert metrics["image_mse"] is None or 0 <= metrics["image_mse"] <= 1
    for name in ("reconstruction.png", "loss_curve.png", "config.json"):
        assert (tmp_path / "run" / name).exists()

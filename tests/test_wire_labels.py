"""The label attacks over the wire: the attacking feature party is a `splitlab client --keep-received` process, the
attack reads only its record, and a fixed seed gives the in-process answer bit for bit; the label victim with a top
model is the training `splitlab train` runs; what the wire cannot host is refused in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from attacks.split.labels.victim import LabelVictim, task_data, train_victim
from attacks.split.labels.wire import wire_config
from splitlab.cli import app
from vfl.training import load_data, train_split

runner = CliRunner()
SMALL = ["--arch", "small-mlp", "--cut-layer", "1", "--epochs", "1", "--device", "cpu"]


def test_the_label_victim_with_a_top_model_is_the_split_training_the_wire_runs():
    victim = LabelVictim(arch="small-mlp", cut_layer=1, epochs=1, seed=3, send_back="max-norm",
                         defence="activation-noise:sigma=0.1", device="cpu")
    in_process = train_victim(victim, task_data(victim), progress=False)
    config = wire_config(victim)
    trained = train_split(config, *load_data(config), progress=False)
    for ours, theirs in [(in_process.client.model, trained.client.model), (in_process.server.model, trained.server.model)]:
        assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))
    assert in_process.accuracy == trained.accuracy


@pytest.mark.slow
def test_label_norm_over_tcp_equals_in_process_from_what_the_party_received(tmp_path):
    def attack(out: Path, *extra: str) -> dict:
        result = runner.invoke(app, ["attack", "label-norm", *SMALL, "--send-back", "max-norm+label-rr:epsilon=4",
                                     *extra, "--out",
                                     str(out), "--json"])
        assert result.exit_code == 0, result.output
        return json.loads((out / "metrics.json").read_text())
    wire, local = attack(tmp_path / "tcp", "--transport", "tcp"), attack(tmp_path / "local")
    for key in ("leak_auc", "label_accuracy", "accuracy", "task_auc", "per_image", "extras", "training_rounds",
                "defence_report"):
        assert wire[key] == local[key], key
    assert wire["defence_report"]["label_dp_epsilon"] == pytest.approx(4)     # the label party's, as it ran them
    received = torch.load(tmp_path / "tcp" / "party-0" / "received.pt", weights_only=True)
    assert len(received["samples"]) == len(received["gradients"]) == 63          # 4,000 samples, batches of 64
    assert not (tmp_path / "tcp" / "party-0" / "transcript").exists()          # the party kept no one else's data


@pytest.mark.slow
def test_label_direct_on_aggvfl_over_tcp_equals_in_process(tmp_path):
    """The label party with no model (--top none: aggVFL, it sums the class scores) is hosted over TCP too."""
    def attack(out, *extra):
        result = runner.invoke(app, ["attack", "label-direct", "--dataset", "wdbc", "--arch", "tabular-mlp",
                                     "--epochs", "1", "--device", "cpu", *extra, "--out", str(out)])
        assert result.exit_code == 0, result.output
        return json.loads((out / "metrics.json").read_text())
    wire, local = attack(tmp_path / "tcp", "--transport", "tcp"), attack(tmp_path / "local")
    for key in ("leak_auc", "label_accuracy", "accuracy", "task_auc", "per_image", "training_rounds"):
        assert wire[key] == local[key], key
    assert wire["label_accuracy"] > wire["baselines"]["majority"]["label_accuracy"]


@pytest.mark.parametrize("attack,message", [
    ("label-unsplit", "hosts split learning with a top model (--top model)"),
    ("label-active", "needs its own optimiser"),
])
def test_what_the_wire_cannot_host_is_refused_in_one_line(attack, message, tmp_path):
    result = runner.invoke(app, ["attack", attack, *SMALL, "--transport", "tcp", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_keep_received_is_one_whole_session_of_a_feature_party(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("x" * 8 + "0123456789abcdefghijklmnopqrstuvwxyz\n")
    secret.chmod(0o600)
    for extra, message in [(["--kind", "fsha"], "FSHA's victim does not take it"), (["--resume"], "or --resume")]:
        result = runner.invoke(app, ["client", "--keep-received", "--secret-file", str(secret), *extra, "--out",
                                     str(tmp_path / "run")])
        assert result.exit_code == 2 and message in result.output, result.output

"""`--overwrite` replaces the lab's own runs, whatever the command wrote: a run's ownership record (its marker)
lists every file and folder the run wrote, checkpoints, transcripts and the sub-runs of `train --transport tcp`
included, and a resumed run goes on recording. Nothing the lab did not write is ever removed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.runs import MARKER_NAME, Run
from vfl.wire.checkpoints import EpochCheckpoints

runner = CliRunner()


def _train(out: Path, *extra: str):
    return runner.invoke(app, ["train", "--arch", "small-mlp", "--epochs", "1", "--device", "cpu", "--json", "--out",
                               str(out), *extra])


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_curious_training_run_is_replaced_by_overwrite(tmp_path):
    out = tmp_path / "run"
    assert _train(out, "--role", "curious").exit_code == 0
    assert (out / "transcript" / "final.pt").is_file()
    again = _train(out, "--role", "curious", "--overwrite")
    assert again.exit_code == 0, again.output
    (out / "transcript" / "notes.txt").write_text("mine")            # a file the lab did not write: kept, refused
    refused = _train(out, "--overwrite")
    assert refused.exit_code == 2 and "notes.txt, which splitlab did not write" in refused.stderr
    assert (out / "transcript" / "notes.txt").read_text() == "mine"


def test_a_resumed_run_records_what_it_writes(tmp_path):
    with Run.create("client", {}, tmp_path / "r") as run:
        EpochCheckpoints(run).save(1, {"model": {}})
    with Run.reopen("client", tmp_path / "r") as run:
        EpochCheckpoints(run).save(2, {"model": {}})
        run.write_json("later.json", {})
    recorded = json.loads((tmp_path / "r" / MARKER_NAME).read_text())["files"]
    assert {"checkpoints/epoch-0001.pt", "checkpoints/epoch-0002.pt", "later.json"} <= set(recorded)
    with Run.create("client", {}, tmp_path / "r", overwrite=True):
        pass
    assert not (tmp_path / "r" / "checkpoints").exists() and not (tmp_path / "r" / "later.json").exists()


@pytest.mark.slow
def test_a_tcp_training_run_and_its_server_and_client_runs_are_replaced_by_overwrite(tmp_path):
    """`train --transport tcp` writes a `serve` run (server/) and a `client` run (party-0/) inside its own; each
    is replaced by its own command's --overwrite (they then stop at once: no peer within --timeout 1), and the
    whole by `train --overwrite`."""
    out = tmp_path / "run"
    first = _train(out, "--transport", "tcp")
    assert first.exit_code == 0, first.output
    assert (out / "server" / "checkpoints").is_dir() and (out / "party-0" / "checkpoints").is_dir()
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef" * 3)
    secret.chmod(0o600)
    serve = runner.invoke(app, ["serve", "--listen", "127.0.0.1:0", "--secret-file", str(secret), "--arch",
                                "small-mlp", "--timeout", "1", "--out", str(out / "server"), "--overwrite", "--json"])
    assert serve.exit_code == 2 and "no client joined as party 0 within 1 s" in serve.stderr, serve.stderr
    assert not (out / "server" / "checkpoints").exists() and not (out / "server" / "top.pt").exists()
    client = runner.invoke(app, ["client", "--connect", "127.0.0.1:9", "--secret-file", str(secret), "--arch",
                                 "small-mlp", "--timeout", "1", "--out", str(out / "party-0"), "--overwrite", "--json"])
    assert client.exit_code == 2 and "no splitlab server answered" in client.stderr, client.stderr
    assert not (out / "party-0" / "bottom.pt").exists()
    again = _train(out, "--transport", "tcp", "--overwrite")
    assert again.exit_code == 0, again.output
    assert {"server", "party-0", "checkpoint.pt"} <= _files(out)
    assert torch.load(out / "party-0" / "bottom.pt", weights_only=True)["epoch"] == 1

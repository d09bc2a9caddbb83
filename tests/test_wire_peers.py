"""Peers that hold a key and misbehave, on 127.0.0.1 with bounded timeouts: each side bounds what it accepts by
its own limits, whatever the peer declares (a header before anything is allocated, a payload longer than its
header, a malicious server's terms, indices and frames against a `splitlab client` process), a resume deletes
and overwrites nothing on the server's word, and what this machine cannot run is refused up front. The
threat model is docs/wire.md's; intruders without the secret are in tests/test_wire_security.py."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.training import TrainConfig, build_client
from vfl.wire import launch
from vfl.wire.checkpoints import EpochCheckpoints
from vfl.wire.client import ClientSettings, _state
from vfl.wire.frames import HEADER, MAGIC, Allow, Expect, Frame, Kind
from vfl.wire.handshake import Listener

from test_wire_security import BATCH, SECRET, SHARED, _session

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
DEADLINE = 120


# --- a peer that holds a key and misbehaves ---------------------------------------------------------------------

def test_a_header_declaring_more_than_this_side_allows_is_refused_before_anything_is_allocated():
    server, client = _session()
    fields = [MAGIC, int(Kind.BATCH), 0, 2, 1, 13_421_772_800, 0, 0, 0, 0, 0]        # 100 GiB of indices
    server.sock.sendall(HEADER.pack(*fields))
    started = time.monotonic()
    with pytest.raises(SplitlabError, match=r"^the server sent a batch shaped 13421772800 \(107,374,182,400 bytes; "
                                            r"at most 512 allowed\) at step 0; the handshake allows 1 to 64 int64"):
        client.receive(BATCH)
    assert time.monotonic() - started < 30        # refused from the header, not after waiting for a payload
    server.close()
    client.close()


def test_a_payload_longer_than_its_header_is_refused_with_one_line():
    server, client = _session()
    rows = torch.zeros(4, 10)
    mac = client._send_mac.start(Frame(Kind.ACTIVATIONS, 0, rows).header())       # the honest MAC of 4 rows
    mac.update(memoryview(rows.numpy()).cast("B"))
    client.sock.sendall(Frame(Kind.ACTIVATIONS, 0, rows).header() + bytes(8 * 10 * 4) + mac.digest())
    with pytest.raises(SplitlabError, match=r"^party 0 sent a frame that failed its authentication"):
        server.receive(Expect(Allow(Kind.ACTIVATIONS, torch.float32, (4, 10), step=0)))
    server.close()
    client.close()


def _client_run(tmp_path: Path, secret: Path, *, epochs=(3, 4), bottom_epoch: int = 4) -> Path:
    """A finished client run to resume: checkpoints of `epochs` (real states), a bottom.pt of `bottom_epoch`."""
    out = tmp_path / "client"
    config = TrainConfig(arch="small-mlp", device="cpu")
    with Run.create("client", {"client": ClientSettings(train=config, secret_file=str(secret))}, out) as run:
        client = build_client(config, torch.device("cpu"))
        for epoch in epochs:
            EpochCheckpoints(out).save(epoch, _state(client))
        torch.save({"format": "splitlab-bottom/1", "party": 0, "epoch": bottom_epoch,
                    "model": client.model.state_dict()}, run.file("bottom.pt"))
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and p.name not in ("run.log", ".lock", ".splitlab-run.json", "config.json")}


HONEST = {"epochs": 1, "batch_size": 64, "start_epoch": 0,
          "limits": {"train_size": 4000, "test_size": 1000, "batch_size": 64, "classes": 10, "query_rows": 1000}}


def _then_batch(indices):
    return lambda channel: channel.send(Frame(Kind.BATCH, 0, torch.tensor(indices)))


def _then_batches(count: int):
    """`count` honest rounds (zero gradients back), without the epoch's end the terms call for after 63."""
    def then(channel):
        for step in range(count):
            channel.send(Frame(Kind.BATCH, step, torch.arange(64)))
            try:
                channel.receive(Expect(Allow(Kind.ACTIVATIONS, torch.float32, (64, 10), step=step)))
            except SplitlabError:
                return                              # the client refused this round: its ABORT
            channel.send(Frame(Kind.CUT_GRADIENT, step, torch.zeros(64, 10)))
    return then


def _then_raw(data: bytes):
    return lambda channel: channel.sock.sendall(data)


@pytest.mark.slow
@pytest.mark.parametrize("terms,then,resume,refusal", [
    ({**HONEST, "limits": {**HONEST["limits"], "train_size": 10**9, "batch_size": 1_342_177_280}}, None, False,
     "the server's terms say 1000000000/1000 train/test samples of 10 classes; this party holds 4000/1000 of 10; "
     "refused before any tensor was exchanged"),
    ({**HONEST, "limits": {"bogus": 1}}, None, False,
     "the server sent malformed limits in its terms; run the same splitlab on both sides"),
    (HONEST, _then_raw(HEADER.pack(MAGIC, int(Kind.BATCH), 0, 2, 1, 1_342_177_280, 0, 0, 0, 0, 0)), False,
     "the server sent a batch shaped 1342177280 (10,737,418,240 bytes; at most 512 allowed) at step 0; the "
     "handshake allows 1 to 64 int64; refused"),
    (HONEST, _then_batch([0, 10**8]), False, "the server sent a batch with values outside 0 to 3999 at step 0; "
                                             "refused"),
    (HONEST, _then_raw(Frame(Kind.BATCH, 0, torch.arange(2)).header() + bytes(4 * 8) + bytes(32)), False,
     "the server sent a frame that failed its authentication (forged, replayed, or longer than its header "
     "declared); refused"),
    ({**HONEST, "epochs": 4}, None, True, "the server's terms resume after epoch 0, but this party saved epochs "
     "[3, 4]; nothing was deleted (start both sides again without --resume, into new --out folders); refused "
     "before any tensor was exchanged"),
    ({**HONEST, "epochs": 4, "start_epoch": 3}, lambda channel: channel.send(Frame(Kind.BYE)), True,
     "the server ended the session at epoch 3, but {out}/bottom.pt holds the model of epoch 4; kept it (nothing "
     "was overwritten)"),
    ({**HONEST, "epochs": 4, "start_epoch": 3}, lambda channel: (channel.send(Frame(Kind.EPOCH_END, 4)),
                                                                  channel.send(Frame(Kind.BYE))), True,
     "the server ended epoch 4 after 0 of its 63 rounds; refused (no checkpoint was written)"),
    ({**HONEST, "epochs": 1}, _then_batches(64), False,
     "the server sent round 64 of epoch 1, which has 63 by its terms; refused"),
], ids=["huge-limits", "malformed-limits", "10-GiB-header", "bad-index", "overlong", "epoch-0-resume",
        "earlier-model", "resume-then-empty-epoch", "rounds-past-the-epoch"])
def test_a_malicious_server_with_the_key_is_refused_by_the_clients_own_limits(tmp_path, terms, then, resume, refusal):
    secret = tmp_path / "secret"
    secret.write_text(SHARED.decode())
    secret.chmod(0o600)
    out = _client_run(tmp_path, secret) if resume else tmp_path / "client"
    before = _snapshot(out) if resume else {}
    listener = Listener("127.0.0.1", 0, 60)
    client = subprocess.Popen([sys.executable, "-m", "splitlab", "client", "--connect", listener.address,
                               "--secret-file", str(secret), "--arch", "small-mlp", "--device", "cpu", "--timeout",
                               "20", "--out", str(out), "--json", *(["--resume"] if resume else [])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    try:
        (channel,), _ = listener.accept(SECRET, 1, lambda k, body: terms)
        if then is not None:
            then(channel)
        _, err = client.communicate(timeout=DEADLINE)
    finally:
        listener.close()
        if client.poll() is None:
            client.kill()
            client.communicate()
    lines = [line for line in err.splitlines() if line.strip()]
    assert client.returncode == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: " + refusal.format(out=out)), lines[0]
    if resume:
        assert _snapshot(out) == before                        # no checkpoint deleted, bottom.pt as it was
    else:
        assert not (out / "bottom.pt").exists()


# --- up front ------------------------------------------------------------------------------------------------

def test_a_k_this_machine_cannot_run_is_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "CLIENT_MEMORY", 1 << 50)      # each client as large as no machine has room for
    result = runner.invoke(app, ["train", "--transport", "tcp", "--parties", "2", "--arch", "small-mlp", "--out",
                                 str(tmp_path / "run")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--parties 2 over TCP starts 2 client processes" in result.stderr and "room for 1" in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_busy_port_is_refused_before_a_run_directory_is_made(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(SHARED.decode())
    secret.chmod(0o600)
    with socket.create_server(("127.0.0.1", 0)) as busy:
        result = runner.invoke(app, ["serve", "--secret-file", str(secret), "--listen",
                                     f"127.0.0.1:{busy.getsockname()[1]}", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "cannot listen on 127.0.0.1:" in result.stderr
    assert not (tmp_path / "run").exists()

@pytest.mark.slow
def test_serve_on_port_0_says_which_port_it_took(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(SHARED.decode())
    secret.chmod(0o600)
    result = runner.invoke(app, ["serve", "--secret-file", str(secret), "--listen", "127.0.0.1:0", "--timeout", "0.2",
                                 "--arch", "small-mlp", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    port = int(result.stdout.split("listening on 127.0.0.1:")[1].split()[0])
    assert port > 0 and f"start `splitlab client --connect 127.0.0.1:{port} --party 0`" in result.stderr

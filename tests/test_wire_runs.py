"""Split learning over TCP with real processes: `train --transport tcp` against the in-process run (bit for
bit, K = 1, 2, 3, and over TLS), and the faults: a killed client, Ctrl-C, a silent peer, a peer without the
secret, an intruder that tries a slot first, peers that send NaN, a wrong shape, more than the handshake
allows or more bytes than their header declared. Every process is started with a deadline and killed in a
`finally`; everything listens on 127.0.0.1."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.parties import CutLayout, activation_shapes
from vfl.training import TrainConfig, build_client
from vfl.transcripts import load_transcript
from vfl.wire.handshake import Listener
from vfl.wire.remote import Limits, WireSession
from vfl.wire.server import ServeSettings, open_session

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
DEADLINE = 120          # seconds any one process may take before the test kills it and fails


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(torch.get_num_threads())}


def default_ctrl_c() -> None:
    """In the child before exec: Ctrl-C's default action, which a runner started in the background (SIGINT
    ignored) would otherwise pass on, so that the tests' SIGINT reaches the program."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=ROOT, preexec_fn=default_ctrl_c)


def _splitlab(*args: str) -> subprocess.Popen:
    return _start("-m", "splitlab", *args)


def _finish(process: subprocess.Popen, timeout: float = DEADLINE) -> tuple[int, str]:
    """Exit code and stderr of a process that must end within `timeout` seconds."""
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"{process.args[3:5]} did not end within {timeout} s")
    return process.returncode, err


def _kill_all(*processes: subprocess.Popen) -> None:
    for p in processes:
        if p.poll() is None:
            p.kill()
            p.communicate()


def _error_lines(stderr: str) -> list[str]:
    """What a side printed about its failure (the one-off pace estimate of long work is not part of it)."""
    return [line for line in stderr.splitlines() if line.strip() and "at the pace of its first" not in line]


def _wait_for(path: Path, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


def private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture
def secret(tmp_path) -> Path:
    return private(tmp_path / "secret", "s3cret-key-0123-" * 3)


def _serve(port: int, secret: Path, out: Path, *extra: str) -> subprocess.Popen:
    return _splitlab("serve", "--listen", f"127.0.0.1:{port}", "--secret-file", str(secret), "--out", str(out),
                     "--device", "cpu", "--json", *extra)


def _client(port: int, secret: Path, out: Path, *extra: str) -> subprocess.Popen:
    return _splitlab("client", "--connect", f"127.0.0.1:{port}", "--secret-file", str(secret), "--out", str(out),
                     "--device", "cpu", "--json", *extra)


# --- the same numbers over TCP ------------------------------------------------------------------------------

def _train(out: Path, *args: str) -> dict:
    result = runner.invoke(app, ["train", "--epochs", "1", "--device", "cpu", "--role", "curious", "--json",
                                 "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def _same_weights(a: Path, b: Path) -> None:
    first, second = (torch.load(p / "checkpoint.pt", weights_only=True) for p in (a, b))
    for side in ("client", "server"):
        assert first[side].keys() == second[side].keys()
        assert all(torch.equal(first[side][k], second[side][k]) for k in first[side]), side


def _same_transcript(local: Path, remote: Path) -> int:
    mine, theirs = load_transcript(local), load_transcript(remote)
    assert len(mine.entries) == len(theirs.entries)
    for a, b in zip(mine.entries, theirs.entries):
        assert (a.sender, a.kind, a.step, a.shape) == (b.sender, b.kind, b.step, b.shape)
        assert torch.equal(a.tensor, b.tensor)
    return len(mine.entries)


@pytest.mark.parametrize("arch,extra", [
    ("small-mlp", []),
    pytest.param("cnn", [], marks=pytest.mark.slow),
    pytest.param("mlp", [], marks=pytest.mark.slow),
    pytest.param("small-mlp", ["--parties", "2", "--defence", "orthogonal"], id="small-mlp-2-parties-orthogonal",
                 marks=pytest.mark.slow),
    pytest.param("small-mlp", ["--parties", "3"], id="small-mlp-3-parties", marks=pytest.mark.slow),
])
@pytest.mark.slow
def test_tcp_training_equals_the_in_process_run_bit_for_bit(tmp_path, arch, extra):
    local = _train(tmp_path / "local", "--arch", arch, *extra)
    remote = _train(tmp_path / "tcp", "--arch", arch, "--transport", "tcp", *extra)
    _same_weights(tmp_path / "local", tmp_path / "tcp")
    assert remote["metrics"]["history"] == local["metrics"]["history"]
    rounds = -(-4000 // 64)
    assert _same_transcript(tmp_path / "local", tmp_path / "tcp" / "server") == rounds + 1 + 1   # + test, targets
    parties = int(extra[extra.index("--parties") + 1]) if "--parties" in extra else 1
    traffic = remote["metrics"]["traffic_per_epoch"][0]             # activations, the test query, epoch saved
    assert traffic["frames_received"] == (rounds + 1 + 1) * parties
    server_files = {p.name for p in (tmp_path / "tcp" / "server").iterdir()}
    assert server_files == {".lock", ".splitlab-run.json", "config.json", "run.log", "metrics.json", "top.pt", "transcript",
                            "checkpoints"}


# --- faults -------------------------------------------------------------------------------------------------

def _reference_weights(tmp_path: Path, *args: str) -> dict[str, torch.Tensor]:
    """The uninterrupted in-process run's final client and server weights."""
    result = runner.invoke(app, ["train", "--device", "cpu", "--json", "--out", str(tmp_path / "reference"), *args])
    assert result.exit_code == 0, result.output
    return torch.load(tmp_path / "reference" / "checkpoint.pt", weights_only=True)


RESUMABLE = ("--arch", "small-mlp", "--batch-size", "8", "--epochs", "2")
ROUNDS = 4000 // 8
NOISY = ("--arch", "small-mlp", "--defence", "activation-noise:sigma=0.05")   # a noise stream to resume too


@pytest.mark.slow(seconds=50)
def test_a_killed_client_stops_the_server_and_resume_reaches_the_uninterrupted_weights(tmp_path, secret):
    port = _free_port()
    server = _serve(port, secret, tmp_path / "server", *RESUMABLE, "--timeout", "20")
    client = _client(port, secret, tmp_path / "client", *NOISY)
    try:
        _wait_for(tmp_path / "client" / "checkpoints" / "epoch-0001.pt")
        time.sleep(0.3)
        assert client.poll() is None, "the run ended before the client could be killed mid-epoch"
        client.kill()
        killed = time.monotonic()
        code, err = _finish(server, 20)
        assert code == 2 and time.monotonic() - killed < 20
        assert _error_lines(err) == [f"error: party 0 closed the connection (its process ended or the network dropped); "
                                     f"saved through epoch 1 in {tmp_path / 'server'}; continue both sides with --resume"]
        assert [p.name for p in sorted((tmp_path / "server" / "checkpoints").iterdir())] == ["epoch-0001.pt"]
        kept = load_transcript(tmp_path / "server").entries              # epoch 1's rounds, then its test query
        assert [e.step for e in kept] == [*range(ROUNDS), ROUNDS] and kept[-1].kind == "query"
        server = _serve(port, secret, tmp_path / "server", *RESUMABLE, "--resume")
        client = _client(port, secret, tmp_path / "client", *NOISY, "--resume")
        assert _finish(client)[0] == 0 and _finish(server)[0] == 0
    finally:
        _kill_all(server, client)
    reference = _reference_weights(tmp_path, *RESUMABLE, *NOISY[2:])
    top = torch.load(tmp_path / "server" / "top.pt", weights_only=True)["model"]
    bottom = torch.load(tmp_path / "client" / "bottom.pt", weights_only=True)["model"]
    assert all(torch.equal(top[k], reference["server"][k]) for k in reference["server"])
    assert all(torch.equal(bottom[k], reference["client"][k]) for k in reference["client"])
    counted = json.loads((tmp_path / "server" / "metrics.json").read_text())["cut_bytes"]     # epoch 1's too
    assert counted == json.loads((tmp_path / "reference" / "metrics.json").read_text())["cut_bytes"]


@pytest.mark.slow
def test_ctrl_c_on_the_server_ends_both_sides_with_one_line_each(tmp_path, secret):
    port = _free_port()
    server = _serve(port, secret, tmp_path / "server", *RESUMABLE)
    client = _client(port, secret, tmp_path / "client", "--arch", "small-mlp")
    try:
        _wait_for(tmp_path / "server" / "checkpoints" / "epoch-0001.pt")
        server.send_signal(signal.SIGINT)
        (server_code, server_err), (client_code, client_err) = _finish(server, 30), _finish(client, 30)
    finally:
        _kill_all(server, client)
    assert server_code in (2, -signal.SIGINT) and client_code == 2, (server_err, client_err)   # see test_wire_attacks
    assert _error_lines(server_err) == [f"error: interrupted; saved through epoch 1 in {tmp_path / 'server'}; "
                                        "continue both sides with --resume"]
    assert _error_lines(client_err) == ["error: the server stopped: the server was interrupted; saved through epoch 1 "
                                        f"in {tmp_path / 'client'}; continue both sides with --resume"]


@pytest.mark.slow
def test_a_client_without_the_secret_is_refused_before_any_tensor(tmp_path, secret):
    port = _free_port()
    wrong = private(tmp_path / "wrong", "not-the-secret-" * 3)
    server = _serve(port, secret, tmp_path / "server", "--arch", "small-mlp", "--timeout", "8")
    client = _client(port, wrong, tmp_path / "client", "--arch", "small-mlp")
    try:
        (client_code, client_err), (server_code, server_err) = _finish(client), _finish(server)
    finally:
        _kill_all(server, client)
    assert server_code == client_code == 2, (server_err, client_err)
    assert _error_lines(server_err) == [
        f"error: no client joined as party 0 within 8 s (--timeout); 1 connection(s) did not prove party 0's key "
        f"(another --secret-file?); start `splitlab client --connect 127.0.0.1:{port} --party 0` with its key; no "
        f"epoch had finished (run {tmp_path / 'server'}); start again, with --resume or without"]
    assert _error_lines(client_err) == [
        f"error: the server at 127.0.0.1:{port} did not accept this client's proof of party 0's key (another "
        f"--secret-file?); refused before any tensor was exchanged; no epoch had finished (run {tmp_path / 'client'}); "
        "start again, with --resume or without"]
    for side in ("server", "client"):
        assert {p.name for p in (tmp_path / side).iterdir()} == {".lock", ".splitlab-run.json", "config.json", "run.log"}
    assert "session open" not in (tmp_path / "server" / "run.log").read_text()


@pytest.mark.slow
def test_an_intruder_trying_the_slot_first_changes_nothing_of_the_session(tmp_path, secret):
    """A process without the secret connects first and claims party 0: it is refused, and the real client then
    trains the session; the server's transcript holds the real client's activations only."""
    from test_wire_security import _intruder_party

    port = _free_port()
    server = _serve(port, secret, tmp_path / "server", "--arch", "small-mlp", "--epochs", "1", "--role", "curious")
    try:
        _wait_for(tmp_path / "server" / "run.log")
        deadline = time.monotonic() + DEADLINE
        while "listening on" not in (tmp_path / "server" / "run.log").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        answer, rest = _intruder_party(port)
        client = _client(port, secret, tmp_path / "client", "--arch", "small-mlp")
        assert _finish(client)[0] == 0 and _finish(server)[0] == 0
    finally:
        _kill_all(server)
    assert answer == {"refused": "proof"} and rest == b""
    received = load_transcript(tmp_path / "server")
    assert len(received.entries) == -(-4000 // 64) + 2 and received.queries()[-1].shape == (10, 10)


@pytest.mark.parametrize("mode,refusal", [
    ("nan", "party 0 sent activations with non-finite values at step 0; refused"),
    ("shape", "party 0 sent activations shaped 64x9 at step 0; the handshake allows 64x10 float32; refused"),
    ("oversize", "party 0 sent activations shaped 128x10 (5,120 bytes; at most 2,560 allowed) at step 0; the "
                 "handshake allows 64x10 float32; refused"),
    ("overlong", "party 0 sent a frame that failed its authentication (forged, replayed, or longer than its header "
                 "declared); refused"),
    pytest.param("silent", "party 0 sent nothing for 3 s (--timeout); it is stuck or gone", marks=pytest.mark.slow),
    ("huge", "the server's loss became inf at step 0 on the activations of party 0 (magnitude up to 3e+38); refused "
             "(nothing of the epoch is kept)"),
], ids=["nan", "shape", "oversize", "overlong", "silent", "huge"])
@pytest.mark.slow
def test_a_misbehaving_client_is_refused_with_one_line_and_nothing_of_it_is_written(tmp_path, secret, mode, refusal):
    port = _free_port()
    server = _serve(port, secret, tmp_path / "server", "--arch", "small-mlp", "--timeout", "3")
    rogue = _start(str(ROOT / "tests" / "wire_rogue.py"), mode, f"127.0.0.1:{port}", str(secret))
    try:
        started = time.monotonic()
        code, err = _finish(server, 60)
        assert time.monotonic() - started < 60
    finally:
        _kill_all(server, rogue)
    assert code == 2
    assert _error_lines(err) == [f"error: {refusal}; no epoch had finished (run {tmp_path / 'server'}); start again, "
                                 "with --resume or without"]
    assert {p.name for p in (tmp_path / "server").iterdir()} == {".lock", ".splitlab-run.json", "config.json", "run.log"}
    assert "session open" in (tmp_path / "server" / "run.log").read_text()          # it did get past the handshake


@pytest.mark.slow
def test_the_malicious_role_over_the_wire_sends_its_own_gradients(tmp_path, secret):
    port = _free_port()
    server = _serve(port, secret, tmp_path / "server", "--arch", "small-mlp", "--epochs", "1", "--role", "malicious",
                    "--choose-gradient", "vfl.wire.roles:shrink_activations")
    client = _client(port, secret, tmp_path / "client", "--arch", "small-mlp")
    try:
        assert _finish(client)[0] == 0 and _finish(server)[0] == 0
    finally:
        _kill_all(server, client)
    received = load_transcript(tmp_path / "server")
    norms = [float(e.tensor.norm()) for e in received.entries if e.kind == "activations"]
    assert norms[-1] < 0.25 * norms[0]                    # G = H: the client learns to send less and less
    assert received.queries()[-1].shape == (10, 10)      # the targets' activations, kept by the attacker
    assert json.loads((tmp_path / "client" / "metrics.json").read_text())["targets_predicted"] == [-1] * 10


@pytest.mark.slow
def test_a_malicious_server_process_drives_a_remote_client_through_the_session_fsha_takes(tmp_path, secret):
    """The hook for FSHA over the wire: `open_session` admits the client, `WireSession` offers the two
    operations of `vfl.protocol.ClientSession` (rounds with the server's own gradients, then the targets'
    activations), here in the test's process against a `splitlab client` process."""
    config = TrainConfig(arch="small-mlp", device="cpu")
    settings = ServeSettings(train=config, listen="127.0.0.1:0", secret_file=str(secret), timeout=30)
    layout = CutLayout(activation_shapes("small-mlp", 1, (1, 28, 28), 1))
    listener = Listener("127.0.0.1", 0, 30)
    client = _client(listener.port, secret, tmp_path / "client", "--arch", "small-mlp")
    parties = None
    try:
        parties = open_session(settings, listener, layout, Limits(4000, 1000, 64, 10), torch.device("cpu"))
        session = WireSession(parties, 4000, 64, torch.Generator().manual_seed(0), torch.arange(10))
        seen = []
        steps = [session.round(lambda h, step: seen.append(h) or torch.zeros_like(h)) for _ in range(3)]
        targets = session.target_activations()
        parties.finish(30)
        assert _finish(client)[0] == 0
    finally:
        if parties is not None:
            parties.close(failed=client.returncode != 0)
        listener.close()
        _kill_all(client)
    assert steps == [0, 1, 2] and [tuple(h.shape) for h in seen] == [(64, 10)] * 3 and targets.shape == (10, 10)
    metrics = json.loads((tmp_path / "client" / "metrics.json").read_text())
    assert metrics["rounds"] == 3 and metrics["targets_predicted"] == [-1] * 10
    bottom = torch.load(tmp_path / "client" / "bottom.pt", weights_only=True)["model"]
    initial = build_client(config, torch.device("cpu")).model.state_dict()
    assert all(torch.equal(bottom[k], initial[k]) for k in initial)     # zero gradients: Adam never moved it


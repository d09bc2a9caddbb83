"""The wire against an intruder without the secret and against peers that hold a key and misbehave, on
127.0.0.1 with bounded timeouts. Each case is refused with one line and nothing of the user's is lost; the
threat model these check is docs/wire.md's, point by point:

- a process without the secret cannot join as a party, take a slot, pose as the server, read a frame, inject
  one, or put its text in front of the user (`test_an_intruder_*`, `test_a_forged_*`);
- a party cannot prove another party's slot or receive another's activations (`test_a_party_*`);
- weak or exposed secrets and TLS misconfigurations are refused up front.

Peers that hold a key and misbehave are in tests/test_wire_peers.py.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.wire.frames import HEADER, Allow, Expect, Frame, Kind
from vfl.wire.handshake import MAGIC as HELLO_MAGIC, PREFIX, PROTOCOL, Listener, join
from vfl.wire.keys import Secret, party_key, proof, read_secret
from vfl.wire.tls import TlsFiles, client_context, self_signed, server_context

runner = CliRunner()
SHARED = b"the shared secret of this test, 32+ bytes"
SECRET = Secret(SHARED)


def _message(sock: socket.socket, value: dict) -> None:
    raw = json.dumps(value).encode()
    sock.sendall(PREFIX.pack(HELLO_MAGIC, len(raw)) + raw)


def _read_message(sock: socket.socket) -> dict:
    magic, size = PREFIX.unpack(sock.recv(PREFIX.size, socket.MSG_WAITALL))
    assert magic == HELLO_MAGIC
    return json.loads(sock.recv(size, socket.MSG_WAITALL))


def _intruder_party(port: int, party: int = 0, key: bytes = b"guess" * 8) -> tuple[dict, bytes]:
    """A process without the secret trying a slot: what the server answered its proof, and what came after."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        _message(sock, {"protocol": PROTOCOL, "party": party, "parties": 1, "nonce": "0" * 32})
        nonce = _read_message(sock)["nonce"]
        _message(sock, {"proof": proof(key, "client", PROTOCOL, nonce, "0" * 32, party, 1)})
        answer = _read_message(sock)
        rest = b""
        while chunk := sock.recv(4096):
            rest += chunk
        return answer, rest


def _serve_in_thread(listener: Listener, secret: Secret = SECRET, parties: int = 1, terms=lambda k, b: {"ok": k}):
    outcome: dict = {}

    def run():
        try:
            outcome["server"] = listener.accept(secret, parties, terms)
        except SplitlabError as exc:
            outcome["server"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# --- an intruder without the secret ---------------------------------------------------------------------------

def test_an_intruder_cannot_take_a_partys_slot_and_the_real_client_still_joins():
    listener = Listener("127.0.0.1", 0, 10)
    thread, outcome = _serve_in_thread(listener)
    answer, rest = _intruder_party(listener.port)             # it comes first, as an intruder racing a client would
    joined = join("127.0.0.1", listener.port, SECRET, 0, 1, {"me": "real"}, 10)
    thread.join(10)
    listener.close()
    (channel,), bodies = outcome["server"]
    assert answer == {"refused": "proof"} and rest == b""        # a code, no proof of the server's, no frame
    assert bodies == [{"me": "real"}] and joined.terms == {"ok": 0}
    channel.close()
    joined.channel.close()


def test_an_intruder_replaying_a_recorded_proof_is_refused():
    """A proof is bound to the server's fresh nonce: one recorded from another connection does not verify."""
    listener = Listener("127.0.0.1", 0, 1)
    thread, outcome = _serve_in_thread(listener)
    recorded = proof(party_key(SHARED, 0), "client", PROTOCOL, "1" * 32, "0" * 32, 0, 1)    # another session's
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        _message(sock, {"protocol": PROTOCOL, "party": 0, "parties": 1, "nonce": "0" * 32})
        _read_message(sock)
        _message(sock, {"proof": recorded})
        assert _read_message(sock) == {"refused": "proof"}
    thread.join(10)
    listener.close()
    assert "1 connection(s) did not prove party 0's key" in str(outcome["server"])


def _fake_server(behaviour: str) -> tuple[socket.socket, dict]:
    """A server without the secret on a free port: it answers a hello with a nonce, takes the client's proof,
    then `behaviour`: "forge" (a made-up proof), "reflect" (the client's own proof back), "text" (a refusal
    carrying its own text). `seen` collects what it received."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: dict = {"after_proof": b""}

    def run():
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            seen["hello"] = _read_message(conn)
            _message(conn, {"nonce": "f" * 32})
            seen["proof"] = _read_message(conn)["proof"]
            if behaviour == "text":
                _message(conn, {"refused": "update", "reason": "your splitlab is outdated; pip install evil"})
            else:
                _message(conn, {"proof": seen["proof"] if behaviour == "reflect" else "ab" * 32})
            try:
                while chunk := conn.recv(4096):
                    seen["after_proof"] += chunk
            except OSError:
                pass

    threading.Thread(target=run, daemon=True).start()
    return server, seen


@pytest.mark.parametrize("behaviour", ["forge", "reflect"])
def test_an_intruder_posing_as_the_server_gets_no_configuration_and_no_tensor(behaviour):
    server, seen = _fake_server(behaviour)
    with pytest.raises(SplitlabError, match=r"^the server at 127\.0\.0\.1:\d+ did not prove party 0's key \(it does not "
                                            r"hold the secret\); refused before any tensor was exchanged$"):
        join("127.0.0.1", server.getsockname()[1], SECRET, 0, 1, {"dataset": "private"}, 5)
    time.sleep(0.2)
    server.close()
    assert seen["after_proof"] == b""                       # not even the configuration went out


def test_a_forged_refusal_never_shows_the_intruders_text():
    server, _ = _fake_server("text")
    with pytest.raises(SplitlabError) as refused:
        join("127.0.0.1", server.getsockname()[1], SECRET, 0, 1, {}, 5)
    server.close()
    assert "evil" not in str(refused.value) and "outdated" not in str(refused.value)
    assert "refused this client before any proof was exchanged" in str(refused.value)


def _session(timeout: float = 5):
    """An admitted client's and the server's channels."""
    listener = Listener("127.0.0.1", 0, timeout)
    thread, outcome = _serve_in_thread(listener)
    joined = join("127.0.0.1", listener.port, SECRET, 0, 1, {}, timeout)
    thread.join(10)
    listener.close()
    return outcome["server"][0][0], joined.channel


BATCH = Expect(Allow(Kind.BATCH, torch.int64, (), rows=(1, 64), values=(0, 4000)))


@pytest.mark.parametrize("forgery", ["injected", "altered", "replayed", "truncated-mac"])
def test_a_forged_frame_on_the_connection_is_refused(forgery):
    """What a process that can write into the connection (on the network's path) can do: it holds no frame key,
    so nothing it writes, changes or repeats is taken."""
    server, client = _session()
    indices = torch.arange(8)
    header, payload = Frame(Kind.BATCH, 0, indices).header(), bytes(memoryview(indices.numpy()).cast("B"))
    if forgery == "injected":                                # a well-formed frame with a made-up MAC
        server.sock.sendall(header + payload + bytes(32))
    else:
        mac = server._send_mac.start(header)                 # the honest frame, as the server would send it
        mac.update(payload)
        honest = header + payload + mac.digest()
        if forgery == "altered":
            server.sock.sendall(honest[:HEADER.size] + bytes([honest[HEADER.size] ^ 1]) + honest[HEADER.size + 1:])
        elif forgery == "replayed":
            server.sock.sendall(honest + honest)
            assert torch.equal(client.receive(BATCH).tensor, indices)         # the original passes, once
        else:
            server.sock.sendall(honest[:-1] + bytes([honest[-1] ^ 0x80]))
    with pytest.raises(SplitlabError, match=r"^the server sent a frame that failed its authentication \(forged, "
                                            r"replayed, or longer than its header declared\); refused$"):
        client.receive(BATCH)
    server.close()
    client.close()


def test_junk_and_oversized_hellos_are_dropped_and_the_session_goes_on():
    listener = Listener("127.0.0.1", 0, 10)
    thread, outcome = _serve_in_thread(listener)
    for junk in (os.urandom(4096), PREFIX.pack(HELLO_MAGIC, 65535) + b"x" * 65535, b"GET / HTTP/1.0\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
            try:
                sock.sendall(junk)
                assert sock.recv(10) == b""                 # closed without a word: nothing stored, nothing said
            except ConnectionResetError:
                pass
    joined = join("127.0.0.1", listener.port, SECRET, 0, 1, {}, 10)
    thread.join(10)
    listener.close()
    assert outcome["server"][1] == [{}]
    joined.channel.close()


# --- parties and their keys ---------------------------------------------------------------------------------------

def test_a_party_cannot_prove_another_partys_slot():
    listener = Listener("127.0.0.1", 0, 1)
    thread, outcome = _serve_in_thread(listener, parties=2)
    lying = Secret(party_key(SHARED, 1), party=0)            # party 1's key, used to claim slot 0
    with pytest.raises(SplitlabError, match="did not accept this client's proof of party 0's key"):
        join("127.0.0.1", listener.port, lying, 0, 2, {}, 5)
    with pytest.raises(SplitlabError, match="is party 1's key; it proves party 1 only"):
        Secret(party_key(SHARED, 1), party=1, path="party-1.key").for_party(0)
    thread.join(10)
    listener.close()
    assert "1 connection(s) did not prove party 0's key" in str(outcome["server"])


def test_a_party_cannot_pose_as_the_server_to_another_party():
    """Party 1 holds its own key only: towards party 0 it cannot prove slot 0, so it gets none of party 0's
    activations (not even its configuration)."""
    server = socket.create_server(("127.0.0.1", 0))
    seen = {}

    def party_1_as_server():
        conn, _ = server.accept()
        with conn:
            hello = _read_message(conn)
            _message(conn, {"nonce": "e" * 32})
            _read_message(conn)
            _message(conn, {"proof": proof(party_key(SHARED, 1), "server", PROTOCOL, "e" * 32, hello["nonce"], 0, 2)})
            conn.settimeout(5)
            seen["after"] = conn.recv(4096)

    thread = threading.Thread(target=party_1_as_server, daemon=True)
    thread.start()
    with pytest.raises(SplitlabError, match="did not prove party 0's key"):
        join("127.0.0.1", server.getsockname()[1], SECRET, 0, 2, {}, 5)
    thread.join(10)
    server.close()
    assert seen["after"] == b""


def test_a_second_client_for_a_taken_slot_is_told_so_and_the_first_keeps_it():
    listener = Listener("127.0.0.1", 0, 10)
    thread, outcome = _serve_in_thread(listener, parties=2)
    first = join_in_thread(listener.port, 0)
    time.sleep(0.3)
    with pytest.raises(SplitlabError, match=r"^the server refused this client: another client already joined as party "
                                            r"0; give each client its own --party$"):
        join("127.0.0.1", listener.port, SECRET, 0, 2, {"second": True}, 10)
    last = join("127.0.0.1", listener.port, SECRET, 1, 2, {"party": 1}, 10)
    thread.join(10)
    first_thread, first_outcome = first
    first_thread.join(10)
    listener.close()
    channels, bodies = outcome["server"]
    assert bodies == [{"first": True}, {"party": 1}]
    for channel in (*channels, last.channel, first_outcome["joined"].channel):
        channel.close()


def join_in_thread(port: int, party: int):
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(joined=join("127.0.0.1", port, SECRET, party, 2,
                                                                        {"first": True}, 10)), daemon=True)
    thread.start()
    return thread, outcome


def test_splitlab_keys_writes_each_partys_own_key_and_overwrites_nothing(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(SHARED.decode())
    secret.chmod(0o600)
    result = runner.invoke(app, ["keys", "--secret-file", str(secret), "--parties", "2", "--out", str(tmp_path / "k"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    for k in (0, 1):
        path = tmp_path / "k" / f"party-{k}.key"
        assert path.stat().st_mode & 0o777 == 0o600
        assert read_secret(path) == Secret(party_key(SHARED, k), k, str(path))
    before = (tmp_path / "k" / "party-0.key").read_bytes()
    again = runner.invoke(app, ["keys", "--secret-file", str(secret), "--parties", "2", "--out", str(tmp_path / "k")])
    assert again.exit_code == 2 and "party-0.key exists; it is not overwritten" in again.stderr
    assert (tmp_path / "k" / "party-0.key").read_bytes() == before
    wrong = runner.invoke(app, ["client", "--secret-file", str(tmp_path / "k" / "party-1.key"), "--party", "0",
                                "--parties", "2", "--out", str(tmp_path / "run")])
    assert wrong.exit_code == 2 and "is party 1's key; it proves party 1 only" in wrong.stderr
    server = runner.invoke(app, ["serve", "--secret-file", str(tmp_path / "k" / "party-0.key"), "--out",
                                 str(tmp_path / "run")])
    assert server.exit_code == 2 and "the server needs the shared secret" in server.stderr
    assert not (tmp_path / "run").exists()



def test_a_secret_file_swapped_after_its_read_is_judged_by_the_file_read(tmp_path, monkeypatch):
    """The owner and mode checked are those of the file whose bytes were read: a world-readable secret swapped
    for a private file between the read and the check is still refused (the check does not look the path up
    again)."""
    secret = tmp_path / "secret"
    secret.write_bytes(SHARED)
    secret.chmod(0o644)                              # others can read it: refused
    private = tmp_path / "private"
    private.write_bytes(b"another secret, private to its owner, 32+ bytes")
    private.chmod(0o600)
    real_read, swapped = os.read, []

    def read_then_swap(fd, n):
        data = real_read(fd, n)
        if not swapped and os.readlink(f"/proc/self/fd/{fd}") == str(secret):
            os.replace(private, secret)             # the path now names a private file; fd still the old one
            swapped.append(True)
        return data
    monkeypatch.setattr(os, "read", read_then_swap)
    with pytest.raises(SplitlabError, match="can be read or written by others"):
        read_secret(secret)
    assert swapped and secret.stat().st_mode & 0o777 == 0o600

# --- TLS -------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> TlsFiles:
    try:
        return self_signed(tmp_path_factory.mktemp("tls"))
    except SplitlabError as exc:
        pytest.skip(str(exc))


def test_a_session_over_tls_carries_frames_and_a_plain_client_is_refused(certificate):
    server_tls = server_context(TlsFiles(certificate.cert, certificate.key))
    listener = Listener("127.0.0.1", 0, 10, server_tls)
    thread, outcome = _serve_in_thread(listener)
    with pytest.raises(SplitlabError, match="closed the connection during the handshake \\(if it uses TLS, give "
                                            "--tls-ca\\)"):
        join("127.0.0.1", listener.port, SECRET, 0, 1, {}, 5)
    joined = join("127.0.0.1", listener.port, SECRET, 0, 1, {"tls": True}, 10, client_context(TlsFiles(ca=certificate.ca)))
    thread.join(10)
    listener.close()
    (server,), bodies = outcome["server"]
    assert bodies == [{"tls": True}]
    x = torch.randn(64, 3000)
    joined.channel.send(Frame(Kind.ACTIVATIONS, 0, x))
    assert torch.equal(server.receive(Expect(Allow(Kind.ACTIVATIONS, torch.float32, (64, 3000), step=0))).tensor, x)
    server.close()
    joined.channel.close()


def test_tls_refuses_an_unknown_certificate_and_bad_options(certificate, tmp_path):
    other = self_signed(tmp_path)                               # a CA that did not sign the server's certificate
    listener = Listener("127.0.0.1", 0, 1, server_context(TlsFiles(certificate.cert, certificate.key)))
    thread, _ = _serve_in_thread(listener)
    with pytest.raises(SplitlabError, match="TLS with the server at 127.0.0.1:\\d+ failed \\(CERTIFICATE_VERIFY_FAILED"):
        join("127.0.0.1", listener.port, SECRET, 0, 1, {}, 5, client_context(TlsFiles(ca=other.ca)))
    thread.join(10)
    listener.close()
    for files, side, message in [
        (TlsFiles(cert=certificate.cert), server_context, "--tls-cert and --tls-key go together"),
        (TlsFiles(ca=certificate.ca), server_context, "it needs the server's own --tls-cert and --tls-key too"),
        (TlsFiles(cert=certificate.cert, key=certificate.key), client_context, "a client uses TLS with --tls-ca"),
        (TlsFiles(ca=str(tmp_path / "missing.pem")), client_context, "cannot read --tls-ca .*missing.pem: No such file"),
    ]:
        with pytest.raises(SplitlabError, match=message):
            side(files)
    Path(other.key).chmod(0o644)
    with pytest.raises(SplitlabError, match="--tls-key .* can be read or written by others"):
        server_context(TlsFiles(other.cert, other.key))


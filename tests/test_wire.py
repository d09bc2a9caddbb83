"""Split learning over TCP, piece by piece in one process: frames and their checks, the handshake, the
channel, transcripts and checkpoints on disk, the roles, and the `serve`/`client` commands' input checks.
Runs with real processes are in tests/test_wire_runs.py; intruders and malicious peers in
tests/test_wire_security.py."""
import dataclasses
import os
import re
import socket
import threading

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.protocol import Activations, InferenceQuery, MaliciousServer, Transcript
from vfl.runs import Run
from vfl.transcripts import TranscriptFiles, load_transcript
from vfl.wire.channel import PeerStopped
from vfl.wire.checkpoints import EpochCheckpoints
from vfl.wire.client import ClientSettings
from vfl.wire.frames import Allow, Expect, Frame, Kind, abort, reason_of
from vfl.wire.handshake import Listener, join, parse_address
from vfl.wire.keys import Secret, read_secret
from vfl.wire.roles import RoleContext, build_role, load_factory, shrink_activations
from vfl.training import TrainConfig

runner = CliRunner()
SECRET = Secret(b"a shared secret of 32 bytes!!!!!")
ACTIVATIONS = Expect(Allow(Kind.ACTIVATIONS, torch.float32, (4, 10), step=3))


def _fields(frame: Frame) -> list[int]:
    return frame.fields()


def private(path, text: str):
    """`text` in a file only its owner can read (as a secret must be)."""
    path.write_text(text)
    path.chmod(0o600)
    return path


# --- frames -------------------------------------------------------------------------------------------

def test_a_frame_the_handshake_allows_passes_its_checks():
    allow, step, shape = ACTIVATIONS.check_header(_fields(Frame(Kind.ACTIVATIONS, 3, torch.zeros(4, 10))), "party 0")
    assert (allow.kind, step, shape) == (Kind.ACTIVATIONS, 3, (4, 10))
    rows = Expect(Allow(Kind.BATCH, torch.int64, (), rows=(1, 64), values=(0, 4000)))
    assert rows.check_header(_fields(Frame(Kind.BATCH, 0, torch.arange(7))), "the server")[2] == (7,)
    bare = Expect(Allow(Kind.EPOCH_END, step=1))
    assert bare.check_header(_fields(Frame(Kind.EPOCH_END, 1)), "the server")[2] is None     # no payload follows


@pytest.mark.parametrize("frame,message", [
    (Frame(Kind.CUT_GRADIENT, 3, torch.zeros(4, 10)), "a cut gradient where it should have sent activations"),
    (Frame(Kind.ACTIVATIONS, 4, torch.zeros(4, 10)), "activations for step 4 where step 3 was due"),
    (Frame(Kind.ACTIVATIONS, 3, torch.zeros(4, 10, dtype=torch.int64)), "activations as int64; the handshake "
                                                                          "allows 4x10 float32"),
    (Frame(Kind.ACTIVATIONS, 3, torch.zeros(4, 11)), "activations shaped 4x11 (176 bytes; at most 160 allowed) at step 3"),
    (Frame(Kind.ACTIVATIONS, 3, torch.zeros(8, 10)), "activations shaped 8x10 (320 bytes; at most 160 allowed)"),
    (Frame(Kind.ACTIVATIONS, 3, torch.zeros(4, 9)), "activations shaped 4x9 at step 3; the handshake allows 4x10 float32"),
])
def test_a_header_outside_the_handshake_is_refused_before_its_payload(frame, message):
    with pytest.raises(SplitlabError, match=re.escape(f"party 0 sent {message}")):
        ACTIVATIONS.check_header(_fields(frame), "party 0")


def test_malformed_headers_and_bad_values_are_refused():
    fields = _fields(Frame(Kind.ACTIVATIONS, 3, torch.zeros(4, 10)))
    with pytest.raises(SplitlabError, match="not a splitlab frame"):
        ACTIVATIONS.check_header([0, *fields[1:]], "party 0")
    with pytest.raises(SplitlabError, match="unknown kind 99"):
        ACTIVATIONS.check_header([fields[0], 99, *fields[2:]], "party 0")
    with pytest.raises(SplitlabError, match="malformed shape"):
        ACTIVATIONS.check_header(fields[:4] + [2, 4, 10, 7, 0, 0, 0], "party 0")      # a dimension beyond ndim
    allow = ACTIVATIONS.allowed[Kind.ACTIVATIONS]
    for bad in (float("nan"), float("inf")):
        with pytest.raises(SplitlabError, match="non-finite values at step 3"):
            Expect.check_payload(allow, torch.full((4, 10), bad), 3, "party 0")
    indices = Allow(Kind.BATCH, torch.int64, (), rows=(1, 8), values=(0, 100))
    with pytest.raises(SplitlabError, match="values outside 0 to 99"):
        Expect.check_payload(indices, torch.tensor([3, 100]), 0, "the server")
    Expect.check_payload(indices, torch.tensor([0, 99]), 0, "the server")


def test_an_abort_carries_one_printable_line():
    frame = abort("stopped\nby\x00ctrl-c " + "x" * 500)
    reason = reason_of(frame)
    assert "\n" not in reason and "\x00" not in reason and len(reason) <= 240
    assert reason.startswith("stopped?by?ctrl-c")


# --- handshake ----------------------------------------------------------------------------------------

def _handshake(client_secret: Secret, body: dict, terms=lambda k, b: {"epochs": 2}, timeout: float = 10):
    """Server (this thread) and one client (a thread): (server's outcome, client's outcome)."""
    listener = Listener("127.0.0.1", 0, timeout)
    outcome = {}

    def client():
        try:
            outcome["client"] = join("127.0.0.1", listener.port, client_secret, 0, 1, body, 10)
        except SplitlabError as exc:
            outcome["client"] = exc

    thread = threading.Thread(target=client)
    thread.start()
    try:
        outcome["server"] = listener.accept(SECRET, 1, terms)
    except SplitlabError as exc:
        outcome["server"] = exc
    finally:
        thread.join(30)
        listener.close()
    return outcome["server"], outcome["client"]


def test_the_handshake_admits_a_client_that_proves_the_secret():
    (channels, bodies), client = _handshake(SECRET, {"arch": "cnn"})
    assert bodies == [{"arch": "cnn"}] and client.terms == {"epochs": 2}
    for channel in (*channels, client.channel):
        channel.close()


def test_a_client_without_the_secret_is_refused_on_both_sides_in_one_line():
    server, client = _handshake(Secret(b"another secret of 32 bytes......"), {"arch": "cnn"}, timeout=1)
    assert isinstance(server, SplitlabError) and isinstance(client, SplitlabError)
    assert str(server).startswith("no client joined as party 0 within 1 s (--timeout); 1 connection(s) did not "
                                  "prove party 0's key (another --secret-file?)")
    assert str(client).startswith("the server at 127.0.0.1:") and "did not accept this client's proof of party " \
        "0's key (another --secret-file?); refused before any tensor was exchanged" in str(client)
    assert "\n" not in str(server) + str(client)


def test_a_client_with_another_configuration_is_refused_with_the_servers_reason():
    def terms(party, body):
        raise SplitlabError(f"party {party} runs --arch {body['arch']}, the server --arch cnn")

    server, client = _handshake(SECRET, {"arch": "mlp"}, terms)
    assert str(server) == "party 0 runs --arch mlp, the server --arch cnn"
    assert str(client) == "the server refused this client: party 0 runs --arch mlp, the server --arch cnn"


def test_secrets_and_addresses_are_checked(tmp_path, monkeypatch):
    private(tmp_path / "short", "a" * 31 + "\n")
    with pytest.raises(SplitlabError, match="holds 31 bytes, fewer than 32"):
        read_secret(tmp_path / "short")
    with pytest.raises(SplitlabError, match="cannot read --secret-file .*missing: No such file"):
        read_secret(tmp_path / "missing")
    with pytest.raises(SplitlabError, match="both sides need --secret-file"):
        read_secret(None)
    private(tmp_path / "ok", "  " + "k-0123456789" * 4 + "\n")
    assert read_secret(tmp_path / "ok") == Secret(b"k-0123456789" * 4, None, str(tmp_path / "ok"))
    private(tmp_path / "same", "k" * 40 + "\n")                  # 40 bytes, all the same: a guess away
    with pytest.raises(SplitlabError, match=r"holds only 1 different byte value\(s\), fewer than 8"):
        read_secret(tmp_path / "same")
    private(tmp_path / "word", "secret" * 8)                     # a short word repeated
    with pytest.raises(SplitlabError, match=r"holds only 5 different byte value\(s\), fewer than 8"):
        read_secret(tmp_path / "word")
    with monkeypatch.context() as m:                              # a file another user owns (and can change)
        m.setattr(os, "geteuid", lambda: os.stat(tmp_path / "ok").st_uid + 1)
        with pytest.raises(SplitlabError, match=r"belongs to another user \(uid \d+\), who can read or change it"):
            read_secret(tmp_path / "ok")
    (tmp_path / "ok").chmod(0o644)
    with pytest.raises(SplitlabError, match=r"can be read or written by others \(mode 644\); `chmod 600"):
        read_secret(tmp_path / "ok")
    os.mkfifo(tmp_path / "fifo", 0o600)                   # no writer: a blocking open would wait forever
    with pytest.raises(SplitlabError, match="fifo is not a regular file"):
        read_secret(tmp_path / "fifo")
    with pytest.raises(SplitlabError, match="is a directory; give the path of a file"):
        read_secret(tmp_path)
    private(tmp_path / "huge", "k" * 5000)
    with pytest.raises(SplitlabError, match="has 5,000 bytes, over the bound of 4,096"):
        read_secret(tmp_path / "huge")
    assert parse_address("[::1]:29500", "--listen") == ("::1", 29500)
    for bad in ("localhost", "host:port", "127.0.0.1:70000", ":29500"):
        with pytest.raises(SplitlabError, match="is not HOST:PORT"):
            parse_address(bad, "--listen")


# --- the channel ------------------------------------------------------------------------------------------

@pytest.fixture
def channels():
    """Two ends of a channel in this process (the server's, the client's), with a short timeout."""
    listener = Listener("127.0.0.1", 0, 10)
    joined = {}
    thread = threading.Thread(target=lambda: joined.update(client=join("127.0.0.1", listener.port, SECRET, 0, 1, {}, 10)))
    thread.start()
    (server,), _ = listener.accept(SECRET, 1, lambda k, b: {})
    thread.join(30)
    client = joined["client"].channel
    server.timeout = client.timeout = 1.0
    server.sock.settimeout(1.0)
    client.sock.settimeout(1.0)
    yield server, client
    for end in (server, client):
        end.close()
    listener.close()


def test_frames_cross_the_channel_exactly_and_are_counted(channels):
    server, client = channels
    x = torch.randn(4, 10)
    client.send(Frame(Kind.ACTIVATIONS, 3, x))
    received = server.receive(ACTIVATIONS)
    assert received.kind is Kind.ACTIVATIONS and torch.equal(received.tensor, x)
    server.send(Frame(Kind.EPOCH_END, 1))
    assert client.receive(Expect(Allow(Kind.EPOCH_END, step=1))).tensor is None
    big = torch.randn(64, 5000)                               # written in slices, hashed as they go
    client.send(Frame(Kind.ACTIVATIONS, 4, big))
    assert torch.equal(server.receive(Expect(Allow(Kind.ACTIVATIONS, torch.float32, (64, 5000), step=4))).tensor, big)
    assert server.traffic.frames_received == 2 and server.traffic.bytes_received == 2 * (88 + 32) + 160 + big.numel() * 4
    assert client.traffic.bytes_received == 88 + 32                  # header and MAC


def test_a_refused_frame_breaks_the_channel_and_an_abort_says_why(channels):
    server, client = channels
    client.send(Frame(Kind.ACTIVATIONS, 3, torch.full((4, 10), float("nan"))))
    with pytest.raises(SplitlabError, match="non-finite"):
        server.receive(ACTIVATIONS)
    with pytest.raises(SplitlabError, match="non-finite"):          # nothing more is received after a refusal
        server.receive(ACTIVATIONS)
    server.send(abort("the server stopped (bad activations)"))
    with pytest.raises(PeerStopped, match="the server stopped: the server stopped \\(bad activations\\)"):
        client.receive(Expect())


def test_a_silent_peer_times_out_with_one_line(channels):
    server, _ = channels
    with pytest.raises(SplitlabError, match=r"^party 0 sent nothing for 1 s \(--timeout\); it is stuck or gone$"):
        server.receive(ACTIVATIONS)


@pytest.mark.parametrize("cut", ["at a frame's start", "inside a frame"])
def test_a_peer_that_closes_is_one_line_whether_at_or_inside_a_frame(channels, cut):
    server, client = channels
    if cut == "inside a frame":                                    # the header and part of the payload, then gone
        frame = Frame(Kind.ACTIVATIONS, 3, torch.randn(4, 10))
        client.sock.sendall(frame.header() + bytes(40))
    client.sock.shutdown(socket.SHUT_WR)                           # a clean close (FIN): recv returns 0, not an error
    with pytest.raises(PeerStopped, match=r"^party 0 closed the connection \(its process ended or the network "
                                          r"dropped\)$"):
        server.receive(ACTIVATIONS)


# --- what a server keeps --------------------------------------------------------------------------------

def test_transcript_files_hold_each_epochs_messages_and_load_in_order(tmp_path):
    seen = Transcript(keep_tensors=True)
    files = TranscriptFiles(tmp_path, seen)
    seen.record(Activations(0, torch.ones(2, 3)))
    files.write("epoch-0001")
    seen.record(Activations(1, torch.zeros(2, 3)))
    files.write("epoch-0002")
    seen.record(InferenceQuery(1, torch.full((10, 3), 2.0)))
    files.write("final")
    loaded = load_transcript(tmp_path)
    assert [(e.kind, e.step) for e in loaded.entries] == [("activations", 0), ("activations", 1), ("query", 1)]
    assert torch.equal(loaded.queries()[-1].tensor, torch.full((10, 3), 2.0)) and loaded.keep_tensors
    files.forget_after(1)                                   # a resumed run writes epoch 2 and the end again
    assert [e.step for e in load_transcript(tmp_path).entries] == [0]
    (tmp_path / "transcript" / "epoch-0001.pt").write_bytes(b"garbage")
    with pytest.raises(SplitlabError, match="epoch-0001.pt is corrupt"):
        load_transcript(tmp_path)
    with pytest.raises(SplitlabError, match="holds no transcript"):
        load_transcript(tmp_path / "elsewhere")


def test_epoch_checkpoints_keep_the_last_two_and_refuse_corrupt_ones(tmp_path):
    checkpoints = EpochCheckpoints(tmp_path)
    for epoch in (1, 2, 3):
        checkpoints.save(epoch, {"model": {"w": torch.full((2,), float(epoch))}})
    assert checkpoints.epochs() == [2, 3]
    assert torch.equal(checkpoints.load(3)["model"]["w"], torch.full((2,), 3.0))
    checkpoints.forget_after(2)
    assert checkpoints.epochs() == [2]
    checkpoints.path(2).write_bytes(b"not a checkpoint")
    with pytest.raises(SplitlabError, match="epoch-0002.pt is unreadable or corrupt"):
        checkpoints.load(2)


def test_a_resumed_server_keeps_the_bytes_counted_across_the_cut_before_the_resume(tmp_path):
    from vfl.training import FitState
    from vfl.wire.server import _restore, _state

    role = build_role(TrainConfig(arch="small-mlp", device="cpu"), "honest", torch.device("cpu"), (10,))
    before = FitState(1, 63, [{"epoch": 1}], [0.5], {"client": 1234, "server": 5678})
    checkpoints = EpochCheckpoints(tmp_path)
    checkpoints.save(1, _state(role, torch.Generator(), before, []))
    assert _restore(checkpoints.load(1), role, torch.Generator())[0] == before
    old = {k: v for k, v in checkpoints.load(1).items() if k != "cut_bytes"}     # saved before they were
    assert _restore(old, role, torch.Generator())[0].cut_bytes == {"client": 0, "server": 0}


def test_roles_by_name_and_the_malicious_callback_hook():
    config = TrainConfig(arch="small-mlp", device="cpu")
    assert build_role(config, "curious", torch.device("cpu"), (10,)).seen.keep_tensors
    role = build_role(config, "malicious", torch.device("cpu"), (10,), "vfl.wire.roles:shrink_activations")
    assert isinstance(role, MaliciousServer) and role.seen.keep_tensors
    h = torch.randn(3, 10)
    assert torch.equal(role.respond(Activations(0, h)).tensor, h)            # G = H pulls activations to zero
    assert torch.equal(shrink_activations(RoleContext(config, (10,), torch.device("cpu")))(h, 0), h)
    for spec, message in [("nomodule", "is not MODULE:FUNCTION"), ("no_such_module_x:f", "cannot import"),
                          ("vfl.wire.roles:missing", "has no function missing")]:
        with pytest.raises(SplitlabError, match=message):
            load_factory(spec)
    with pytest.raises(SplitlabError, match="needs --choose-gradient"):
        build_role(config, "malicious", torch.device("cpu"), (10,))


def test_a_choose_gradient_module_that_raises_on_import_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "boom_on_import.py").write_text("raise RuntimeError('no GPU here\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SplitlabError, match=r"^--choose-gradient boom_on_import:f: importing boom_on_import raised "
                                            r"RuntimeError: no GPU here$"):
        load_factory("boom_on_import:f")


def test_a_choose_gradient_module_that_exits_on_import_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "exit_on_import.py").write_text("import sys\nsys.exit('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SplitlabError, match=r"^--choose-gradient exit_on_import:f: importing exit_on_import raised "
                                            r"SystemExit: no GPU here$"):
        load_factory("exit_on_import:f")


def test_local_clients_hold_the_secrets_in_memory_and_hand_each_client_its_own_key():
    import sys
    from vfl.wire.launch import LocalClients

    with LocalClients(5, parties=2) as local:
        paths = [str(local.secret), str(local.key(0)), str(local.key(1))]
        assert all(p.startswith("/proc/self/fd/") for p in paths)          # nothing on disk, even after kill -9
        assert read_secret(local.key(1)).party == 1 and read_secret(local.secret).party is None
        assert not [p for p in os.listdir(local._folder.name) if "secret" in p or "key" in p]
        local.start([sys.executable, "-c", "import os, sys; sys.stderr.write(' '.join(os.listdir('/proc/self/fd')))",
                     str(local.key(1))])
        local.wait()
        held = {f"/proc/self/fd/{fd}" for fd in local._logs[0].read_text().split()}
    assert paths[2] in held and paths[0] not in held and paths[1] not in held


# --- the commands' input checks --------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["serve", "--out", "{out}"], "both sides need --secret-file"),
    (["serve", "--secret-file", "{secret}", "--listen", "nowhere", "--out", "{out}"], "--listen 'nowhere' is not HOST:PORT"),
    (["serve", "--secret-file", "{secret}", "--timeout", "0", "--out", "{out}"], "--timeout must be > 0"),
    (["serve", "--secret-file", "{secret}", "--role", "evil", "--out", "{out}"], "--role must be one of honest, curious, malicious, got 'evil'"),
    (["serve", "--secret-file", "{secret}", "--role", "malicious", "--out", "{out}"], "needs --choose-gradient"),
    (["serve", "--secret-file", "{secret}", "--parties", "0", "--out", "{out}"], "--parties must be >= 1"),
    (["serve", "--secret-file", "{secret}", "--arch", "mlp-mixer", "--dataset", "cifar10", "--parties", "2",
      "--out", "{out}"], "cannot be split between feature parties"),
    (["client", "--secret-file", "{secret}", "--party", "2", "--parties", "2", "--out", "{out}"], "--party must be >= 0 and <= 1, got 2"),
    (["client", "--secret-file", "{secret}", "--connect", "host", "--out", "{out}"], "is not HOST:PORT"),
    (["client", "--secret-file", "{secret}", "--resume", "--overwrite", "--out", "{out}"],
     "cannot be combined with --overwrite"),
    (["client", "--secret-file", "{secret}", "--resume"], "--resume needs --out"),
    (["client", "--secret-file", "{secret}", "--width", "0.5", "--out", "{out}"],
     "--width is an option of FSHA's victim; give --kind fsha or drop it"),
    (["client", "--secret-file", "{secret}", "--level", "3", "--out", "{out}"],
     "--level is an option of FSHA's victim; give --kind fsha or drop it"),
    (["client", "--kind", "split", "--secret-file", "{secret}", "--lr-client", "0.1", "--out", "{out}"],
     "--lr-client is an option of FSHA's victim; give --kind fsha or drop it"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--parties", "2", "--out", "{out}"],
     "--parties is an option of a split-learning client (--kind split); FSHA's victim does not take it"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--cut-layer", "5", "--out", "{out}"],
     "--cut-layer must be >= 1 and <= 4, got 5"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--level", "3", "--cut-layer", "3", "--out", "{out}"],
     "--level is the earlier name of --cut-layer: give only one of them"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--optimizer", "sgd", "--out", "{out}"],
     "--optimizer sgd: FSHA's client trains with adam"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--resume", "--out", "{out}"],
     "--resume is an option of a split-learning client"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--arch", "cnn", "--out", "{out}"],
     "--arch must be one of resnet, mlp, got 'cnn'"),
    (["client", "--kind", "fsha", "--secret-file", "{secret}", "--width", "0", "--out", "{out}"], "--width must be > 0"),
    (["client", "--kind", "evil", "--secret-file", "{secret}", "--out", "{out}"], "--kind must be one of split, fsha"),
])
def test_bad_input_exits_2_with_one_line_before_anything_is_written(tmp_path, args, message):
    private(tmp_path / "secret", "0123456789abcdef" * 2)
    out = tmp_path / "run"
    result = runner.invoke(app, [a.format(secret=tmp_path / "secret", out=out) for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_fshas_victim_refuses_every_case_field_fsha_has_no_use_for():
    from vfl.fsha_victim import NOT_FSHA
    from vfl.wire.cli import SPLIT_ONLY

    assert set(NOT_FSHA) <= set(SPLIT_ONLY)               # one list of them: FshaCase's, which the client reuses


def test_resume_refuses_a_directory_of_another_run_or_other_options(tmp_path):
    private(tmp_path / "secret", "0123456789abcdef" * 2)
    earlier = ClientSettings(train=TrainConfig(arch="cnn"), secret_file=str(tmp_path / "secret"))
    with Run.create("client", {"client": earlier}, tmp_path / "run"):
        pass
    args = ["client", "--secret-file", str(tmp_path / "secret"), "--resume", "--out", str(tmp_path / "run")]
    result = runner.invoke(app, [*args, "--arch", "mlp"])
    assert result.exit_code == 2 and "was started with --arch cnn, not mlp" in result.stderr
    result = runner.invoke(app, ["serve", *args[1:]])
    assert result.exit_code == 2 and "holds a 'client' run, not a 'serve' one" in result.stderr


# --- client kinds ---------------------------------------------------------------------------------------------

def _fsha_body(**changes) -> dict:
    body = {"kind": "fsha", "dataset": "mnist5k", "arch": "resnet", "cut_layer": 4, "batch_size": 8,
            "activation_shape": [16, 4, 4], "targets": 10, "data_seed": None, "resume": False, "epochs": []}
    return {**body, **changes}


def test_fshas_server_admits_only_the_victim_it_expects():
    from vfl.fsha_victim import FshaCase
    from vfl.wire.remote import Limits
    from vfl.wire.victim_session import VictimTerms

    terms = VictimTerms(FshaCase(batch_size=8, width=0.0625), 100, Limits(0, 0, 8, 10, query_rows=10))
    assert terms(0, _fsha_body()) == {"rounds": 100, "epochs": 0, "start_epoch": 0,
                                      "limits": {"train_size": 0, "test_size": 0, "batch_size": 8, "classes": 10,
                                                 "query_rows": 10}}
    for body, message in [
        ({"kind": "split", "arch": "cnn"}, "party 0 is a --kind split client; this server expects FSHA's victim"),
        (_fsha_body(cut_layer=3), "party 0 runs --cut-layer 3, the server expects --cut-layer 4"),
        (_fsha_body(batch_size=64), "party 0 runs --batch-size 64, the server expects --batch-size 8"),
        (_fsha_body(data_seed=3), "party 0 draws mnist5k's private/public split from --seed 3, the server from its "
                                  "fixed split; give every side the same --seed and --data-draw"),
        (_fsha_body(activation_shape=[64, 4, 4]), "smashed data shaped [64, 4, 4], the server expects [16, 4, 4]"),
        (_fsha_body(targets=11), "declares 11 evaluation targets; at most one per class (10)"),
        (_fsha_body(resume=True), "FSHA's victim keeps no checkpoints"),
    ]:
        with pytest.raises(SplitlabError, match=re.escape(message)):
            terms(0, body)


def test_a_split_learning_server_refuses_fshas_victim(tmp_path):
    from vfl.wire.remote import Limits
    from vfl.wire.server import ServeSettings, _ClientTerms

    private(tmp_path / "secret", "0123456789abcdef" * 2)
    settings = ServeSettings(train=TrainConfig(arch="small-mlp"), secret_file=str(tmp_path / "secret"))
    terms = _ClientTerms(settings, [(10,)], Limits(4000, 1000, 64, 10), 0)
    with pytest.raises(SplitlabError, match="party 0 is a --kind fsha client; `splitlab serve` trains split learning"):
        terms(0, _fsha_body())


def test_the_wire_victim_is_built_as_the_attacks_in_process_victim(tmp_path):
    """`splitlab client --kind fsha` and the attack's in-process run build the same client: weights, optimiser,
    private batch order and targets."""
    from attacks import registry
    from attacks.split.session.experiment import victim_for
    from attacks.split.session.victim import load_split, victim_side
    from vfl.data import first_of_each_class
    from vfl.fsha_victim import FshaCase, to_fsha_images
    from vfl.wire.kinds import FshaParty
    from vfl.wire.remote import Limits
    from vfl.wire.victim_session import VictimTerms

    settings = registry.preset("quick", "fsha").settings(width=0.0625, batch_size=8)
    victim = victim_for(settings, device="cpu", seed=3)
    side = victim_side(victim, *load_split(victim))
    private(tmp_path / "secret", "0123456789abcdef" * 2)
    config = FshaCase(seed=3, device="cpu", lr=victim.lr, batch_size=8, width=0.0625)
    wire = FshaParty(ClientSettings(kind="fsha", fsha=config, secret_file=str(tmp_path / "secret")),
                     torch.device("cpu"))
    ours, theirs = wire.client.model.state_dict(), side.client.model.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert wire.client.optimizer.defaults == side.client.optimizer.defaults
    for _ in range(501):                                 # past a reshuffle (4000 images, batches of 8)
        assert torch.equal(wire.round_input(None), next(side.batches))
    assert torch.equal(wire.query_input(None), to_fsha_images(first_of_each_class(side.private)[0]))
    assert wire.introduction(None)["activation_shape"] == list(victim.feature_shape)
    limits = Limits(0, 0, 8, 10, query_rows=10)
    assert VictimTerms(config, 1, limits)(0, wire.introduction(None))["rounds"] == 1
    with pytest.raises(SplitlabError, match="from its fixed split, the server from --seed 3"):    # its own draw
        VictimTerms(dataclasses.replace(config, data_draw="seed"), 1, limits)(0, wire.introduction(None))


def test_wire_parties_bound_idle_openmp_spinning_before_torch_loads(monkeypatch):
    import subprocess
    import sys

    from vfl.wire.idle_threads import IDLE_SPINS, POLICY, SPINS, is_wire_party, sleep_when_idle

    assert all(is_wire_party(a) for a in (["serve", "--listen", ":0"], ["client"], ["train", "--transport", "tcp"],
                                          ["attack", "fsha", "--transport=tcp"]))
    assert not any(is_wire_party(a) for a in (["train"], ["train", "--transport", "local"], ["hfl", "--transport"]))
    for chosen in ({POLICY: "ACTIVE"}, {SPINS: "5"}):                  # the user's choice is kept
        monkeypatch.delenv(POLICY, raising=False)
        monkeypatch.delenv(SPINS, raising=False)
        for key, value in chosen.items():
            monkeypatch.setenv(key, value)
        sleep_when_idle()
        assert {k: os.environ.get(k) for k in (POLICY, SPINS)} == {POLICY: None, SPINS: None} | chosen
    monkeypatch.delenv(SPINS)
    sleep_when_idle()
    assert os.environ[SPINS] == IDLE_SPINS and POLICY not in os.environ
    loaded = subprocess.run([sys.executable, "-c", "import sys, splitlab.cli; print('torch' in sys.modules)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "False"                                            # so main() sets it before OpenMP reads it


def test_the_finiteness_check_of_a_frame_agrees_with_isfinite_wherever_the_bad_value_sits():
    from vfl.wire.frames import all_finite

    assert all_finite(torch.empty(0)) and all_finite(torch.randn(3, 5))
    for n in (1, 15, 16, 17, 4097):
        base = torch.randn(n)
        for position in {p for p in (0, 1, n // 2, n - 2, n - 1) if 0 <= p < n}:
            for bad in (float("nan"), float("inf"), -float("inf")):
                values = base.clone()
                values[position] = bad
                assert not all_finite(values) and not all_finite(values.view(1, n).t())

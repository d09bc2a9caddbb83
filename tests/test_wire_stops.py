"""Each side of a wire session stopped mid-epoch, mid-frame (the CNN's activations are 1.35 MB a frame), by
`kill -9` or Ctrl-C: every side still running ends with one line and exit code 2, each keeps its last finished
epoch, and `--resume` on both sides reaches the uninterrupted in-process run's weights bit for bit. Processes
on 127.0.0.1 only, each with a deadline, killed in a `finally`."""
from __future__ import annotations

import re
import signal
import time

import pytest
import torch

from theory_checks.suite import one_intra_op_thread

from test_wire_runs import (_client, _error_lines, _finish, _free_port, _kill_all, _reference_weights, _serve,
                            _wait_for, secret)  # noqa: F401 - secret is a fixture

SESSION = ("--arch", "cnn", "--epochs", "2")
"""Stopped in epoch 2, the last: resuming redoes it from epoch 1's checkpoint, as it would any middle epoch."""
SAVED = r"saved through epoch 1 in {out}; continue both sides with --resume"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, dict[str, torch.Tensor]]:
    """The uninterrupted in-process run's final weights: the same for every side and signal, so trained once (on
    one thread, as the tests' own processes run: set up before the per-test one-thread fixture)."""
    with one_intra_op_thread():
        return _reference_weights(tmp_path_factory.mktemp("uninterrupted"), *SESSION)


@pytest.mark.slow(seconds=35)
@pytest.mark.parametrize("how", ["kill-9", "ctrl-c"])
@pytest.mark.parametrize("side", ["server", "client"])
def test_either_side_stopped_mid_epoch_ends_the_other_in_one_line_and_both_resume(tmp_path, secret, side, how,
                                                                                  uninterrupted):
    port = _free_port()
    server = _serve(port, secret, tmp_path / "server", *SESSION, "--timeout", "30")
    client = _client(port, secret, tmp_path / "client", "--arch", "cnn", "--timeout", "30")
    try:
        _wait_for(tmp_path / side / "checkpoints" / "epoch-0001.pt")
        time.sleep(0.4)                                        # into epoch 2: its rounds, its frames
        stopped, other = (server, client) if side == "server" else (client, server)
        assert stopped.poll() is None, "the session ended before it could be stopped mid-epoch"
        stopped.send_signal(signal.SIGKILL if how == "kill-9" else signal.SIGINT)
        (code, err), (other_code, other_err) = _finish(stopped, 30), _finish(other, 30)
        peer = "the server" if side == "server" else "party 0"
        other_side = "client" if side == "server" else "server"
        assert other_code == 2, other_err
        said = _error_lines(other_err)
        if how == "kill-9":
            assert code == -signal.SIGKILL
            expected = rf"error: {peer} closed the connection \(its process ended or the network dropped\); "
        else:
            assert code in (2, -signal.SIGINT), err                 # see test_wire_attacks: CPython's own exit
            assert len(_error_lines(err)) == 1 and re.fullmatch(
                "error: interrupted; " + SAVED.format(out=re.escape(str(tmp_path / side))), _error_lines(err)[0]), err
            expected = rf"error: {peer} stopped: {peer} was interrupted; " if side == "client" else \
                rf"error: the server stopped: the server was interrupted; "
        assert len(said) == 1 and re.fullmatch(expected + SAVED.format(out=re.escape(str(tmp_path / other_side))),
                                               said[0]), said
        server = _serve(port, secret, tmp_path / "server", *SESSION, "--timeout", "30", "--resume")
        client = _client(port, secret, tmp_path / "client", "--arch", "cnn", "--timeout", "30", "--resume")
        assert _finish(client)[0] == 0 and _finish(server)[0] == 0
    finally:
        _kill_all(server, client)
    reference = uninterrupted
    top = torch.load(tmp_path / "server" / "top.pt", weights_only=True)["model"]
    bottom = torch.load(tmp_path / "client" / "bottom.pt", weights_only=True)["model"]
    assert all(torch.equal(top[k], reference["server"][k]) for k in reference["server"])
    assert all(torch.equal(bottom[k], reference["client"][k]) for k in reference["client"])

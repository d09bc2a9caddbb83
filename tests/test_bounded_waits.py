"""Bounds that hold whatever a peer does slowly or a disk does part way: a download's whole body has one deadline
(a server trickling a byte now and then ends it too), and `splitlab keys` writes every key or none. Everything on
127.0.0.1, each wait bounded."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from typer.testing import CliRunner

from splitlab.cli import app
from vfl import download as dl

runner = CliRunner()


def private(path, text: str):
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_a_server_trickling_its_body_ends_at_the_downloads_deadline(tmp_path):
    """A byte every 0.05 s, never silent for the 0.5 s --timeout: the whole body has one deadline (0.5 s plus
    100,000 bytes at 64 KiB/s, about 2 s), not one per read."""
    listener = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def serve():
        conn, _ = listener.accept()
        held.append(conn)
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(600):                   # at most 30 s of trickling
            if stop.wait(0.05):
                return
            try:
                conn.sendall(b"x")
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    start = time.monotonic()
    try:
        with pytest.raises(dl.DownloadError) as info, open(tmp_path / "f", "wb") as out:
            dl.fetch(f"http://127.0.0.1:{listener.getsockname()[1]}/f", out, dl.Clock(0.5))
        assert " of 100000 bytes within the download's 2 s (--timeout plus the body at 64 KiB/s): a stalled or " \
               "trickling connection" in str(info.value), str(info.value)
        assert time.monotonic() - start < 15         # the 2 s deadline, not the 30 s of trickling, however loaded
    finally:
        stop.set()
        for sock in [*held, listener]:
            sock.close()


def test_keys_on_a_disk_that_fills_up_leave_no_partial_key_folder(tmp_path, monkeypatch):
    """All of the party keys or none: the second key's file cannot be made (a full disk) and the first one and
    the folder `keys` made go again; one line, exit code 2."""
    private(tmp_path / "secret", "0123456789abcdef" * 3)
    real_open = os.open

    def full(path, flags, *args, **kwargs):
        if str(path).endswith("party-1.key"):
            raise OSError(28, os.strerror(28))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", full)
    result = runner.invoke(app, ["keys", "--secret-file", str(tmp_path / "secret"), "--parties", "3", "--out",
                                 str(tmp_path / "keys")])
    assert result.exit_code == 2 and result.stderr.startswith("error: cannot write ") and \
        "party-1.key (No space left on device)" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "keys").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")              # a folder that was there stays, with its files
    result = runner.invoke(app, ["keys", "--secret-file", str(tmp_path / "secret"), "--parties", "3", "--out",
                                 str(tmp_path / "mine")])
    assert result.exit_code == 2 and sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]

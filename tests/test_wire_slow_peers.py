"""Peers that are slow on purpose, on 127.0.0.1 with bounded loops: connections without the secret that trickle
their handshake a byte at a time hold a handshake place for one deadline per connection, not per read, so the
real client still joins (it waits its turn until its own --timeout); an authenticated peer trickling a frame is
stopped at one deadline per frame. The attack at full size (70 connections, a byte every 4 s, against the 64
places and their 10 s) is the same code with the limits scaled down here; docs/wire.md, point 5."""
from __future__ import annotations

import socket
import threading
import time

import pytest
import torch

from vfl.errors import SplitlabError
from vfl.wire import handshake
from vfl.wire.channel import PeerSilent
from vfl.wire.frames import Allow, Expect, Frame, Kind
from vfl.wire.handshake import Listener, join
from vfl.wire.tls import TlsFiles, client_context, self_signed, server_context

from test_wire_security import SECRET, _serve_in_thread, _session

PLACES, SECONDS = 4, 1.0            # the scaled-down handshake limits (64 places of 10 s in the program)


class Tricklers:
    """`count` connections that each send one byte every `every` seconds and never prove anything; each one
    the server drops is opened again at once, until `stop()` (bounded: every wait is short)."""

    def __init__(self, port: int, count: int, every: float):
        self.port, self.every, self.opened = port, every, 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                    self.opened += 1
                    while not self._stop.wait(self.every):
                        sock.sendall(b"S")
            except OSError:                 # dropped by the server (or refused): open another at once
                self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)


@pytest.fixture
def small_limits(monkeypatch):
    monkeypatch.setattr(handshake, "MAX_PENDING", PLACES)
    monkeypatch.setattr(handshake, "HANDSHAKE_SECONDS", SECONDS)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> TlsFiles:
    try:
        return self_signed(tmp_path_factory.mktemp("tls"))
    except SplitlabError as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_connections_trickling_their_handshake_cannot_keep_the_real_client_out(small_limits, tls, request):
    """More trickling connections than places (6 against 4, a byte every 0.4 s, each opened again once dropped):
    each is dropped at its connection's deadline, and the real client, waiting its turn, joins."""
    certificate = request.getfixturevalue("certificate") if tls else None
    own = server_context(TlsFiles(certificate.cert, certificate.key)) if tls else None
    listener = Listener("127.0.0.1", 0, 30, own)
    thread, outcome = _serve_in_thread(listener)
    attack = Tricklers(listener.port, PLACES + 2, 0.4)
    try:
        deadline = time.monotonic() + 10
        while attack.opened < PLACES + 2 and time.monotonic() < deadline:    # every place held before it comes
            time.sleep(0.05)
        started = time.monotonic()
        joined = join("127.0.0.1", listener.port, SECRET, 0, 1, {"me": "real"}, 20,
                      client_context(TlsFiles(ca=certificate.ca)) if tls else None)
        waited = time.monotonic() - started
        thread.join(10)
    finally:
        attack.stop()
        listener.close()
    (channel,), bodies = outcome["server"]
    assert bodies == [{"me": "real"}] and joined.terms == {"ok": 0}
    assert waited < 15                      # a few of the scaled-down deadlines, not the client's --timeout
    channel.close()
    joined.channel.close()


def test_a_session_nobody_joined_says_how_long_its_places_were_held(small_limits):
    listener = Listener("127.0.0.1", 0, 3)
    thread, outcome = _serve_in_thread(listener)
    attack = Tricklers(listener.port, PLACES + 2, 0.4)
    try:
        thread.join(20)
    finally:
        attack.stop()
        listener.close()
    message = str(outcome["server"])
    assert message.startswith("no client joined as party 0 within 3 s (--timeout); all 4 handshake places were held "
                              "for "), message
    assert "connection(s) proved nothing within their 1 s and were dropped" in message


def test_a_client_whose_turn_does_not_come_within_its_timeout_says_why(small_limits, monkeypatch):
    monkeypatch.setattr(handshake, "HANDSHAKE_SECONDS", 30.0)       # the places stay held past the client's wait
    listener = Listener("127.0.0.1", 0, 5)
    thread, _ = _serve_in_thread(listener)
    attack = Tricklers(listener.port, PLACES + 1, 0.4)
    try:
        deadline = time.monotonic() + 10
        while attack.opened < PLACES + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(SplitlabError, match=r"^the server at 127\.0\.0\.1:\d+ did not finish the handshake within "
                                                r"2 s \(--timeout\): it is not a splitlab server, or other connections "
                                                r"held every handshake place that long$"):
            join("127.0.0.1", listener.port, SECRET, 0, 1, {}, 2)
        assert time.monotonic() - started < 15       # its own 2 s, not the places' 30 s, however loaded
    finally:
        attack.stop()
        thread.join(15)
        listener.close()


def test_a_peer_trickling_a_frame_is_stopped_at_one_deadline_for_the_frame():
    """An authenticated peer sending a frame one byte every 0.2 s: refused once the frame's --timeout (1 s) is
    up, not after the 88-byte header's 18 s (a deadline per read would never end it)."""
    server, client = _session(timeout=1)
    frame = Frame(Kind.BATCH, 0, torch.arange(4)).header()
    stop = threading.Event()

    def trickle():
        for byte in frame:
            if stop.wait(0.2):
                return
            try:
                server.sock.sendall(bytes([byte]))
            except OSError:
                return

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    started = time.monotonic()
    try:
        with pytest.raises(PeerSilent, match=r"^the server sent only part of a frame within 1 s \(--timeout\); it is "
                                             r"stuck, gone or trickling$"):
            client.receive(Expect(Allow(Kind.BATCH, torch.int64, (), rows=(1, 64), values=(0, 4000))))
        assert time.monotonic() - started < 12       # the frame's 1 s, not the header's 18 s of trickling
    finally:
        stop.set()
        sender.join(5)
        server.close()
        client.close()

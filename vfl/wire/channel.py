"""The transport: frames to and from one peer over one TCP connection (optionally TLS), each authenticated.

The connection is the one the handshake ran on (`handshake.py`), so the peer that proved the key is the only
one that can put a frame on it. A frame is its header, its payload (a tensor's raw bytes) and, after them, an
HMAC-SHA256 under this direction's key (`keys.frame_keys`) over the frame's sequence number, header and
payload: a frame that was injected, altered, replayed, reordered or dropped, or a payload longer than its
header declared, fails the check and is refused with one line before anything of it is used. Over TLS the
records are authenticated by TLS itself (with keys only the two ends hold), so frames carry no MAC of their own.

Cost: a frame is written in one pass with no wait between header and payload (small frames in one write;
large ones in slices hashed as they go, so the receiver hashes the slice before while the sender hashes the
next), read straight into the tensor's memory, and no thread or queue sits between the caller and the socket.
Blocking calls are bounded by the socket's timeout (`--timeout`: a silent peer is reported) and Ctrl-C
reaches the caller at once (a blocking wait returns to Python for every signal), between writes: a frame that
Ctrl-C stopped part way is finished before the ABORT that says why, so the peer reads whole frames to the end.
"""
from __future__ import annotations

import hashlib
import hmac
import select
import socket
import ssl
import struct
import time
from dataclasses import dataclass

import torch

from vfl.errors import SplitlabError
from vfl.runtime import UNINTERRUPTED
from vfl.wire.frames import HEADER, Expect, Frame, Kind, reason_of

MAC_BYTES = 32
SLICE = 128 * 1024                    # bytes hashed and written at a time in a large frame
SMALL = 64 * 1024                     # a frame up to this size is written in one call
ABORT_WITHIN = 2.0                    # seconds an ABORT (and a frame before it) waits for a peer to read
_SEQUENCE = struct.Struct("<Q")


class PeerStopped(SplitlabError):
    """The peer said it stops (an ABORT frame, its authenticated `reason`), or its connection is gone: nothing
    more can be sent to it."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason


class PeerSilent(PeerStopped):
    """The peer sent (or took) nothing within the timeout: it is stuck or gone, and will not take more."""


class Deadline:
    """One bound for a whole exchange (a frame, a handshake) however its bytes trickle in: each blocking call
    waits only for what is left of it (`arm`), so a peer sending a byte now and then cannot hold this side."""

    def __init__(self, seconds: float):
        self.seconds, self.at = seconds, time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def arm(self, sock: socket.socket) -> socket.socket:
        """`sock` with its timeout set to what is left (socket.timeout once nothing is)."""
        left = self.left()
        if left <= 0:
            raise socket.timeout("timed out")
        sock.settimeout(left)
        return sock


def transport_error(peer: str, exc: BaseException) -> SplitlabError:
    """One line for what the socket said went wrong with `peer` (a timeout aside: `Channel` names its wait)."""
    if isinstance(exc, (ConnectionError, EOFError, ssl.SSLEOFError)):
        return PeerStopped(f"{peer} closed the connection (its process ended or the network dropped)")
    text = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return SplitlabError(f"{peer}: transport error ({str(text).splitlines()[0][:120]})")


@dataclass
class Traffic:
    """What crossed this channel in the session (the handshake aside): frames and bytes (headers and MACs
    included) each way."""
    frames_sent: int = 0
    bytes_sent: int = 0
    frames_received: int = 0
    bytes_received: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class _Mac:
    """One direction's MACs: HMAC-SHA256 under `key` over the frame's sequence number and bytes."""

    def __init__(self, key: bytes):
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)      # the key schedule, copied per frame
        self.sequence = 0

    def start(self, header: bytes):
        mac = self._keyed.copy()
        mac.update(_SEQUENCE.pack(self.sequence))
        mac.update(header)
        self.sequence += 1
        return mac


def _payload_view(tensor: torch.Tensor) -> memoryview:
    """The tensor's bytes without a copy (a contiguous CPU copy first if it is not one already)."""
    t = tensor.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.cpu().contiguous()
    return memoryview(t.numpy()).cast("B") if t.numel() else memoryview(b"")


class _Outgoing:
    """A frame being written and how far it got: small frames as one piece, large ones as the header, payload
    slices (each hashed as it is queued, so the receiver hashes one slice while the sender hashes the next) and
    the MAC."""

    def __init__(self, header: bytes, payload: memoryview, mac: "hmac.HMAC | None"):
        self.payload, self.at, self.mac = payload, 0, mac
        if len(payload) <= SMALL:
            if mac is not None:
                mac.update(payload)
            self.queue = [memoryview(b"".join((header, payload, mac.digest() if mac is not None else b"")))]
            self.at = len(payload)
        else:
            self.queue = [memoryview(header)]

    def head(self) -> memoryview | None:
        """The bytes to write next (at most a slice), or None once the frame is out."""
        if not self.queue and self.at < len(self.payload):
            piece = self.payload[self.at:self.at + SLICE]
            if self.mac is not None:
                self.mac.update(piece)
            self.at += len(piece)
            self.queue = [piece] + ([memoryview(self.mac.digest())]
                                    if self.mac is not None and self.at == len(self.payload) else [])
        return self.queue[0][:SLICE] if self.queue else None

    def wrote(self, n: int) -> None:
        self.queue[0] = self.queue[0][n:]
        if not self.queue[0]:
            self.queue.pop(0)


class Channel:
    """Frames to and from the peer on `sock` (connected, handshake done); `name` says who it is in errors
    ("party 0"). `keys` = (the key of frames this side sends, the key of frames it receives), or None over
    TLS. `timeout` bounds every wait for the peer."""

    def __init__(self, sock: socket.socket, name: str, timeout: float, keys: tuple[bytes, bytes] | None):
        self.sock, self.name, self.timeout = sock, name, timeout
        sock.settimeout(timeout)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._send_mac, self._receive_mac = (None, None) if keys is None else (_Mac(keys[0]), _Mac(keys[1]))
        self._broken: SplitlabError | None = None           # nothing more is received after a failure
        self._send_broken = False                            # a send failed mid-frame: nothing more is sent
        self._outgoing: _Outgoing | None = None              # a frame a Ctrl-C stopped part way
        self._started = False                                # a byte of the frame being received came
        self._writable = select.poll()
        self._writable.register(sock, select.POLLOUT)
        self.traffic = Traffic()

    # --- sending -------------------------------------------------------------------------------------------

    def send(self, frame: Frame, within: float | None = None) -> None:
        """Write `frame` (header, payload, MAC); returns once the kernel took it. A failure is one line. A frame
        a Ctrl-C stopped part way is finished first, so the peer still reads whole frames (an ABORT after it).
        `within`: seconds for the whole call (an ABORT to a peer that may have stopped reading), else the
        channel's timeout: a peer that takes the bytes too slowly is stuck, however it trickles."""
        if self._send_broken:
            raise self._broken or PeerStopped(f"{self.name}: the connection broke while sending")
        payload = _payload_view(frame.tensor) if frame.tensor is not None else memoryview(b"")
        deadline = time.monotonic() + (self.timeout if within is None else within)
        try:
            self._flush(deadline)
            with UNINTERRUPTED:                                     # the MAC's sequence number counts this frame
                header = frame.header()
                mac = self._send_mac.start(header) if self._send_mac is not None else None
                self._outgoing = _Outgoing(header, payload, mac)
            self._flush(deadline)
        except (OSError, ssl.SSLError) as exc:
            self._send_broken = True
            error = self._failed(exc, "took no frame")
            self._broken = self._broken or error
            raise error from None
        self.traffic.frames_sent += 1
        self.traffic.bytes_sent += len(header) + len(payload) + (MAC_BYTES if mac is not None else 0)

    def _flush(self, deadline: float) -> None:
        """Write what is left of the frame under way. Every wait is outside the blocks an interrupt waits for
        (Ctrl-C ends it at once); inside them the socket takes what it can without waiting and the bookkeeping
        follows, so what is left stays exact."""
        out = self._outgoing
        while out is not None:
            with UNINTERRUPTED:
                view = out.head()
            if view is None:
                self._outgoing = None
                return
            wait = deadline - time.monotonic()
            if wait <= 0 or not self._writable.poll(wait * 1000):
                raise socket.timeout("timed out")
            with UNINTERRUPTED:
                out.wrote(self._send_now(view))

    def _send_now(self, view: memoryview) -> int:
        """What the socket takes of `view` without waiting (0 when it takes nothing yet: TLS retries the same
        bytes)."""
        self.sock.settimeout(0.0)
        try:
            return self.sock.send(view)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return 0
        finally:
            self.sock.settimeout(self.timeout)

    # --- receiving -----------------------------------------------------------------------------------------

    def receive(self, expect: Expect) -> Frame:
        """The peer's next frame once it passed `expect`'s checks and its MAC. An ABORT raises with the
        peer's reason. After any failure the channel receives nothing more (the stream's place is lost)."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._receive(expect)
        except SplitlabError as exc:
            self._broken = exc
            raise
        except (OSError, EOFError, ssl.SSLError) as exc:      # EOFError: the peer closed at or inside a frame
            self._broken = self._failed(exc, "sent nothing")
            raise self._broken from None

    def _receive(self, expect: Expect) -> Frame:
        deadline = Deadline(self.timeout)              # the whole frame, however its bytes trickle in
        self._started = False
        header = bytes(self._read_exact(bytearray(HEADER.size), None, deadline))
        allow, step, shape = expect.check_header(list(HEADER.unpack(header)), self.name)
        mac = self._receive_mac.start(header) if self._receive_mac is not None else None
        tensor = None
        if shape is not None:
            tensor = torch.empty(shape, dtype=allow.dtype)
            if tensor.numel():
                self._read_exact(memoryview(tensor.numpy()).cast("B"), mac, deadline)
        if mac is not None:
            claimed = self._read_exact(bytearray(MAC_BYTES), None, deadline)
            if not hmac.compare_digest(mac.digest(), bytes(claimed)):
                raise SplitlabError(f"{self.name} sent a frame that failed its authentication (forged, replayed, "
                                    "or longer than its header declared); refused")
        frame = Frame(allow.kind, step, tensor)
        self.traffic.frames_received += 1
        self.traffic.bytes_received += frame.nbytes + (MAC_BYTES if mac is not None else 0)
        if frame.kind is Kind.ABORT:
            raise PeerStopped(f"{self.name} stopped: {reason_of(frame)}", reason_of(frame))
        if tensor is not None:
            expect.check_payload(allow, tensor, step, self.name)
        return frame

    def _read_exact(self, buffer, mac, deadline: Deadline):
        view, got = memoryview(buffer), 0
        while got < len(view):
            n = deadline.arm(self.sock).recv_into(view[got:], min(len(view) - got, SLICE))
            if n == 0:
                raise EOFError
            self._started = True
            if mac is not None:
                mac.update(view[got:got + n])
            got += n
        return buffer

    # --- ending --------------------------------------------------------------------------------------------

    @property
    def broken(self) -> SplitlabError | None:
        """Why the channel receives nothing more (None while it works)."""
        return self._broken

    @property
    def peer_stopped(self) -> bool:
        return isinstance(self._broken, PeerStopped)

    def finish(self, timeout: float) -> None:
        """After the last frame: say so (half-close) and wait up to `timeout` seconds for the peer to close
        its end, so it has read everything before this side goes."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            self._drain(timeout)
        except (OSError, ssl.SSLError):
            pass

    def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            if not self.sock.recv(SLICE):
                return

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _failed(self, exc: BaseException, silence: str) -> SplitlabError:
        if isinstance(exc, (socket.timeout, TimeoutError)):
            if silence == "sent nothing" and self._started:
                return PeerSilent(f"{self.name} sent only part of a frame within {self.timeout:g} s (--timeout); it "
                                  "is stuck, gone or trickling")
            return PeerSilent(f"{self.name} {silence} for {self.timeout:g} s (--timeout); it is stuck or gone")
        return transport_error(self.name, exc)


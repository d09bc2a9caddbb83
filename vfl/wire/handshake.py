"""The handshake: who may join, on the connection that then carries the tensors, and the session's terms.

The server listens on one TCP socket (127.0.0.1 unless told otherwise); each client opens one connection to it
(TLS first, where configured: `tls.py`), and that connection carries everything that follows:

    client -> server   hello: protocol, party slot k, parties K, a fresh nonce Nc              (small JSON)
    server -> client   a fresh nonce Ns                                                       (small JSON)
    client -> server   proof: HMAC(key_k, protocol, "client", Ns, Nc, k, K)
    server -> client   its own proof ("server"), sent only once the client's verified; or a refusal
    ---- from here every frame carries a MAC under a key derived from key_k and both nonces (`keys.py`) ----
    client -> server   HELLO: its configuration (dataset, architecture, cut layer, activation shape, samples,
                       saved epochs)
    server -> client   TERMS (epochs, batch size, limits, the epoch to start from), or an ABORT with the reason

key_k is party k's own key (`keys.party_key`), so a client proves slot k and no other. Nothing before the
proofs is trusted: a connection that speaks something else, proves nothing, or is slow is dropped without
ending the session (the server keeps waiting for a real client until `--timeout`, then says how many
connections failed to prove which slot); a refusal before the proofs is a code the client words itself, so
no text of a process without the key reaches the user. A second client proving a slot already taken is told
so (authenticated) and the session goes on with the first. Each pre-proof message is at most 1 KiB and each
connection's pre-proof steps (TLS's handshake included) have one deadline of 10 s, however its bytes trickle
in; at most 64 connections are handled at once, and while all are held the next ones wait in the listening
queue (first come, first served). A client waits for its place until its own `--timeout`.
"""
from __future__ import annotations

import json
import queue
import re
import select
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from vfl.errors import SplitlabError
from vfl.wire.channel import ABORT_WITHIN, Channel, Deadline, PeerSilent, PeerStopped, Traffic
from vfl.wire.frames import Expect, Kind, abort, json_allowed, json_frame, json_of
from vfl.wire.keys import Secret, frame_keys, new_nonce, party_key, proof, proven

PROTOCOL = "splitlab-wire/2"
MAGIC = b"SPL2"
PREFIX = struct.Struct("<4sH")
MAX_MESSAGE = 1024                       # bytes of a pre-proof message
HANDSHAKE_SECONDS = 10.0                 # a connection's pre-proof steps (capped by --timeout)
MAX_PENDING = 64                         # connections in their handshake at once
REFUSAL_GRACE = 2.0
_NONCE = re.compile(r"[0-9a-f]{32}")


def parse_address(text: str, option: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets: [::1]:29500) with a port from 0 (listen: any free port) to 65535."""
    host, sep, port = str(text).strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise SplitlabError(f"{option} {text!r} is not HOST:PORT; e.g. {option} 127.0.0.1:29500")
    return host, int(port)


def _send(sock: socket.socket, message: dict[str, Any], deadline: Deadline) -> None:
    raw = json.dumps(message, separators=(",", ":")).encode()
    deadline.arm(sock).sendall(PREFIX.pack(MAGIC, len(raw)) + raw)      # sendall: one wait for the whole


def _recv_exact(sock: socket.socket, size: int, deadline: Deadline) -> bytes:
    data = b""
    while len(data) < size:
        chunk = deadline.arm(sock).recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _recv(sock: socket.socket, who: str, what: str, deadline: Deadline) -> dict[str, Any]:
    """One pre-proof message from `who` (a JSON object of at most 1 KiB), or a one-line refusal."""
    magic, size = PREFIX.unpack(_recv_exact(sock, PREFIX.size, deadline))
    if magic != MAGIC or size > MAX_MESSAGE:
        raise SplitlabError(f"{who} does not speak splitlab's wire protocol; is it a splitlab {what}?")
    try:
        value = json.loads(_recv_exact(sock, size, deadline).decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise SplitlabError(f"{who} sent a malformed handshake; run the same splitlab on both sides")
    return value


def _nonce(value: Any) -> str | None:
    return value if isinstance(value, str) and _NONCE.fullmatch(value) else None


@dataclass(frozen=True)
class Joined:
    """A client's side of a finished handshake: its channel to the server and the server's terms."""
    channel: Channel
    terms: dict[str, Any]


class Listener:
    """The server's end: a socket bound to `host:port` (port 0: any free one, see `address`), optionally TLS."""

    def __init__(self, host: str, port: int, timeout: float, tls: ssl.SSLContext | None = None, *,
                 places: int | None = None, handshake_seconds: float | None = None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.places = MAX_PENDING if places is None else places
        self.handshake_seconds = HANDSHAKE_SECONDS if handshake_seconds is None else handshake_seconds
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
            self._socket.listen(self.places)
        except OSError as exc:
            self._socket.close()
            raise SplitlabError(f"cannot listen on {host}:{port} ({exc.strerror}); pass --listen another "
                                "HOST:PORT") from None
        self.host, self.port = host, self._socket.getsockname()[1]
        self.timeout, self.tls = timeout, tls
        self._open = False
        self._lock = threading.Lock()
        self._pending = 0
        self._expired = 0                   # connections dropped at their handshake's deadline
        self._full_seconds = 0.0            # how long every place was held, this session

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def accept(self, secret: Secret, parties: int,
               terms: Callable[[int, dict[str, Any]], dict[str, Any]]) -> tuple[list[Channel], list[dict]]:
        """Wait for `parties` clients that prove their keys, then `terms(party, configuration)` for each (which
        raises `SplitlabError` to refuse the session); answer each. Returns their channels and configurations,
        by party. On any failure every admitted client is told why."""
        keys = [party_key(secret.shared(), k) for k in range(parties)]
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        failed: Counter = Counter()                          # party -> connections that did not prove its key
        slots: dict[int, tuple[Channel, dict]] = {}
        self._open = True
        try:
            self._gather(keys, arrived, failed, slots)
            channels, bodies = [slots[k][0] for k in range(parties)], [slots[k][1] for k in range(parties)]
            answers = [terms(k, body) for k, body in enumerate(bodies)]
            for channel, answer in zip(channels, answers):
                channel.send(json_frame(Kind.TERMS, answer))
                channel.traffic = Traffic()
            return channels, bodies
        except BaseException as exc:
            reason = str(exc) if isinstance(exc, SplitlabError) else "the server was interrupted" \
                if isinstance(exc, KeyboardInterrupt) else f"the server failed ({type(exc).__name__})"
            _refuse([channel for channel, _ in slots.values()], reason)
            raise
        finally:
            self._open = False

    def _gather(self, keys: list[bytes], arrived: queue.SimpleQueue, failed: Counter,
                slots: dict[int, tuple[Channel, dict]]) -> None:
        deadline = time.monotonic() + self.timeout
        while len(slots) < len(keys):
            while not arrived.empty():
                party, channel, body = arrived.get()
                if party in slots:
                    _refuse([channel], f"another client already joined as party {party}; give each client its own "
                                       "--party")
                else:
                    slots[party] = (channel, body)
            left = deadline - time.monotonic()
            if len(slots) == len(keys):
                break
            if left <= 0:
                missing = min(set(range(len(keys))) - set(slots))
                unproven = f"; {failed[missing]} connection(s) did not prove party {missing}'s key (another " \
                    "--secret-file?)" if failed[missing] else ""
                raise SplitlabError(f"no client joined as party {missing} within {self.timeout:g} s (--timeout)"
                                    f"{unproven}{self._held()}; start `splitlab client --connect {self.address} "
                                    f"--party {missing}` with its key")
            if self._pending >= self.places:          # every place held: the next connection waits its turn
                time.sleep(min(left, 0.05))           # in the listening queue (first come, first served)
                self._full_seconds += min(left, 0.05)
            elif select.select([self._socket], [], [], min(left, 0.1))[0]:
                self._take(keys, arrived, failed)

    def _held(self) -> str:
        """What held the handshake's places, for the error of a session nobody joined."""
        if not self._expired and self._full_seconds < 1:
            return ""
        full = f"; all {self.places} handshake places were held for {self._full_seconds:.0f} s of it" \
            if self._full_seconds >= 1 else ""
        return (f"{full}; {self._expired} connection(s) proved nothing within their {self._limit():g} s and were "
                "dropped")

    def _limit(self) -> float:
        return min(self.timeout, self.handshake_seconds)

    def _take(self, keys: list[bytes], arrived: queue.SimpleQueue, failed: Counter) -> None:
        try:
            conn, _ = self._socket.accept()
        except OSError:
            return
        with self._lock:
            self._pending += 1
        threading.Thread(target=self._admit, args=(conn, keys, arrived, failed), daemon=True,
                         name="splitlab handshake").start()

    def _admit(self, conn: socket.socket, keys: list[bytes], arrived: queue.SimpleQueue, failed: Counter) -> None:
        """One connection's handshake (in a thread of its own); a client that proves its key and sends its
        configuration is put in `arrived`, anything else is dropped."""
        deadline = Deadline(self._limit())              # the whole pre-proof handshake, TLS included
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(deadline.arm(conn), server_side=True)   # one wait for all of it
            proven_party = self._prove(conn, keys, failed, deadline)
            if proven_party is not None:
                party, channel = proven_party
                body = json_of(channel.receive(Expect(json_allowed(Kind.HELLO))), channel.name)
                if self._open:
                    arrived.put((party, channel, body))
                    return
                _refuse([channel], "the session started without this client")
        except (socket.timeout, TimeoutError):
            with self._lock:
                self._expired += 1                  # proved nothing in time: its place goes to the next
        except (OSError, EOFError, ssl.SSLError, SplitlabError, struct.error):
            pass                                    # not a client that proved a key: nothing to tell
        finally:
            with self._lock:
                self._pending -= 1
        conn.close()

    def _prove(self, conn: socket.socket, keys: list[bytes], failed: Counter,
               deadline: Deadline) -> tuple[int, Channel] | None:
        """The party slot a client proved and its channel, or None (it was told the refusal's code)."""
        hello = _recv(conn, "a client", "client", deadline)
        party, parties, client_nonce = hello.get("party"), hello.get("parties"), _nonce(hello.get("nonce"))
        refusal = {"refused": "protocol"} if hello.get("protocol") != PROTOCOL else \
            {"refused": "parties", "parties": len(keys)} if parties != len(keys) else \
            {"refused": "malformed"} if type(party) is not int or not 0 <= party < len(keys) or client_nonce is None \
            else None
        if refusal is not None:
            _send(conn, refusal, deadline)
            return None
        server_nonce = new_nonce()
        _send(conn, {"nonce": server_nonce}, deadline)
        context = (PROTOCOL, server_nonce, client_nonce, party, len(keys))
        if not proven(_recv(conn, "a client", "client", deadline).get("proof"), keys[party], "client", *context):
            with self._lock:
                failed[party] += 1
            _send(conn, {"refused": "proof"}, deadline)
            return None
        _send(conn, {"proof": proof(keys[party], "server", *context)}, deadline)
        into, out = frame_keys(keys[party], PROTOCOL, server_nonce, client_nonce, party)
        return party, Channel(conn, f"party {party}", self.timeout, None if self.tls is not None else (out, into))

    def close(self) -> None:
        self._open = False
        try:
            self._socket.close()
        except OSError:
            pass


def _refuse(channels: list[Channel], reason: str) -> None:
    """Tell admitted clients why they are refused (authenticated), then close their connections."""
    for channel in channels:
        try:
            channel.send(abort(reason), within=ABORT_WITHIN)
        except SplitlabError:
            pass
    for channel in channels:
        channel.finish(REFUSAL_GRACE)
        channel.close()


REFUSALS = {
    "protocol": "the server at {where} speaks another protocol than " + PROTOCOL + "; run the same splitlab on both "
                "sides",
    "parties": "the server at {where} expects --parties {parties}, this client was given --parties {mine}; give both "
               "sides the same --parties",
    "malformed": "the server at {where} could not read this client's hello; run the same splitlab on both sides",
    "proof": "the server at {where} did not accept this client's proof of party {party}'s key (another "
             "--secret-file?); refused before any tensor was exchanged",
}


def _refused(answer: dict[str, Any], where: str, party: int, parties: int) -> SplitlabError:
    """The client's own words for a refusal before the proofs (unauthenticated: no text of the peer's shown)."""
    said = answer.get("parties")
    template = REFUSALS.get(answer.get("refused"), "the server at {where} refused this client before any proof "
                                                   "was exchanged; run the same splitlab on both sides")
    return SplitlabError(template.format(where=where, party=party, mine=parties,
                                         parties=said if isinstance(said, int) and 0 < said < 1000 else "another"))


def _connect(host: str, port: int, timeout: float, deadline: Deadline) -> socket.socket:
    """A connection to the server, tried again until the deadline (`timeout` from the start) while nothing
    listens there yet."""
    where = f"{host}:{port}"
    while True:
        left = deadline.left()
        try:
            return socket.create_connection((host, port), timeout=max(left, 0.001))
        except ConnectionRefusedError:
            if left <= 0.2:
                raise SplitlabError(f"no splitlab server answered at {where} within {timeout:g} s (connection "
                                    f"refused); start `splitlab serve --listen {where}` first") from None
            time.sleep(0.2)
        except (socket.timeout, TimeoutError):
            raise SplitlabError(f"no splitlab server answered at {where} within {timeout:g} s (--timeout)") from None
        except OSError as exc:
            raise SplitlabError(f"cannot reach {where} ({exc.strerror or exc})") from None


def join(host: str, port: int, secret: Secret, party: int, parties: int, body: dict[str, Any], timeout: float,
         tls: ssl.SSLContext | None = None) -> Joined:
    """The client's side: connect, prove party `party`'s key, check the server's proof, send `body` (the
    configuration) and receive the server's terms. Raises `SplitlabError` (one line) when refused."""
    key = secret.for_party(party)
    where = f"{host}:{port}"
    deadline = Deadline(timeout)                    # connecting and proving, waiting for a place included
    sock = _connect(host, port, timeout, deadline)
    try:
        if tls is not None:
            sock = _tls(tls, sock, host, where, timeout, deadline)
        channel = _prove(sock, key, where, party, parties, tls is not None, timeout, deadline)
        channel.send(json_frame(Kind.HELLO, body))
        try:
            terms = json_of(channel.receive(Expect(json_allowed(Kind.TERMS))), "the server")
        except PeerSilent:
            raise SplitlabError(f"the server at {where} did not answer within {timeout:g} s (--timeout); it waits "
                                "for every party to join") from None
        except PeerStopped as exc:
            if exc.reason is None:
                raise
            raise SplitlabError(f"the server refused this client: {exc.reason}") from None
        channel.traffic = Traffic()
        return Joined(channel, terms)
    except BaseException:
        sock.close()
        raise


def _tls(context: ssl.SSLContext, sock: socket.socket, host: str, where: str, timeout: float,
         deadline: Deadline) -> ssl.SSLSocket:
    try:
        return context.wrap_socket(deadline.arm(sock), server_hostname=host)
    except (socket.timeout, TimeoutError):
        raise SplitlabError(_unanswered(where, timeout)) from None
    except ssl.SSLError as exc:
        raise SplitlabError(f"TLS with the server at {where} failed ({exc.reason or exc}); does it listen with "
                            "--tls-cert, signed by this --tls-ca for this host?") from None
    except (OSError, EOFError):
        raise SplitlabError(f"the server at {where} closed the connection during TLS; does it listen with "
                            "--tls-cert?") from None


def _unanswered(where: str, timeout: float) -> str:
    return (f"the server at {where} did not finish the handshake within {timeout:g} s (--timeout): it is not a "
            "splitlab server, or other connections held every handshake place that long")


def _prove(sock: socket.socket, key: bytes, where: str, party: int, parties: int, over_tls: bool,
           timeout: float, deadline: Deadline) -> Channel:
    server = f"the server at {where}"
    try:
        client_nonce = new_nonce()
        _send(sock, {"protocol": PROTOCOL, "party": party, "parties": parties, "nonce": client_nonce}, deadline)
        answer = _recv(sock, server, "server", deadline)
        server_nonce = _nonce(answer.get("nonce"))
        if server_nonce is None:
            raise _refused(answer, where, party, parties)
        context = (PROTOCOL, server_nonce, client_nonce, party, parties)
        _send(sock, {"proof": proof(key, "client", *context)}, deadline)
        answer = _recv(sock, server, "server", deadline)
        if "proof" not in answer:
            raise _refused(answer, where, party, parties)
        if not proven(answer["proof"], key, "server", *context):
            raise SplitlabError(f"{server} did not prove party {party}'s key (it does not hold the secret); "
                                "refused before any tensor was exchanged")
    except (socket.timeout, TimeoutError):
        raise SplitlabError(_unanswered(where, timeout)) from None
    except (OSError, EOFError, struct.error):
        raise SplitlabError(f"{server} closed the connection during the handshake"
                            + ("" if over_tls else " (if it uses TLS, give --tls-ca)")) from None
    return Channel(sock, "the server", timeout, None if over_tls else frame_keys(key, *context[:-1]))

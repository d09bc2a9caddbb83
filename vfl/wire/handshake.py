"""The handshake, over torch.distributed's TCPStore: who may join, and what both sides agreed on.

The server listens (a TCPStore on a socket bound to HOST:PORT, 127.0.0.1 unless told otherwise) and posts
a hello with a fresh random nonce. Each client claims its party slot, then posts its own nonce, its
configuration (dataset, architecture, cut layer, parties, the shape of the activations it will send, its
saved epochs) and a proof: HMAC-SHA256 under the shared secret of both nonces, its slot and that
configuration. The server checks every proof (in constant time) and refuses the whole session, with one
line on each side, before anything else is exchanged when one fails; then it checks each configuration
against its own and answers with the session's terms (epochs, batch size, limits, the epoch to start
from) and a proof of its own, which the client checks in turn. Only then do both sides build the gloo
process group that carries the tensors (`channel.py`), so a peer without the secret is never handed one by
either party. The store itself is not authenticated: a host that can reach the port can read or write its
keys (the hello, the rendezvous), so it can disrupt a session, though not join it. The secret never crosses
the wire; the tensors after the handshake are not encrypted (gloo cannot):
outside one machine, run the parties over a private network or a tunnel.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch.distributed as dist

from vfl.errors import SplitlabError
from vfl.wire.channel import interruptible

PROTOCOL = "splitlab-wire/1"
MIN_SECRET_BYTES = 16
POLL_SECONDS = 0.05
REFUSAL_GRACE = 2.0
_HELLO, _PARTY = "splitlab/hello", "splitlab/party/{}/{}"


def read_secret(path: Path | str | None) -> bytes:
    """The shared secret: the file's bytes without surrounding whitespace, at least 16 of them."""
    hint = "write one with `head -c 32 /dev/urandom | base64 > secret` and give both sides --secret-file secret"
    if path is None:
        raise SplitlabError(f"both sides need --secret-file; {hint}")
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as exc:
        raise SplitlabError(f"--secret-file {path}: cannot read it ({exc.strerror}); {hint}") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise SplitlabError(f"--secret-file {path} holds {len(secret)} bytes, fewer than {MIN_SECRET_BYTES}; {hint}")
    return secret


def parse_address(text: str, option: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets: [::1]:29500) with a port from 0 (listen: any free port) to 65535."""
    host, sep, port = str(text).strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise SplitlabError(f"{option} {text!r} is not HOST:PORT; e.g. {option} 127.0.0.1:29500")
    return host, int(port)


def local_address_towards(host: str, port: int) -> str:
    """The address of this machine on the route to `host` (what the peers' gloo sockets must reach)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:     # UDP connect: picks a route, sends nothing
        try:
            probe.connect((host, port or 1))
            return probe.getsockname()[0]
        except OSError:
            return host


def _proof(secret: bytes, role: str, server_nonce: str, client_nonce: str, party: int, body: Any) -> bytes:
    message = json.dumps([PROTOCOL, role, server_nonce, client_nonce, party, body], sort_keys=True,
                         separators=(",", ":")).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest().encode()


def _proven(secret: bytes, claimed: Any, *context: Any) -> bool:
    return isinstance(claimed, str) and hmac.compare_digest(_proof(secret, *context), claimed.encode("utf-8", "replace"))


def _json(raw: bytes, who: str) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise SplitlabError(f"{who} sent a malformed handshake; run the same splitlab on both sides")
    return value


def _wait_for(store: dist.Store, keys: list[str], timeout: float) -> list[str]:
    """Poll until every key exists or `timeout` passes; returns the keys still missing (Ctrl-C works)."""
    deadline = time.monotonic() + timeout
    missing = list(keys)
    while missing:
        missing = [k for k in missing if not store.check([k])]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(POLL_SECONDS)
    return missing


@dataclass(frozen=True)
class Joined:
    """A client's side of a finished handshake."""
    store: dist.Store
    terms: dict[str, Any]            # what the server answered (epochs, batch size, limits, start epoch)
    session: str                     # the server's nonce: names this session's keys in the store


class Listener:
    """The server's end: a TCPStore on a socket bound to `host:port` (port 0: any free one, see `address`)."""

    def __init__(self, host: str, port: int, timeout: float):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
            self._socket.listen(64)
        except OSError as exc:
            self._socket.close()
            raise SplitlabError(f"cannot listen on {host}:{port} ({exc.strerror}); pass --listen another "
                                "HOST:PORT") from None
        self.host, self.port = host, self._socket.getsockname()[1]
        self.timeout = timeout
        # the store takes the socket over (and closes it): binding it here is what keeps the store on `host`
        self.store = dist.TCPStore(host, self.port, None, True, datetime.timedelta(seconds=timeout),
                                   wait_for_workers=False, master_listen_fd=self._socket.detach())
        self.session = secrets.token_hex(16)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def accept(self, secret: bytes, parties: int, terms: Callable[[int, dict[str, Any]], dict[str, Any]]) -> list[dict]:
        """Wait for `parties` clients, check their proofs, then `terms(party, configuration)` (which raises
        `SplitlabError` to refuse); answer each. Returns the clients' configurations, by party."""
        self.store.set(_HELLO, json.dumps({"protocol": PROTOCOL, "nonce": self.session, "parties": parties}))
        keys = [_PARTY.format(k, "hello") for k in range(parties)]
        missing = _wait_for(self.store, keys, self.timeout)
        if missing:
            party = keys.index(missing[0])
            raise SplitlabError(f"no client joined as party {party} within {self.timeout:g} s (--timeout); start "
                                f"`splitlab client --connect {self.address} --party {party}` with the same "
                                "--secret-file")
        try:
            hellos = [_json(self.store.get(key), f"party {k}") for k, key in enumerate(keys)]
            for k, hello in enumerate(hellos):
                if not _proven(secret, hello.get("proof"), "client", self.session, str(hello.get("nonce")), k,
                               hello.get("body")):
                    raise SplitlabError(f"party {k} did not prove the shared secret (another --secret-file?); "
                                        "refused before any tensor was exchanged")
            answers = [terms(k, hello["body"]) for k, hello in enumerate(hellos)]
        except SplitlabError as exc:
            for k in range(parties):
                self.store.set(_PARTY.format(k, "verdict"), json.dumps({"accepted": False, "reason": str(exc)}))
            # give the clients a moment to read why (closing the store at once would cut them off first)
            _wait_for(self.store, [_PARTY.format(k, "read") for k in range(parties)], REFUSAL_GRACE)
            raise
        for k, (hello, answer) in enumerate(zip(hellos, answers)):
            proof = _proof(secret, "server", self.session, str(hello["nonce"]), k, answer).decode()
            self.store.set(_PARTY.format(k, "verdict"), json.dumps({"accepted": True, "body": answer, "proof": proof}))
        return [hello["body"] for hello in hellos]

    def close(self) -> None:
        self.store = None                # the last reference: the store stops listening


def join(host: str, port: int, secret: bytes, party: int, parties: int, body: dict[str, Any],
         timeout: float) -> Joined:
    """The client's side: connect to the server's store, prove the secret with `body`, check the server's
    proof on its answer. Raises `SplitlabError` with the server's reason when refused."""
    where = f"{host}:{port}"
    try:
        store = interruptible(lambda: dist.TCPStore(host, port, None, False, datetime.timedelta(seconds=timeout)),
                              timeout + 5, f"connecting to the server at {where}")
    except (RuntimeError, OSError) as exc:              # torch's DistNetworkError/DistStoreError included
        raise SplitlabError(f"no splitlab server answered at {where} within {timeout:g} s "
                            f"({str(exc).splitlines()[0][:60] if str(exc) else type(exc).__name__}); start "
                            f"`splitlab serve --listen {where}` first") from None
    try:
        return _introduce(store, where, secret, party, parties, body, timeout)
    except (RuntimeError, OSError):                     # the store's connection dropped
        raise SplitlabError(f"the server at {where} closed the connection during the handshake") from None


def _introduce(store: dist.Store, where: str, secret: bytes, party: int, parties: int, body: dict[str, Any],
               timeout: float) -> Joined:
    if _wait_for(store, [_HELLO], timeout):
        raise SplitlabError(f"the server at {where} sent no hello within {timeout:g} s; is it a splitlab server?")
    hello = _json(store.get(_HELLO), f"the server at {where}")
    if hello.get("protocol") != PROTOCOL:
        raise SplitlabError(f"the server at {where} speaks {hello.get('protocol')!r}, this client {PROTOCOL!r}; "
                            "run the same splitlab on both sides")
    if hello.get("parties") != parties:
        raise SplitlabError(f"the server at {where} expects --parties {hello.get('parties')}, this client was "
                            f"given --parties {parties}; give both sides the same --parties")
    if store.add(_PARTY.format(party, "claims"), 1) != 1:
        raise SplitlabError(f"another client already joined as party {party}; give each client its own --party")
    session, nonce = str(hello.get("nonce")), secrets.token_hex(16)
    proof = _proof(secret, "client", session, nonce, party, body).decode()
    store.set(_PARTY.format(party, "hello"), json.dumps({"nonce": nonce, "body": body, "proof": proof}))
    if _wait_for(store, [_PARTY.format(party, "verdict")], timeout):
        raise SplitlabError(f"the server at {where} did not answer within {timeout:g} s (--timeout); it waits "
                            "for every party to join")
    verdict = _json(store.get(_PARTY.format(party, "verdict")), f"the server at {where}")
    store.set(_PARTY.format(party, "read"), "1")
    if not verdict.get("accepted"):
        reason = "".join(c if c.isprintable() else " " for c in str(verdict.get("reason")))[:300]
        raise SplitlabError(f"the server refused this client: {reason}")
    if not _proven(secret, verdict.get("proof"), "server", session, nonce, party, verdict.get("body")):
        raise SplitlabError(f"the server at {where} did not prove the shared secret (another --secret-file?); "
                            "refused before any tensor was exchanged")
    return Joined(store, verdict["body"], session)


def gloo_store(store: dist.Store, session: str) -> dist.Store:
    """The part of the store the process group's rendezvous uses (its own prefix per session)."""
    return dist.PrefixStore(f"splitlab/gloo/{session}/", store)

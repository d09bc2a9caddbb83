"""The secrets of a wire session, and every MAC computed from them.

The server holds the shared secret (`--secret-file`: at least 32 bytes, as `head -c 32 /dev/urandom | base64`
writes, in a file only its owner can read). Each feature party proves its own key, derived from it:

    party_key(secret, k) = HMAC-SHA256(secret, "splitlab-party-key/1" | k)

`splitlab keys` writes party k's key to a file of its own (`party-k.key`), to hand to party k alone: it proves
slot k and no other, and it cannot derive the shared secret or another party's key. A client given the
shared secret itself derives its party's key (one organisation running every party, or `train --transport
tcp`).

In a session, both sides prove the party's key over both fresh nonces, the slot and the protocol (`proof`),
then derive one key per direction from it and both nonces (`frame_keys`); every frame after the proofs carries
an HMAC-SHA256 under its direction's key over its sequence number and its bytes (`vfl.wire.channel`).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.errors import SplitlabError
from vfl.files import read_bounded_with_status

MIN_SECRET_BYTES = 32
MIN_DISTINCT_BYTES = 8
"""A secret of fewer different byte values (32 times the same letter, a short word repeated) is a guess away,
whatever its length; 32 random bytes written out in hex or base64 hold about 16 or 30 different ones."""
MAX_SECRET_BYTES = 4096
HINT = "write one with `head -c 32 /dev/urandom | base64 > secret; chmod 600 secret`"
_PARTY_KEY = re.compile(rb"splitlab-party-key/1 party (\d{1,2}) ([0-9a-f]{64})")


def _mac(key: bytes, *fields: Any) -> bytes:
    message = json.dumps(list(fields), separators=(",", ":")).encode()
    return hmac.new(key, message, hashlib.sha256).digest()


def party_key(secret: bytes, party: int) -> bytes:
    """Party `party`'s own key, derived from the shared secret."""
    return _mac(secret, "splitlab-party-key/1", party)


@dataclass(frozen=True)
class Secret:
    """What a `--secret-file` holds: the shared secret (`party` None), or party `party`'s own key."""
    key: bytes
    party: int | None = None
    path: str = "secret"

    def for_party(self, party: int) -> bytes:
        """The key party `party` proves."""
        if self.party is None:
            return party_key(self.key, party)
        if self.party != party:
            raise SplitlabError(f"--secret-file {self.path} is party {self.party}'s key; it proves party "
                                f"{self.party} only (give --party {self.party}, or party {party}'s key)")
        return self.key

    def shared(self) -> bytes:
        """The shared secret (the server's): a party's key is refused."""
        if self.party is not None:
            raise SplitlabError(f"--secret-file {self.path} is party {self.party}'s key; the server needs the "
                                "shared secret the party keys were made from (`splitlab keys`)")
        return self.key


def read_secret(path: Path | str | None) -> Secret:
    """The secret in `path`: a regular file of at most 4 KiB that neither group nor others may read or write,
    holding a party key written by `splitlab keys` or a shared secret of at least 32 bytes (without
    surrounding whitespace)."""
    if path is None:
        raise SplitlabError(f"both sides need --secret-file; {HINT}")
    data, status = read_bounded_with_status(path, limit=MAX_SECRET_BYTES, what="--secret-file")
    raw = data.strip()                  # owner and mode below are those of the file these bytes came from
    mode = status.st_mode & 0o777
    if mode & 0o077:
        raise SplitlabError(f"--secret-file {path} can be read or written by others (mode {mode:o}); "
                            f"`chmod 600 {path}` (a secret only its owner can read)")
    if status.st_uid != os.geteuid():
        raise SplitlabError(f"--secret-file {path} belongs to another user (uid {status.st_uid}), who can read or "
                            "change it; use a secret file of your own (as ssh asks of its keys)")
    found = _PARTY_KEY.fullmatch(raw)
    if found:
        return Secret(bytes.fromhex(found.group(2).decode()), int(found.group(1)), str(path))
    if len(raw) < MIN_SECRET_BYTES:
        raise SplitlabError(f"--secret-file {path} holds {len(raw)} bytes, fewer than {MIN_SECRET_BYTES} (a short "
                            f"secret can be guessed from a recorded handshake); {HINT}")
    if len(set(raw)) < MIN_DISTINCT_BYTES:
        raise SplitlabError(f"--secret-file {path} holds only {len(set(raw))} different byte value(s), fewer than "
                            f"{MIN_DISTINCT_BYTES} (a repeated letter or word is guessed at once); {HINT}")
    return Secret(raw, None, str(path))


def write_private(path: Path, text: str) -> None:
    """`text` to a new file only its owner can read (never over an existing file); a failed write leaves none."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SplitlabError(f"{path} exists; it is not overwritten (remove it or choose another --out)") from None
    except OSError as exc:
        raise SplitlabError(f"cannot write {path} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        Path(path).unlink(missing_ok=True)
        raise SplitlabError(f"cannot write {path} ({exc.strerror})") from None


def write_keys(folder: Path, texts: list[str]) -> list[Path]:
    """Each text as `folder/party-k.key` (files only their owner can read; `folder` made with mode 700), all of
    them or none: a failure part way (a full disk) removes what this call wrote, the folder too when it made
    it, and an existing key file is never overwritten."""
    paths = [Path(folder) / f"party-{k}.key" for k in range(len(texts))]
    taken = [p for p in paths if p.exists() or p.is_symlink()]
    if taken:
        raise SplitlabError(f"{taken[0]} exists; it is not overwritten (remove it or choose another --out)")
    made = not Path(folder).exists()
    try:
        Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise SplitlabError(f"cannot create --out {folder} ({exc.strerror})") from None
    written: list[Path] = []
    try:
        for path, text in zip(paths, texts):
            write_private(path, text)
            written.append(path)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        if made:
            try:
                Path(folder).rmdir()
            except OSError:
                pass
        raise
    return paths


def party_key_text(secret: bytes, party: int) -> str:
    """Party `party`'s key file, as `splitlab keys` writes it."""
    return f"splitlab-party-key/1 party {party} {party_key(secret, party).hex()}\n"


def new_secret() -> str:
    """A fresh shared secret (32 random bytes, as text)."""
    return secrets.token_urlsafe(32)


def new_nonce() -> str:
    return secrets.token_hex(16)


def proof(key: bytes, role: str, protocol: str, server_nonce: str, client_nonce: str, party: int,
          parties: int) -> str:
    """`role` ("client" or "server") proves `key` for this connection: both nonces, the slot, the protocol."""
    return _mac(key, protocol, role, server_nonce, client_nonce, party, parties).hex()


def proven(claimed: Any, key: bytes, *context: Any) -> bool:
    """Whether `claimed` is `proof(key, *context)` (compared in constant time)."""
    return isinstance(claimed, str) and hmac.compare_digest(proof(key, *context).encode(),
                                                            claimed.encode("utf-8", "replace"))


def frame_keys(key: bytes, protocol: str, server_nonce: str, client_nonce: str, party: int) -> tuple[bytes, bytes]:
    """The keys of this connection's frames: (client to server, server to client)."""
    return tuple(_mac(key, protocol, "frames", direction, server_nonce, client_nonce, party)
                 for direction in ("client->server", "server->client"))

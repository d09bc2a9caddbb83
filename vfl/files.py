"""Reading a user's file whole, safely: a regular file, at most a bound of bytes, never a wait.

A path can name a FIFO (opening it to read waits for a writer), a device (`/dev/zero` never ends), a
directory or a file far larger than anything the lab reads; every file the lab reads whole goes through
`read_bounded`, which refuses each of these in one line instead of hanging or exhausting memory.
"""
from __future__ import annotations

import os
import stat

from vfl.errors import SplitlabError

__all__ = ["read_bounded", "read_bounded_with_status"]


def read_bounded(path: str | os.PathLike, *, limit: int, what: str) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; else a one-line `SplitlabError` naming
    `what` ("sweep file", ...). Opened with O_NONBLOCK, so a FIFO or a device is refused, not waited on."""
    return read_bounded_with_status(path, limit=limit, what=what)[0]


def read_bounded_with_status(path: str | os.PathLike, *, limit: int,
                             what: str) -> tuple[bytes, os.stat_result]:
    """`read_bounded`, with the status (owner, mode) of the very file read: `fstat` of the descriptor the bytes
    came from, so a file swapped at `path` after the read cannot lend its owner or mode to these bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SplitlabError(f"cannot read {what} {_shown(path)}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise SplitlabError(f"{what} {_shown(path)} is {kind}; give the path of a file")
        if info.st_size > limit:
            raise SplitlabError(f"{what} {_shown(path)} has {info.st_size:,} bytes, over the bound of {limit:,}")
        chunks, size = [], 0
        while size <= limit:                     # a file that grows while read is still cut at limit + 1
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SplitlabError(f"cannot read {what} {_shown(path)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise SplitlabError(f"{what} {_shown(path)} has over {limit:,} bytes, the bound")
    return b"".join(chunks), info


def _shown(path: str | os.PathLike) -> str:
    """A path for an error line: a name that is not UTF-8 shown with escapes, a long one cut."""
    text = os.fsdecode(path).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 200 else f"{text[:120]}...({len(text)} characters)"

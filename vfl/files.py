"""Reading a small file whole, safely: whatever the path names (a FIFO, a device, a directory, a huge file),
the read neither hangs nor takes more memory than the caller allows, and a refusal is one line."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from vfl.errors import SplitlabError

__all__ = ["read_bounded"]


def read_bounded(path: Path | str, *, limit: int, what: str) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them. Opened without blocking (a FIFO with no
    writer would otherwise wait forever) and checked to be a regular file before anything is read; a file
    larger than `limit` bytes is refused after reading `limit + 1`. `what` names it in errors ("--secret-file")."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SplitlabError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SplitlabError(f"{what} {path} is not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SplitlabError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise SplitlabError(f"{what} {path} is larger than {limit:,} bytes")
    return b"".join(chunks)

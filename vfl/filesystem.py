"""What the file system can refuse, said in one line: an output directory it cannot hold (checked before
anything is written), and a full, read-only or otherwise failing disk at run time (`file_system_errors`:
the run stops with one line, and what it finished stays where it was written)."""
from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Callable, Iterator, Sequence

from vfl.errors import SplitlabError

__all__ = ["shown", "check_path", "check_out_dir", "file_system_error", "file_system_errors"]

RUN_TIME_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                             errno.ENOENT, errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.ELOOP})
"""The file-system failures a run can meet after its checks passed (the disk fills up, is remounted
read-only, a folder is removed or replaced): each ends the run in one line, not a traceback."""
ROOM_FOR_FILES = 256
"""Bytes of path kept free under a run directory for the files the run writes into it."""


def shown(path: str | os.PathLike) -> str:
    """`path` for an error line: a name that is not UTF-8 with escapes, a name too long to read cut."""
    text = os.fsdecode(path).encode("utf-8", "backslashreplace").decode("utf-8")
    text = os.sep.join(p if len(p) <= 60 else f"{p[:40]}...({len(p)} characters)" for p in text.split(os.sep))
    return text if len(text) <= 240 else f"{text[:120]}...({len(text)} characters)...{text[-60:]}"


def _limits(path: Path) -> tuple[int, int]:
    """(longest name, longest path) in bytes on the file system that would hold `path`."""
    existing = Path(os.path.abspath(path))
    while not os.path.isdir(existing):               # False, not an error, for a name too long to look up
        existing = existing.parent
    limits = []
    for name, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)):
        try:
            limits.append(os.pathconf(existing, name))
        except (OSError, ValueError):
            limits.append(default)
    return limits[0], limits[1]


def check_path(path: Path, what: str = "run directory") -> None:
    """Refuse a path the run could not write its files under: a name that is not UTF-8 (the run records
    its paths in text files), a folder name or a whole path too long for the file system."""
    try:
        os.fsdecode(path).encode("utf-8")
    except UnicodeEncodeError:
        raise SplitlabError(f"{what} {shown(path)} is not a UTF-8 name; the run records its paths in text files, "
                            "so pass --out a name in UTF-8") from None
    name_max, path_max = _limits(path)
    if any(len(os.fsencode(part)) > name_max for part in Path(path).parts):
        raise SplitlabError(f"{what} {shown(path)} has a folder name too long for the file system "
                            f"(at most {name_max} bytes); pass a shorter --out")
    length = len(os.fsencode(os.path.abspath(path)))
    if length > path_max - ROOM_FOR_FILES:
        raise SplitlabError(f"{what} {shown(path)} is {length:,} bytes long as an absolute path, over the "
                            f"{path_max - ROOM_FOR_FILES:,} the file system leaves a directory to hold files; pass "
                            "a shorter --out")


def check_out_dir(path: Path) -> None:
    """Refuse, before anything is written, an `out` that cannot become a directory the run can write."""
    check_path(path)
    if path.exists() and not path.is_dir():
        raise SplitlabError(f"run directory {shown(path)} is a file; pass --out a directory path")
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise SplitlabError(f"run directory {shown(path)} is under the file {shown(existing)}; pass --out a "
                            "directory path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SplitlabError(f"run directory {shown(path)}: {shown(existing)} is not writable; pass --out a "
                            "writable place")


def file_system_error(exc: BaseException | None) -> OSError | None:
    """The file-system failure behind `exc` (itself, or what it wraps: inductor wraps its cache's), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in RUN_TIME_ERRNOS:
            return exc
        exc = exc.__cause__ or getattr(exc, "inner_exception", None) or exc.__context__
    return None


@contextlib.contextmanager
def file_system_errors(kept: Callable[[], Sequence[Path]]) -> Iterator[None]:
    """Turn a file-system failure inside the block into one `SplitlabError` line naming the file and where
    what was finished is kept (`kept()`: the run directories written so far); nothing is removed."""
    try:
        yield
    except SplitlabError:
        raise
    except Exception as exc:                 # noqa: BLE001 - only a file-system failure is turned, the rest passes
        found = file_system_error(exc)
        if found is None:
            raise
        where = f" ({shown(found.filename)})" if found.filename else ""
        dirs = list(dict.fromkeys(str(p) for p in kept()))
        keep = f"; what the run finished is kept in {', '.join(map(shown, dirs))}" if dirs else ""
        fix = {errno.ENOSPC: "free some space or write elsewhere", errno.EDQUOT: "free some space or write elsewhere",
               errno.EROFS: "write to a writable place"}.get(found.errno, "check the path")
        raise SplitlabError(f"{found.strerror or found}{where}; {fix}{keep}") from None

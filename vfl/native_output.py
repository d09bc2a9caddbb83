"""What torch's C++ code writes to the process's stderr goes into the run's `run.log`, not the terminal.

C++ code (gloo's and the TCP store's connection messages, OpenMP's notices) and the log handlers torch sets
up at import write straight to file descriptor 2, around Python's `sys.stderr`: a command's one error line
would come after dozens of such lines. While a command's run directory is open, descriptor 2 is its
`run.log`; Python's `sys.stderr` (progress bars, the pace line, the one error line) is pointed at the
terminal's descriptor, so what the lab itself says still reaches the user. The command's wrapper
(`vfl.cli_output.handles_errors`) allows it for the outermost command of a process only: a sweep's cells
(run in its process) and the Python API leave the descriptors alone.
"""
from __future__ import annotations

import contextlib
import contextvars
import io
import os
import sys
from pathlib import Path
from typing import Any, Iterator

__all__ = ["native_output_allowed", "capture_native_output", "release_native_output", "outermost_command"]

_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar("splitlab_native_output_allowed", default=False)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("splitlab_command_depth", default=0)
_held: dict[str, Any] = {}          # while captured: the terminal's descriptor, the stderr objects, the owner


@contextlib.contextmanager
def native_output_allowed() -> Iterator[None]:
    """Inside the block a run may take descriptor 2 (`capture_native_output`): only for the outermost command."""
    depth = _DEPTH.get()
    tokens = (_DEPTH.set(depth + 1), _ALLOWED.set(depth == 0))
    try:
        yield
    finally:
        _ALLOWED.reset(tokens[1])
        _DEPTH.reset(tokens[0])


def outermost_command() -> bool:
    """Inside `native_output_allowed`: whether this is the process's outermost command (not a sweep's cell)."""
    return _ALLOWED.get()


def capture_native_output(log: Path, owner: object) -> None:
    """Point descriptor 2 at `log` (appending) for `owner` (a run), keeping Python's stderr on the terminal;
    nothing when not allowed here or already captured."""
    if not _ALLOWED.get() or _held:
        return
    try:
        sys.stderr.flush()
        target = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except (OSError, ValueError):
        return                                   # the terminal keeps it: no worse than before
    try:
        terminal = os.dup(2)                     # fails where descriptor 2 is closed: nothing to keep apart
    except OSError:
        os.close(target)
        return
    os.dup2(target, 2)
    os.close(target)
    _held.update(terminal=terminal, owner=owner, stderr=sys.stderr, replaced=None)
    if _is_descriptor_2(sys.stderr):             # the real stderr (not a test runner's buffer): keep it visible
        encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
        sys.stderr = io.TextIOWrapper(io.FileIO(terminal, "w", closefd=False), encoding=encoding,
                                      errors="backslashreplace", line_buffering=True)
        _held["replaced"] = sys.stderr


def release_native_output(owner: object) -> None:
    """Give descriptor 2 back to the terminal, if `owner` took it."""
    if not _held or _held["owner"] is not owner:
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    if _held["replaced"] is not None and sys.stderr is _held["replaced"]:
        sys.stderr = _held["stderr"]
    os.dup2(_held["terminal"], 2)
    os.close(_held["terminal"])
    _held.clear()


def _is_descriptor_2(stream: Any) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False

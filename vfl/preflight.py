"""Checking a command without running it: how a sweep refuses a bad cell before anything runs.

Every command checks all its inputs before it loads data or writes (its run directory is created only
after). `checking_only()` runs a command up to that point and no further: the command calls
`inputs_checked()` once its inputs have passed (before loading data, training a victim ...), and
`Run.create` calls it too, so a command under `checking_only()` stops with `Checked` at the latest where
it would create its run directory. A bad input raises its usual one-line `SplitlabError` instead.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

__all__ = ["Checked", "checking_only", "checking", "inputs_checked"]

_CHECKING: contextvars.ContextVar[bool] = contextvars.ContextVar("splitlab_checking_only", default=False)


class Checked(BaseException):
    """A command under `checking_only()` passed its checks and stopped before its work (a BaseException, so
    no command's own `except Exception` takes it for a failure)."""


@contextlib.contextmanager
def checking_only() -> Iterator[None]:
    """Commands run inside the block stop once their inputs are checked (`Checked`), before any work."""
    token = _CHECKING.set(True)
    try:
        yield
    finally:
        _CHECKING.reset(token)


def checking() -> bool:
    """Whether commands run only to be checked (inside `checking_only()`)."""
    return _CHECKING.get()


def inputs_checked() -> None:
    """A command's inputs have all passed their checks: under `checking_only()`, stop here."""
    if _CHECKING.get():
        raise Checked()

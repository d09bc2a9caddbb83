"""How a wire program stops: its timeouts, and the one line that says what is saved (`kill PID` acts as Ctrl-C
through `vfl.runtime.terminate_as_interrupt`)."""
from __future__ import annotations

from vfl.runs import Run
from vfl.validate import check_number

MAX_TIMEOUT = 86_400.0
"""A day: far above any wait a session needs; it catches a typo (an extra digit or two)."""


def check_timeout(timeout: float) -> float:
    return check_number("--timeout", timeout, low=0, low_open=True, high=MAX_TIMEOUT)


def saved_note(run: Run, epoch: int, resumable: bool = True) -> str:
    """What a stopped side tells: the last epoch it has a checkpoint of, and how to go on (`resumable` False: a
    command that started both sides itself and cannot resume, which says only where its run is)."""
    if not resumable:
        return f"{f'stopped after epoch {epoch}' if epoch else 'no epoch had finished'} (run {run.path})"
    if epoch == 0:
        return f"no epoch had finished (run {run.path}); start again, with --resume or without"
    return f"saved through epoch {epoch} in {run.path}; continue both sides with --resume"

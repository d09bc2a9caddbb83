"""One progress bar for all long work, drawn on stderr so `--json` output on stdout stays clean.

Long work also says once, after its first steps, how long it will take in all (one stderr line, also
when the bar is off, e.g. with --json or in a log): a laptop user learns at once whether a run is
minutes or hours."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

ESTIMATE_AFTER_SECONDS = 5.0
"""Estimate once this much time has passed (shorter work finishes before anyone needs an estimate)."""


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _Bar:
    def __init__(self, progress: Progress | None, task: int | None, total: int, description: str):
        self._progress, self._task = progress, task
        self._total, self._description = total, description
        self._done, self._start, self._estimated = 0, time.perf_counter(), False

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._progress is not None:
            self._progress.advance(self._task, n)
        if not self._estimated and self._done < self._total:
            elapsed = time.perf_counter() - self._start
            if elapsed >= ESTIMATE_AFTER_SECONDS:
                self._estimated = True
                total = elapsed * self._total / self._done
                print(f"{self._description}: at the pace of its first {self._done} of {self._total} steps, about "
                      f"{_duration(total)} in all, {_duration(total - elapsed)} left", file=sys.stderr, flush=True)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool = True) -> Iterator[_Bar]:
    if not enabled:
        yield _Bar(None, None, total, description)
        return
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                        transient=False)
    with progress:
        yield _Bar(progress, progress.add_task(description, total=total), total, description)

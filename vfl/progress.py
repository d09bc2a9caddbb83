"""One progress bar for all long work, drawn on stderr so `--json` output on stdout stays clean.

Long work also says once how long it will take in all (one stderr line, also when the bar is off, e.g. with
--json or in a log): a laptop user learns early whether a run is minutes or hours. The estimate waits for the
first tenth of the work (or a minute, whichever comes first) and takes its pace from the steps after the first
update, so one-off set-up in the first steps does not stretch it."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

ESTIMATE_AFTER_SECONDS = 5.0
"""No estimate before this much time has passed (shorter work finishes before anyone needs one)."""
ESTIMATE_AT_FRACTION = 0.1
"""Estimate once this fraction of the work is done..."""
ESTIMATE_BY_SECONDS = 60.0
"""...or once this much time has passed, whichever comes first."""


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
        self._first: tuple[int, float] | None = None      # (steps, time) at the first update

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._progress is not None:
            self._progress.advance(self._task, n)
        if self._estimated or self._done >= self._total:
            return
        now = time.perf_counter()
        if self._first is None:
            self._first = (self._done, now)
            return
        elapsed = now - self._start
        if elapsed < ESTIMATE_AFTER_SECONDS or (self._done < ESTIMATE_AT_FRACTION * self._total
                                                 and elapsed < ESTIMATE_BY_SECONDS):
            return
        self._estimated = True
        steps, seconds = self._done - self._first[0], now - self._first[1]
        pace = seconds / steps if steps > 0 and seconds > 0 else elapsed / self._done
        left = pace * (self._total - self._done)
        print(f"{self._description}: at the pace of its first {self._done} of {self._total} steps, about "
              f"{_duration(elapsed + left)} in all, {_duration(left)} left", file=sys.stderr, flush=True)

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

"""One progress bar for all long work, drawn on stderr so `--json` output on stdout stays clean."""
from __future__ import annotations

import contextlib
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class _Bar:
    def __init__(self, progress: Progress | None, task: int | None):
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool = True) -> Iterator[_Bar]:
    if not enabled:
        yield _Bar(None, None)
        return
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                        transient=False)
    with progress:
        yield _Bar(progress, progress.add_task(description, total=total))

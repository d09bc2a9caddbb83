"""A sweep's live progress on stderr: cells done / running / failed, elapsed and estimated remaining."""
from __future__ import annotations

import sys
from typing import Callable, Optional

from splitlab.sweep_file import Cell


class Display:
    """Progress bar (rich) and one line per finished cell; `after_cell` runs after each (the results table)."""

    def __init__(self, total: int, skipped: int, enabled: bool, after_cell: Optional[Callable[[], None]] = None):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.console = Console(file=sys.stderr)          # bound now: cells' own output is captured apart
        self.running = self.failed = self.done = self.elsewhere = 0
        self.total, self.enabled, self.after_cell = total, enabled, after_cell
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[state]}"), TimeElapsedColumn(),
                                 TextColumn("remaining"), TimeRemainingColumn(), console=self.console,
                                 redirect_stdout=False, redirect_stderr=False, disable=not enabled)
        self.task = self.progress.add_task(f"cells ({skipped} already finished)" if skipped else "cells",
                                           total=total, state=self._state())

    def _state(self) -> str:
        return f"running {self.running}, failed {self.failed}"

    def __enter__(self) -> "Display":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def started(self, cell: Cell) -> None:
        self.running += 1
        self.progress.update(self.task, state=self._state())

    def finished(self, record: dict) -> None:
        self.running -= 1
        self.done += 1
        self.failed += record["status"] != "ok"
        self.elsewhere += bool(record.get("finished_elsewhere"))
        self.progress.update(self.task, advance=1, state=self._state())
        if self.after_cell is not None:
            self.after_cell()
        if self.enabled:
            note = f"ok in {record['seconds']:.1f} s" if record["status"] == "ok" else f"FAILED: {record['error']}"
            self.progress.console.print(f"[{self.done}/{self.total}] {record['name']}: {note}", markup=False,
                                        highlight=False)

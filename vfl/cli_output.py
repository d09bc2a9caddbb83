"""How a command ends: `SplitlabError` as one line on stderr and exit code 2; the result as one JSON object
(`--json`) or a human summary; tables."""
from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import typer
from rich.console import Console
from rich.table import Table

from vfl.errors import SplitlabError
from vfl.filesystem import file_system_errors
from vfl.filesystem import shown
from vfl.native_output import native_output_allowed, outermost_command
from vfl.preflight import checking
from vfl.runs import closing_runs, dumps, to_jsonable
from vfl.runtime import terminate_as_interrupt

__all__ = ["handles_errors", "one_line", "emit", "table"]


INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C or `kill PID` (a shell's for SIGINT)."""


def handles_errors(fn: Callable) -> Callable:
    """Turn `SplitlabError`, and a file system failing at run time (a full or read-only disk: the run's
    files so far are kept), into a one-line message on stderr and exit code 2. A command only being
    checked (`vfl.preflight.checking_only`) passes its error to the checker instead of printing it. The
    outermost command of a process sends torch's C++ output to its run.log (`vfl.native_output`), and stops
    on `kill PID` as on Ctrl-C (`terminate_as_interrupt`: what catches Ctrl-C catches both), one line on
    stderr saying where what the run finished is kept, exit code 130."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        opened: list = []
        outermost = False
        try:
            with native_output_allowed(), closing_runs() as runs, \
                    file_system_errors(lambda: [run.path for run in runs]):
                opened, outermost = runs, outermost_command()
                if not outermost:
                    return fn(*args, **kwargs)
                with terminate_as_interrupt():
                    return fn(*args, **kwargs)
        except SplitlabError as exc:
            if checking():
                raise
            _say(f"error: {one_line(str(exc))}")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            if checking() or not outermost:
                raise
            dirs = list(dict.fromkeys(str(run.path) for run in opened))
            kept = f"what the run finished is kept in {', '.join(map(shown, dirs))}" if dirs else "nothing was written"
            _say(f"error: interrupted; {kept}")
            raise typer.Exit(INTERRUPTED) from None
    return wrapper


def _say(line: str) -> None:
    """The command's one error line on stderr. A stderr that cannot take it (redirected to a full disk) leaves
    the exit code to tell, rather than ending in a traceback nobody sees and exit code 1."""
    try:
        typer.echo(line, err=True)
    except OSError:
        pass


ERROR_CHARACTERS = 1_000
"""An error line's bound: a value echoed whole (a 100,000-digit number) is cut in the middle."""


def one_line(message: str) -> str:
    """`message` as one line of at most `ERROR_CHARACTERS` characters."""
    message = " ".join(message.splitlines())
    if len(message) <= ERROR_CHARACTERS:
        return message
    return f"{message[:ERROR_CHARACTERS * 3 // 5]} ...({len(message):,} characters in all)... " \
           f"{message[-ERROR_CHARACTERS // 5:]}"


def emit(record: dict[str, Any], as_json: bool, summary: Callable[[Console], None] | None = None) -> None:
    """Print the result: one JSON object with --json, else a human summary."""
    if as_json:
        sys.stdout.write(json.dumps(to_jsonable(record), allow_nan=False) + "\n")
        return
    console = Console(width=None if sys.stdout.isatty() else 160)
    if summary is not None:
        summary(console)
    else:
        console.print(dumps(record))


def table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> Table:
    out = Table(title=title)
    for column in columns:
        out.add_column(column)
    for row in rows:
        out.add_row(*[_cell(row.get(c)) for c in columns])
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return "x".join(map(str, value))
    return str(value)

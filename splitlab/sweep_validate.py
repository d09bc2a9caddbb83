"""A sweep is checked whole before anything runs or is written.

Every cell's argv goes through its command's own parser (`make_context`, as `splitlab ...` resolves
it), so an unknown option or a value of the wrong type is refused exactly as the command would
refuse it, with the cell named. Each cell is parsed on its own: a command's options may depend on
the other values of the same argv (an attack's own options under `hfl --attack NAME`), so nothing
is learnt from one cell and reused for another. Then each cell's command runs its own checks and stops
before its work (`vfl.preflight`), so a value the command refuses (a `compile` it does not know, a
party count out of range) refuses the sweep, not one cell after the others ran. `MAX_CELLS` keeps this
fast.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from splitlab.sweep_file import Cell, Sweep, arg_text, file_error
from vfl.errors import SplitlabError
from vfl.filesystem import check_path
from vfl.preflight import Checked, checking_only


def _root() -> Any:
    import typer.main

    from splitlab.cli import app

    return typer.main.get_command(app)


def parse_argv(root: Any, argv: list[str]) -> Any:
    """The leaf command's context for `splitlab ARGV`, resolved and parsed as the group's own invoke does
    (each group parses its options, then resolves the next word), without running anything."""
    command, ctx = root, root.make_context("splitlab", list(argv))
    while hasattr(command, "resolve_command"):
        rest = [*ctx._protected_args, *ctx.args]     # the vendored click keeps the command word here
        ctx._protected_args, ctx.args = [], []
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)
    return ctx


def _check_command(sweep: Sweep, root: Any) -> str:
    """The command words name one command (not a group); returns `splitlab WORDS` for messages."""
    command: Any = root
    for i, word in enumerate(sweep.command):
        subs = getattr(command, "commands", None)
        if not subs or word not in subs:
            where = " ".join(sweep.command[:i]) or "splitlab"
            raise file_error(sweep.source, f"unknown command {' '.join(sweep.command)!r}; {where} has: "
                             f"{', '.join(sorted(subs or []))}")
        command = subs[word]
    if getattr(command, "commands", None):
        raise file_error(sweep.source, f"{' '.join(sweep.command)!r} is a group; name one of its commands: "
                         f"{', '.join(sorted(command.commands))}")
    return "splitlab " + " ".join(sweep.command)


def _parse(sweep: Sweep, root: Any, argv: list[str], where: str, path: str) -> Any:
    """Parse one argv; any refusal becomes one line naming the cell."""
    from typer._click import exceptions as click_errors  # typer vendors click: its own error classes

    try:
        return parse_argv(root, argv)
    except click_errors.NoSuchOption as exc:
        hint = f"; did you mean {', '.join(sorted(exc.possibilities))}?" if exc.possibilities else ""
        raise file_error(sweep.source, f"{where}: `{path}` has no option {exc.option_name}{hint}") from None
    except click_errors.ClickException as exc:
        raise file_error(sweep.source, f"{where}: {exc.format_message()} (see `{path} --help`)") from None
    except SplitlabError as exc:                         # a parameter type of the lab's own
        raise file_error(sweep.source, f"{where}: {exc}") from None
    except (click_errors.Exit, click_errors.Abort):       # an eager option that ends the command (like --list)
        raise file_error(sweep.source, f"{where}: an option of `{path}` ends the command while it is "
                         "parsed; drop it from the sweep file") from None


def _check_sweepable(sweep: Sweep, root: Any, path: str) -> None:
    """The command takes --out and --json (a cell writes its results there and prints its record)."""
    from typer._click import exceptions as click_errors

    try:
        parse_argv(root, [*sweep.command, "--out", "cell", "--json"])
    except click_errors.NoSuchOption as exc:
        if exc.option_name in ("--out", "--json"):
            raise file_error(sweep.source, f"`{path}` takes no {exc.option_name}, so it cannot be swept; a sweep "
                             "runs commands that write a run directory (--out) and print a JSON record (--json)") \
                from None
    except Exception:                                    # noqa: BLE001 - anything else is each cell's to report
        pass


def _check_booleans(sweep: Sweep, cell: Cell, ctx: Any, where: str, path: str) -> None:
    """A true/false value must be a flag's, and must mean what it says: a false flag is left out of the
    argv, so the parser cannot see a `seed = false` or a flag whose default is on."""
    by_name = {opt: param for param in ctx.command.get_params(ctx)
               for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]}
    for key, value in cell.options:
        param = by_name.get(f"--{key}")
        if param is None:                                # only a false value is never seen by the parser
            raise file_error(sweep.source, f"{where}: `{path}` has no option --{key}")
        flag = bool(getattr(param, "is_flag", False))
        if isinstance(value, bool) and not flag:
            raise file_error(sweep.source, f"{where}: --{key} takes a value, not {arg_text(value)}")
        if not isinstance(value, bool) and flag:
            raise file_error(sweep.source, f"{where}: --{key} is a flag: give true or false, not {value!r}")
        if isinstance(value, bool) and getattr(param, "is_bool_flag", False):
            wanted = value if f"--{key}" in param.opts else not value
            parsed = ctx.params.get(param.name)
            if parsed is None:                           # a pair left unset keeps the setting's own value
                parsed = wanted if f"--{key}" not in param.opts or value else not wanted
            if param.name in ctx.params and parsed != wanted:
                other = [o[2:] for o in [*param.opts, *param.secondary_opts] if o != f"--{key}"]
                fix = f"write {other[0]} = true" if other else f"drop {key} (it cannot be turned off)"
                raise file_error(sweep.source, f"{where}: {key} = {arg_text(value)} leaves --{key} out, which "
                                 f"does not turn it off; {fix}")


def _check_values(sweep: Sweep, ctx: Any, where: str) -> None:
    """Run the cell's command up to where its work would start: every check it makes on its values."""
    from typer._click import exceptions as click_errors

    with checking_only(), ctx:
        try:
            ctx.command.invoke(ctx)
        except Checked:
            pass
        except SplitlabError as exc:
            raise file_error(sweep.source, f"{where}: {exc}") from None
        except Exception:            # noqa: BLE001 - not a refusal of a value (an Exit, a fault): the cell
            pass                     # meets it when it runs, as before


def check_cells(sweep: Sweep, cells: list[Cell], sweep_dir: Path) -> None:
    """Refuse the sweep (one line naming the cell) unless every cell's argv parses as its command's and
    passes the command's own checks."""
    root = _root()
    path = _check_command(sweep, root)
    _check_sweepable(sweep, root, path)
    for i, cell in enumerate(cells):
        where = f"cell {i + 1} of {len(cells)} ({cell.name})"
        ctx = _parse(sweep, root, cell.argv(sweep_dir / "cells" / cell.dirname), where, path)
        _check_booleans(sweep, cell, ctx, where, path)
        _check_values(sweep, ctx, where)


def check_sweep_dir(sweep_dir: Path) -> None:
    """The sweep directory is a directory, or can be made one (checked before anything is written)."""
    check_path(sweep_dir, "sweep directory")
    if sweep_dir.exists():
        if not sweep_dir.is_dir():
            raise SplitlabError(f"--out {sweep_dir} is a file, not a directory; give a directory (new or a "
                                "previous sweep's, to resume it)")
        if not os.access(sweep_dir, os.W_OK | os.X_OK):
            raise SplitlabError(f"--out {sweep_dir} is not writable; give another directory")
        return
    parent = sweep_dir.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SplitlabError(f"cannot make --out {sweep_dir}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SplitlabError(f"cannot make --out {sweep_dir}: {parent} is not writable")

"""The one generator of CLI options: typer parameters from the option fields of dataclasses
(`vfl.options`), and their values back into those dataclasses.

A command built this way declares none of its options by hand: `parameters(Settings)` gives one typer
option per option field (its flag, type and help from the field), and `values(Settings, kwargs)` picks
the given ones back out (an option left out is not given, so a preset's value stays).
"""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

import typer

from vfl.options import Runtime, Validated, flag_of, option, options_of, optional, text

__all__ = ["Runtime", "Output", "parameters", "values", "command_from"]


@dataclass(frozen=True, kw_only=True)
class Output(Validated):
    """Where and how a command writes its run."""
    out: str | None = option(None, "Run directory (default: runs/<command>/<timestamp>).", optional(text()))
    overwrite: bool = option(False, "Replace the previous run in --out: remove the files it wrote, refusing a "
                             "directory with anything else (without it, a non-empty --out is refused).")
    as_json: bool = option(False, "Print the result record as one JSON object on stdout.", flag="--json")
    lpips_weights: str | None = option(None, "AlexNet weights for LPIPS (default: the torch hub cache; see "
                                       "`splitlab weights`).", optional(text()))
    fid_weights: str | None = option(None, "pt_inception weights for FID (default: the torch hub cache; see "
                                     "`splitlab weights`).", optional(text()))


def _parameter(field: dataclasses.Field, opt, panel: str | None, show: bool) -> inspect.Parameter:
    """One typer option for one field. A switch is False unless given (a pair --on/--off is None unless
    given); a value is None unless given, so what is not given never overrides a preset's value."""
    flag = opt.flag or "--" + field.name.replace("_", "-")
    default = field.default if field.default is not dataclasses.MISSING else None
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    if opt.check is None and "/" not in flag:
        info = typer.Option(False, flag, help=opt.help, rich_help_panel=panel)
        annotation: Any = bool
    else:
        kind = bool if opt.check is None else opt.check.kind
        info = typer.Option(None, flag, help=opt.help, rich_help_panel=panel,
                            show_default=shown if show and default is not None else False)
        annotation = Optional[kind]
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def parameters(cls: type, *, panel: str | None = None, show_defaults: bool = True, skip: tuple[str, ...] = (),
               only: tuple[str, ...] | None = None) -> list[inspect.Parameter]:
    """Typer parameters for the option fields of `cls` (`only` these, less `skip`), in declaration order.
    `show_defaults` False where the default shown would mislead (an attack's settings take their preset's)."""
    return [_parameter(f, o, panel, show_defaults) for f, o in options_of(cls)
            if f.name not in skip and (only is None or f.name in only)]


def values(cls: type, given: dict[str, Any]) -> dict[str, Any]:
    """The given values of `cls`'s option fields, as field values: None and a switch left off are dropped,
    a negated switch turned on becomes False (--no-refine sets refine_labels False)."""
    out = {}
    for field, opt in options_of(cls):
        if field.name not in given:
            continue
        value = given[field.name]
        if value is None or (value is False and opt.check is None and "/" not in (opt.flag or "")):
            continue
        out[field.name] = (not value) if opt.negate else value
    return out


def command_from(fn: Callable[[dict[str, Any]], Any], groups: list[list[inspect.Parameter]], *, name: str,
                 doc: str) -> Callable:
    """A typer command function whose signature is the concatenated parameter groups; it calls `fn` with
    every value by parameter name. Two options with one name are refused (a field declared twice)."""
    params = [p for group in groups for p in group]
    seen: dict[str, int] = {}
    for p in params:
        seen[p.name] = seen.get(p.name, 0) + 1
    twice = [n for n, count in seen.items() if count > 1]
    if twice:
        raise ValueError(f"command {name}: options declared twice: {', '.join(twice)}")

    def command(**kwargs):
        return fn(kwargs)

    command.__name__ = name.replace("-", "_")
    command.__doc__ = doc
    command.__signature__ = inspect.Signature(params, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def flags(cls: type) -> dict[str, str]:
    """field name -> its first CLI spelling, for messages."""
    return {f.name: flag_of(f, o) for f, o in options_of(cls)}

"""The one generator of CLI options: typer parameters from the option fields of dataclasses
(`vfl.options`), and their values back into those dataclasses.

A command built this way declares none of its options by hand: `parameters(Settings)` gives one typer
option per option field (its flag, type and help from the field), and `values(Settings, kwargs)` picks
the given ones back out (an option left out is not given, so a preset's value stays).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from vfl.options import Runtime, Validated, flag_of, option, options_of, optional, text

__all__ = ["Output", "parameters", "values", "option_help", "shown_value",
           "command_from", "RunOptions", "RUN", "METRIC_WEIGHTS",
           "shared_parameters", "splice_parameters", "with_run_options", "run_options"]


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


def shown_value(value: Any) -> str:
    """A value as help texts and docs show it: 1e-05 as 1e-05, True as on, None as unset."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "unset"
    return f"{value:g}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)


def option_help(field: dataclasses.Field, opt, preset: tuple[str, Any] | None = None) -> str:
    """The option's help, then what it accepts and, for an attack's option, the value its default preset runs
    with (`preset`: (its name, its settings)): all from the declarations, none written by hand."""
    if preset is None:
        return opt.help
    accepts = "on/off" if opt.check is None else opt.check.describe
    value = getattr(preset[1], field.name)
    if opt.negate:
        value = not value
    return f"{opt.help} ({accepts}; {preset[0]}: {shown_value(value)})"


def _parameter(field: dataclasses.Field, opt, panel: str | None, show: bool,
               preset: tuple[str, Any] | None) -> inspect.Parameter:
    """One typer option for one field. A switch is False unless given (a pair --on/--off is None unless
    given); a value is None unless given, so what is not given never overrides a preset's value."""
    flag = opt.flag or "--" + field.name.replace("_", "-")
    default = field.default if field.default is not dataclasses.MISSING else None
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    text = option_help(field, opt, preset)
    if opt.check is None and "/" not in flag:
        info = typer.Option(False, flag, help=text, rich_help_panel=panel)
        annotation: Any = bool
    else:
        kind = bool if opt.check is None else opt.check.kind
        info = typer.Option(None, flag, help=text, rich_help_panel=panel,
                            show_default=shown if show and default is not None else False)
        annotation = Optional[kind]
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def parameters(cls: type, *, panel: str | None = None, show_defaults: bool = True, skip: tuple[str, ...] = (),
               only: tuple[str, ...] | None = None, preset: tuple[str, Any] | None = None) -> list[inspect.Parameter]:
    """Typer parameters for the option fields of `cls` (`only` these, less `skip`), in declaration order.
    `preset`: (name, settings) of an attack's default preset, whose values the help texts give in place of the
    class defaults (which would mislead: an attack's settings take their preset's)."""
    return [_parameter(f, o, panel, show_defaults and preset is None, preset) for f, o in options_of(cls)
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


# --- commands written as functions share the run options as one `opts` argument -------------------------

@dataclass(frozen=True)
class RunOptions:
    """The options every command that writes a run shares (declared on `Runtime` and `Output`), handed to
    the command as one value."""
    out: Optional[Path] = None
    overwrite: bool = False
    as_json: bool = False
    seed: int = 0
    device: str = "auto"
    data_root: Optional[Path] = None
    data_draw: str = "dataset"
    lpips_weights: Optional[Path] = None
    fid_weights: Optional[Path] = None

    @property
    def root(self) -> str | None:
        """The data root as the library takes it."""
        return str(self.data_root) if self.data_root else None


RUN = ("seed", "device", "data_root", "data_draw", "out", "overwrite", "as_json")
"""The shared options of a command that writes a run; `RUN + METRIC_WEIGHTS` for one that scores images."""
METRIC_WEIGHTS = ("lpips_weights", "fid_weights")
_PATHS = {"out", "data_root", "lpips_weights", "fid_weights"}


def shared_parameters(names: tuple[str, ...], panel: str | None = None) -> list[inspect.Parameter]:
    """The typer parameters of these shared options, in the order given, generated from their declarations."""
    generated = {p.name: p for cls in (Runtime, Output) for p in parameters(cls, panel=panel)}
    return [generated[n] for n in names]


def run_options(values: dict[str, Any]) -> RunOptions:
    given = {k: (Path(v) if k in _PATHS else v) for k, v in values.items() if v is not None}
    return RunOptions(**given)


def splice_parameters(fn: Callable, into: str, extra: list[inspect.Parameter],
                      collect: Callable[[dict[str, Any]], Any]) -> Callable:
    """`fn` as a typer command with its own parameters (annotations resolved), less `into`, followed by
    `extra`; the command hands the extra parameters' values to `fn` as `into=collect(values)`. One place
    that rewrites a command's signature for the shared decorators."""
    hints = typing.get_type_hints(fn)
    own = [p.replace(annotation=hints.get(p.name, p.annotation))
           for p in inspect.signature(fn).parameters.values() if p.name != into]
    names = [p.name for p in extra]

    @functools.wraps(fn)
    def command(*args, **kwargs):
        collected = collect({n: kwargs.pop(n) for n in names})
        return fn(*args, **{into: collected}, **kwargs)

    command.__signature__ = inspect.Signature(own + extra, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in own + extra}
    del command.__wrapped__                         # typer must read this signature, not fn's
    return command


def with_run_options(*names: str) -> Callable[[Callable], Callable]:
    """Give a command the shared options `names` (listed after its own) and hand them to it as one `opts:
    RunOptions` argument."""
    def decorate(fn: Callable) -> Callable:
        return splice_parameters(fn, "opts", shared_parameters(names), run_options)
    return decorate

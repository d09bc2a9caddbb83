"""Options declared once, on the dataclass field they set.

A settings or config dataclass declares each user-facing field with `option(...)`: its default, a
one-line help text, the check its value must pass and, where it is not `--field-name`, its CLI
spelling. Everything else is derived from that one declaration: the CLI options of the commands
(`vfl.cli_options`), the help texts, and the validation, which runs once, when the dataclass is
built, for the CLI, the Python API and sweeps alike (`Validated`).

    @dataclass(frozen=True)
    class Settings(Validated):
        ratio: float = option(0.5, "fraction of entries matched", number(low=0, high=1, low_open=True))
        refine: bool = option(True, "refine the labels jointly", flag="--no-refine", negate=True)
"""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any, Callable, Sequence

from vfl.errors import SplitlabError
from vfl.validate import check_choice, check_int, check_number

__all__ = ["Check", "Option", "Runtime", "option", "checked",
           "number", "integer", "choice", "text", "optional", "options_of", "flag_of",
           "validate", "Validated", "build", "route", "DATA_DRAWS"]


@dataclass(frozen=True)
class Check:
    """A value check: `check(name, value)` returns the value (as its kind) or raises a one-line SplitlabError."""
    kind: type
    run: Callable[[str, Any], Any]
    describe: str = ""
    """The accepted values in words, for help texts ("0 < x <= 1", "one of a, b")."""
    choices: tuple[str, ...] = ()
    refused: Any = None
    """A value of the right type that the check refuses (None: every value of the type passes), so tests
    can hold every option to its declared range."""
    low: Any = None
    high: Any = None
    """A number's declared range (None: unbounded that side), for searches over an option (`splitlab matrix
    --worst-case`)."""

    def __call__(self, name: str, value: Any, symbol: str | None = None) -> Any:
        """With `symbol` (an option typed as `key=value` inside a spec), a range error reads as an inequality on
        it: "defence topk needs 0 < keep <= 1, got keep=2"."""
        return self.run(name, value) if symbol is None else self.run(name, value, symbol)


def _bounds(low, high, low_open: bool, high_open: bool, symbol: str = "x") -> str:
    def shown(v) -> str:
        return f"{v:,}" if isinstance(v, int) else f"{v:g}"
    if low is not None and high is not None:
        return f"{shown(low)} {'<' if low_open else '<='} {symbol} {'<' if high_open else '<='} {shown(high)}"
    if low is not None:
        return f"{symbol} {'>' if low_open else '>='} {shown(low)}"
    if high is not None:
        return f"{symbol} {'<' if high_open else '<='} {shown(high)}"
    return "finite"


def number(*, low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False) -> Check:
    """A finite real number within [low, high] (either end open)."""
    refused = (low if low_open else low - 1) if low is not None else (high if high_open else high + 1) \
        if high is not None else float("nan")
    return Check(float, lambda name, value, symbol=None: check_number(name, value, low=low, high=high,
                                                                     low_open=low_open, high_open=high_open,
                                                                     symbol=symbol),
                 _bounds(low, high, low_open, high_open), refused=float(refused), low=low, high=high)


def integer(*, low: int | None = None, high: int | None = None) -> Check:
    """An integer within [low, high] (3.5 is refused, not truncated)."""
    refused = low - 1 if low is not None else high + 1 if high is not None else None
    return Check(int, lambda name, value, symbol=None: check_int(name, value, low=low, high=high, symbol=symbol),
                 _bounds(low, high, False, False),
                 refused=refused, low=low, high=high)


def choice(choices: Sequence[str]) -> Check:
    """One of a fixed set of words."""
    words = tuple(choices)
    return Check(str, lambda name, value, symbol=None: check_choice(name if symbol is None else f"{name}: {symbol}",
                                                                    value, words), "one of " + ", ".join(words), words,
                 refused="not-" + "-".join(words))


def text() -> Check:
    """Any string (checked where it is used: a dataset or architecture name, a defence spec)."""
    def run(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise SplitlabError(f"{name} must be text, got {value!r}")
        return value
    return Check(str, run, "text")


def optional(check: Check) -> Check:
    """`check`, or None (the field's "not given": the preset's or the dataset's value is used)."""
    return Check(check.kind, lambda name, value, *symbol: None if value is None else check(name, value, *symbol),
                 check.describe + " (or unset)", check.choices, check.refused, check.low, check.high)


@dataclass(frozen=True)
class Option:
    """What a field's metadata says about its option."""
    help: str
    check: Check | None = None
    """None for a switch (a bool field)."""
    flag: str | None = None
    """The CLI spelling where it is not --field-name; "--on/--off" for a pair of switches."""
    negate: bool = False
    """A single switch that sets the field to False when given (--no-refine)."""


def option(default: Any = MISSING, help: str = "", check: Check | None = None, *, flag: str | None = None,
           negate: bool = False) -> Any:
    """A dataclass field that is also a user option (see the module docstring)."""
    if check is None and not isinstance(default, bool):
        raise TypeError("only a bool field (a switch) may be declared without a check")
    return dataclasses.field(default=default, metadata={"option": Option(help, check, flag, negate)})


def checked(default: Any, check: Check) -> Any:
    """A dataclass field that is a setting but not a user option (DLG's L-BFGS `max_iter`), with the check its value
    must pass when the dataclass is built."""
    return dataclasses.field(default=default, metadata={"check": check})


def options_of(cls: type) -> list[tuple[dataclasses.Field, Option]]:
    """The option fields of a dataclass, in declaration order."""
    return [(f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata]


def flag_of(field: dataclasses.Field, opt: Option) -> str:
    """The option's first CLI spelling (--no-refine, --layer-ramp, --ratio)."""
    return (opt.flag or "--" + field.name.replace("_", "-")).split("/")[0]


def validate(instance: Any) -> None:
    """Run every option field's check on its value, naming the CLI flag (a `checked` setting by its field name):
    the one validator."""
    for field in dataclasses.fields(instance):
        if "check" in field.metadata:
            _store(instance, field, field.metadata["check"](field.name, getattr(instance, field.name)))
    for field, opt in options_of(type(instance)):
        value = getattr(instance, field.name)
        if opt.check is None:
            if not isinstance(value, bool):
                raise SplitlabError(f"{flag_of(field, opt)} is a switch: give True or False, got {value!r}")
            continue
        _store(instance, field, opt.check(flag_of(field, opt), value))


def _store(instance: Any, field: dataclasses.Field, checked: Any) -> None:
    value = getattr(instance, field.name)
    if checked is not value and checked != value or type(checked) is not type(value) and value is not None:
        object.__setattr__(instance, field.name, checked)           # 3.0 for an int field becomes 3


def build(cls: type, what: str, **values: Any) -> Any:
    """`cls(**values)`, with a one-line error naming the fields where one is unknown (not a bare TypeError)."""
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SplitlabError(f"{what} has no field {unknown[0]!r}; its fields are {', '.join(sorted(known))}")
    return cls(**values)


def route(cls: type, what: str, groups: dict[str, type | None], **values: Any) -> Any:
    """`cls(**values)` from flat values (as the CLI, sweeps and the Python API give them): a value that is not
    one of `cls`'s fields goes into the mapping field named by the group whose option fields name it
    (`options=` for an attack's settings, ...); each group may also be given whole (flat values override it).
    None means not given; a key no group knows is a one-line error naming `what`'s options."""
    values = {k: v for k, v in values.items() if v is not None}
    buckets = {name: dict(values.pop(name, None) or {}) for name in groups}
    own = {f.name for f in dataclasses.fields(cls)}
    names = {group: {f.name for f, _ in options_of(c)} if c is not None else set() for group, c in groups.items()}
    for key in [k for k in values if k not in own]:
        group = next((g for g, known in names.items() if key in known), None)
        if group is None:
            known = sorted(set().union(*names.values()))
            raise SplitlabError(f"unknown option {key!r} for {what}; its own options are {', '.join(known) or 'none'}")
        buckets[group][key] = values.pop(key)
    return cls(**values, **buckets)


class Validated:
    """Base of a frozen dataclass whose option fields are checked when it is built; a subclass adds its
    cross-field rules in `check()` (called after the fields' own checks)."""

    def __post_init__(self) -> None:
        validate(self)
        self.check()

    def check(self) -> None:
        pass


DATA_DRAWS = ("dataset", "seed")
"""How a run's train/test split is drawn (`Runtime.data_draw`, `vfl.data.split_seed`)."""


@dataclass(frozen=True, kw_only=True)
class Runtime(Validated):
    """What every experiment runs with."""
    seed: int = option(0, "Seed for model initialisation and data order.", integer(low=0, high=2**63 - 1))
    device: str = option("auto", "auto (CUDA if present), cpu or cuda[:N].", text())
    data_root: str | None = option(None, "Folder with torchvision datasets (default $SPLITLAB_DATA or "
                                   "~/.cache/splitlab).", optional(text()))
    data_draw: str = option("dataset", "The train/test split: dataset (the set's own: fixed for image sets, drawn "
                            "from --seed for tabular ones) or seed (every set's drawn from --seed, stratified).",
                            choice(DATA_DRAWS))

"""Attack-specific `splitlab hfl` options: the settings field each one sets, how its value is checked and
which attacks take it. `HFLConfig.settings` applies them all in one place, so an option given to an
attack that does not take it is a one-line error instead of being silently ignored, and a new attack
adds its options as one table in its settings module.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from vfl.errors import SplitlabError
from vfl.validate import check_choice, check_int, check_number

__all__ = ["Option", "apply_options", "check_fields", "is_given", "number", "integer", "choice", "negated", "flag"]


@dataclass(frozen=True)
class Option:
    name: str
    """The config field; the CLI flag is --name with dashes."""
    field: str
    """The settings field it sets."""
    check: Callable[[str, Any], Any]
    """(flag, value) -> the checked value (SplitlabError when out of range); its `kind` is the value's type."""
    attacks: tuple[str, ...]
    help: str = ""
    flags: str | None = None
    """The CLI declaration where it is not --name (a pair of switches: "--on/--off")."""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def kind(self) -> type:
        return self.check.kind


def _kind(kind: type, check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    check.kind = kind
    return check


def number(**bounds: Any) -> Callable[[str, Any], float]:
    return _kind(float, lambda flag, value: check_number(flag, value, **bounds))


def integer(**bounds: Any) -> Callable[[str, Any], int]:
    return _kind(int, lambda flag, value: check_int(flag, value, **bounds))


def choice(choices: Sequence[str]) -> Callable[[str, Any], str]:
    return _kind(str, lambda flag, value: check_choice(flag, value, choices))


flag = _kind(bool, lambda _, value: bool(value))
"""A pair of switches (--layer-ramp/--uniform-layers): the value as given."""

negated = _kind(bool, lambda _, value: not value)
"""A single switch that turns a setting off (--no-refine sets refine_labels False)."""


def is_given(option: Option, value: Any) -> bool:
    """Whether a value means the option was given: not None, and for a single switch (`negated`) on; a
    switch left off is not given (from the CLI, the Python API and sweep files alike)."""
    return value is not None and not (option.check is negated and not value)


def apply_options(settings: Any, attack: str, given: Mapping[str, Any], options: Sequence[Option]) -> Any:
    """`settings` with every given option (`is_given`) checked and set, in one replace so that the
    settings' own checks see the final combination; options of other attacks are refused."""
    changes = {}
    for option in options:
        value = given.get(option.name)
        if not is_given(option, value):
            continue
        if attack not in option.attacks:
            raise SplitlabError(f"{option.flag} applies to {' and '.join(option.attacks)} only, not {attack}")
        changes[option.field] = option.check(option.flag, value)
    return replace(settings, **changes) if changes else settings


def check_fields(settings: Any, options: Sequence[Option]) -> None:
    """Run each option's check on the settings field it sets (a switch's field needs none): settings built
    in Python are held to the CLI's ranges and choices."""
    for option in options:
        if option.check is not negated:
            option.check(option.flag, getattr(settings, option.field))

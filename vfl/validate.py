"""One validation layer for every number a user can give (CLI options, defence and preset options,
script arguments): finite, in range, the right type. Every check raises a one-line `SplitlabError`
naming the option, so commands call these before anything is loaded or written.

    check_number("--lr", lr, low=0, low_open=True)            # a positive finite float
    check_int("--epochs", epochs, low=1, high=100_000)         # an integer (3.5 is refused, not truncated)
"""
from __future__ import annotations

import math
import numbers

from vfl.errors import SplitlabError


def _describe(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return " and ".join(parts)


def check_number(name: str, value, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number within [low, high] (either end open with `*_open`); returns it as float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SplitlabError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise SplitlabError(f"{name} must be finite, got {value!r}")
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        raise SplitlabError(f"{name} must be {_describe(low, high, low_open, high_open)}, got {value:g}")
    return value


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """An integer within [low, high]; a float with a fractional part (3.5) is an error, not 3."""
    if isinstance(value, bool):
        raise SplitlabError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        if not math.isfinite(float(value)) or float(value) != int(value):
            raise SplitlabError(f"{name} must be an integer, got {value!r}")
        value = int(value)
    if not isinstance(value, numbers.Integral):
        raise SplitlabError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise SplitlabError(f"{name} must be {_describe(low, high, False, False)}, got {value}")
    return value


def check_choice(name: str, value: str, choices) -> str:
    """One of a fixed set of words."""
    if value not in choices:
        raise SplitlabError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value

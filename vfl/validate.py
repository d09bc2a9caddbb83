"""One validation layer for every number a user can give (CLI options, defence and preset options,
script arguments): finite, in range, the right type. Every check raises a one-line `SplitlabError`
naming the option, so commands call these before anything is loaded or written.

    check_number("--lr", lr, low=0, low_open=True)            # a positive finite float
    check_int("--epochs", epochs, low=1, high=100_000)         # an integer (3.5 is refused, not truncated)
    SpecKey(integer=True, low=2, high=32).parse("defence quant", "4", symbol="bits")   # a spec's key=value
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from vfl.errors import SplitlabError


def _fmt(bound: float) -> str:
    """An integer bound exactly (a seed's 2**63 - 1), any other number short."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _describe(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {_fmt(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {_fmt(high)}")
    return " and ".join(parts)


def _chain(symbol: str, low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """The range as one inequality on the option: `0 < keep <= 1`, `sigma >= 0`."""
    if low is not None and high is not None:
        return f"{_fmt(low)} {'<' if low_open else '<='} {symbol} {'<' if high_open else '<='} {_fmt(high)}"
    return f"{symbol} {_describe(low, high, low_open, high_open)}"


def _out_of_range(name: str, value, symbol: str | None, low, high, low_open: bool, high_open: bool) -> SplitlabError:
    shown = _fmt(value)
    if symbol is None:
        return SplitlabError(f"{name} must be {_describe(low, high, low_open, high_open)}, got {shown}")
    return SplitlabError(f"{name} needs {_chain(symbol, low, high, low_open, high_open)}, got {symbol}={shown}")


def _not_a(kind: str, name: str, value, symbol: str | None) -> SplitlabError:
    if symbol is None:
        return SplitlabError(f"{name} must be {kind}, got {value!r}")
    return SplitlabError(f"{name}: {symbol}={value!r} is not {kind}")


def check_number(name: str, value, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, symbol: str | None = None) -> float:
    """A finite real number within [low, high] (either end open with `*_open`); returns it as float.

    With `symbol` (an option's key) the error reads as an inequality on it: "defence topk needs
    0 < keep <= 1, got keep=2"."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _not_a("a number", name, value, symbol)
    value = float(value)
    if not math.isfinite(value):
        raise _not_a("finite", name, value, symbol)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        raise _out_of_range(name, value, symbol, low, high, low_open, high_open)
    return value


def check_int(name: str, value, *, low: int | None = None, high: int | None = None, symbol: str | None = None) -> int:
    """An integer within [low, high]; a float with a fractional part (3.5) is an error, not 3."""
    if isinstance(value, bool):
        raise _not_a("an integer", name, value, symbol)
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        if not math.isfinite(float(value)) or float(value) != int(value):
            raise _not_a("an integer", name, value, symbol)
        value = int(value)
    if not isinstance(value, numbers.Integral):
        raise _not_a("an integer", name, value, symbol)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise _out_of_range(name, value, symbol, low, high, False, False)
    return value


def check_choice(name: str, value: str, choices) -> str:
    """One of a fixed set of words."""
    if value not in choices:
        raise SplitlabError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def parse_number(name: str, text: str, *, integer: bool = False, symbol: str | None = None) -> int | float:
    """A number typed as text (a spec's `key=value`): an exact int when it is one (a 64-bit seed
    survives), else a float; the range is checked by `Option.check`. `nan`/`inf` parse and are refused there."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise _not_a("an integer" if integer else "a number", name, text, symbol) from None


@dataclass(frozen=True)
class SpecKey:
    """The schema of one numeric option: integer or real, its range, whether it must be given."""

    integer: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    required: bool = False

    def check(self, name: str, value, symbol: str | None = None) -> int | float:
        if self.integer:
            return check_int(name, value, low=self.low, high=self.high, symbol=symbol)
        return check_number(name, value, low=self.low, high=self.high, low_open=self.low_open,
                            high_open=self.high_open, symbol=symbol)

    def parse(self, name: str, text: str, symbol: str | None = None) -> int | float:
        return self.check(name, parse_number(name, text, integer=self.integer, symbol=symbol), symbol)

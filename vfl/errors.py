"""The one error type users see: a single line that names the fix. The CLI prints it and exits 2."""
from __future__ import annotations

from typing import Mapping, TypeVar

T = TypeVar("T")


class SplitlabError(ValueError):
    """Bad input from the user (unknown name, missing files, incompatible shapes, corrupt checkpoint)."""


def lookup(table: Mapping[str, T], name: str, what: str) -> T:
    """`table[name]`, or a one-line error listing the valid names ("unknown <what> 'x'; choose one of: ...")."""
    try:
        return table[name]
    except (KeyError, TypeError):
        raise SplitlabError(f"unknown {what} {name!r}; choose one of: {', '.join(table)}") from None

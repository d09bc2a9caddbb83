"""What `splitlab hfl` reads off its arguments before its command is built (no import beyond the standard
library, so `splitlab.help_index` can use it too)."""
from __future__ import annotations

__all__ = ["attack_in"]


def attack_in(args: list[str]) -> str | None:
    """The attack named on the command line (`--attack X` or `--attack=X`), else None (the default runs)."""
    for i, word in enumerate(args):
        if word == "--attack" and i + 1 < len(args):
            return args[i + 1]
        if word.startswith("--attack="):
            return word.split("=", 1)[1]
    return None

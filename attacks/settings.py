"""What every attack's settings share: frozen, keyword-only, every option field checked when built."""
from __future__ import annotations

from dataclasses import dataclass

from vfl.options import Validated

__all__ = ["AttackSettings"]


@dataclass(frozen=True, kw_only=True)
class AttackSettings(Validated):
    """Base of an attack's settings dataclass (declare it `@dataclass(frozen=True, kw_only=True)` too)."""
    preset: str = "custom"
    """The dotted preset these settings started from (`dlg.original`); recorded in every result."""

"""How the lab departs from a paper, stated where users read it: one type for attacks and defences alike."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Deviation"]


@dataclass(frozen=True)
class Deviation:
    """How the lab departs from the paper of an attack or a defence."""
    what: str
    """The field, model, metric or protocol step (`model`, `iterations`, `alignment accuracy`)."""
    paper: str
    lab: str
    why: str
    presets: tuple[str, ...] = ()
    """An attack's presets it applies to (empty: every preset and the attack itself)."""

"""What every attack's settings share: frozen, keyword-only, every option field checked when built."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.engine.compilation import compile_mode
from vfl.options import Validated, option

__all__ = ["AttackSettings", "EngineSettings"]


@dataclass(frozen=True, kw_only=True)
class AttackSettings(Validated):
    """Base of an attack's settings dataclass (declare it `@dataclass(frozen=True, kw_only=True)` too)."""
    preset: str = "custom"
    """The dotted preset these settings started from (`dlg.original`); recorded in every result."""


@dataclass(frozen=True, kw_only=True)
class EngineSettings(AttackSettings):
    """Base of the settings of an attack that runs the reconstruction engine (`attacks.engine.run`)."""
    compile: str = option("off", "torch.compile the engine's steps: off (eager, the reference), on, or auto "
                          "(when the run is long enough to repay the compile).", compile_mode())

"""What every attack's settings share: frozen, keyword-only, every option field checked when built; and the
checks the attacks' settings have in common (so no attack's package imports another's for them)."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.engine.compilation import COMPILE_MODES, compile_mode
from vfl.options import Validated, choice, integer, number, option

__all__ = ["AttackSettings", "EngineSettings", "ITERATIONS", "RESTARTS", "LBFGS_LR", "LBFGS_INNER", "LBFGS_HISTORY"]

ITERATIONS = integer(low=1, high=10_000_000)
"""An attack's iteration count (`iterations`): steps of its optimiser."""
RESTARTS = integer(low=1, high=10_000)
"""Independent restarts (`restarts`), run as engine trials."""
LBFGS_LR = number(low=0, low_open=True, high=1e3)
"""L-BFGS' learning rate (torch's default 1)."""
LBFGS_INNER = integer(low=1, high=100_000)
"""L-BFGS' inner iterations per step (`max_iter`, torch's default 20)."""
LBFGS_HISTORY = integer(low=1, high=100_000)
"""L-BFGS' history of curvature pairs (`history_size`, torch's default 100)."""


@dataclass(frozen=True, kw_only=True)
class AttackSettings(Validated):
    """Base of an attack's settings dataclass (declare it `@dataclass(frozen=True, kw_only=True)` too)."""
    preset: str = "custom"
    """The dotted preset these settings started from (`dlg.original`); recorded in every result."""


@dataclass(frozen=True, kw_only=True)
class EngineSettings(AttackSettings):
    """Base of the settings of an attack that runs the reconstruction engine (`attacks.engine.run`): its `compile`
    goes into the engine options the driver hands the attack."""
    compile: str = option("off", "torch.compile the engine's steps: off (eager, the reference), on, or auto "
                          "(when the run is long enough to repay the compile).", compile_mode())

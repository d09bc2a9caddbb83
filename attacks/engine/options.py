"""How the engine runs an attack's trials, handed to the attack as one value: the attack passes it whole to
`attacks.engine.run` and never reads it.

    engine = EngineOptions(mode="auto", compile="off", progress=True, description="dlg dlg.quick",
                           report=EngineReport())
    reconstruction = attack(observation, seed=0, engine=engine)     # every run() inside records into the report
    reconstruction = engine.report.attach(reconstruction)           # the mode that ran and what compiling cost

The driver (`attacks.driver.attack_and_score`) builds it from the command's `--mode`, the progress display
and the attack's `--compile` setting, and writes its report into metrics.json (`trials_mode`,
`extras.compile`). An attack that runs its own loop (FSHA) draws its progress with `engine.bar(...)`, and
hands `engine.within()` to the engine runs inside that loop.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from attacks.engine.compilation import COMPILE_MODES, compile_extras

__all__ = ["EngineOptions", "EngineReport", "MODES", "QUIET"]

MODES = ("batched", "sequential", "auto")
"""How the trials run: all together under vmap, one after another, or the faster by a measured rule."""


@dataclass
class EngineReport:
    """What the engine runs of one attack did: each run's result (its trials mode and compile report)."""
    results: list = field(default_factory=list)

    def add(self, result: Any) -> None:
        self.results.append(result)

    @property
    def mode(self) -> str | None:
        """The trials mode the runs ran in (several, comma-separated, if they differed); None: no engine run."""
        modes = list(dict.fromkeys(r.mode for r in self.results))
        return ", ".join(modes) if modes else None

    def extras(self) -> dict[str, Any]:
        """`{"compile": ...}` for the result's extras (the runs' compile reports summed), nothing when off."""
        return compile_extras(*self.results)

    def attach(self, reconstruction: Any) -> Any:
        """The reconstruction with the mode that ran (where the attack did not say it itself; "own loop" when
        it ran no engine) and the compile report in its extras."""
        mode = reconstruction.mode if reconstruction.mode is not None else self.mode or "own loop"
        return replace(reconstruction, mode=mode, extras={**reconstruction.extras, **self.extras()})


@dataclass(frozen=True)
class EngineOptions:
    """One attack's engine options (see the module docstring)."""
    mode: str = "auto"
    """Trials mode (`MODES`)."""
    compile: str = "off"
    """torch.compile the engine's steps: off, on or auto (`attacks.engine.compilation`)."""
    progress: bool = False
    """Draw a progress bar on stderr."""
    description: str = "reconstruct"
    """The progress bar's label (the run adds the trials mode that runs)."""
    report: EngineReport | None = field(default=None, compare=False)
    """Where each run records what it did (None: nowhere)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown trials mode {self.mode!r}; use {', '.join(MODES)}")
        if self.compile not in COMPILE_MODES:
            raise ValueError(f"unknown compile mode {self.compile!r}; use {', '.join(COMPILE_MODES)}")

    @classmethod
    def of(cls, settings: Any, **options: Any) -> "EngineOptions":
        """The options for an attack with these settings (their `compile` field, where they declare one), with a
        fresh report."""
        return cls(compile=getattr(settings, "compile", "off"), report=EngineReport(), **options)

    @property
    def sequential(self) -> bool:
        """The trials are asked to run one after another (not `auto`, not batched)."""
        return self.mode == "sequential"

    def labelled(self, text: str) -> "EngineOptions":
        """The same options with `text` after the progress bar's label (one phase of a longer attack)."""
        return replace(self, description=f"{self.description} {text}")

    def within(self) -> "EngineOptions":
        """The same options drawing no bar of their own: for the engine runs inside an attack's own loop, whose
        `bar(...)` counts the loop (UnSplit's label inference fits its clone once per training round)."""
        return replace(self, progress=False)

    def recording(self) -> "EngineOptions":
        """The same options with a fresh report (for a caller that reads what its runs did)."""
        return replace(self, report=EngineReport())

    @contextlib.contextmanager
    def bar(self, total: int, label: str | None = None) -> Iterator[Any]:
        """A progress bar of `total` steps for an attack's own loop (drawn only when `progress`)."""
        from vfl.progress import progress_bar

        with progress_bar(total, label or self.description, enabled=self.progress) as bar:
            yield bar


QUIET = EngineOptions()
"""The default: auto trials mode, eager, no progress bar, no report."""

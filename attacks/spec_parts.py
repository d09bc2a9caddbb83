"""The parts of an attack's declaration that its checks need too (`attacks.spec_checks`): the vocabularies, the
error, a preset and a deviation. `attacks.spec` builds the declaration from them; both import them from here, so
the spec and its checks do not import each other."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from vfl.deviations import Deviation

__all__ = ["SETTINGS", "LABEL_KNOWLEDGE", "UPLOADS", "DISPLAYS", "SpecError", "Preset", "Deviation"]

SETTINGS = ("hfl", "split")
"""hfl: `splitlab hfl --attack NAME`; split: `splitlab attack NAME`."""
LABEL_KNOWLEDGE = ("recovered", "known")
UPLOADS = ("fedsgd", "fedavg")
"""The observations the HFL experiment builds itself; any other kind needs the spec's `observe` hook."""
DISPLAYS = ("clamp", "minmax")


class SpecError(ValueError):
    """A spec that cannot work, found when it is built: one line naming the spec and the field."""


@dataclass(frozen=True)
class Preset:
    """A named setting of an attack: its settings fields beside the defaults, and where each number comes from."""
    name: str
    """Dotted: `attack.variant` (`dlg.original`)."""
    source: str
    values: Mapping[str, Any] = field(default_factory=dict)
    """Settings fields that differ from the settings class's defaults."""
    experiment: Mapping[str, Any] = field(default_factory=dict)
    """Experiment fields this preset was written against (FSHA's victim dataset and client learning rate)."""
    cls: type | None = field(default=None, compare=False, repr=False)
    """The attack's settings class (set by its spec)."""
    factory: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    """The earlier form `Preset(name, factory, source)`, still taken: its settings' fields that differ from the
    defaults become `values` once the spec knows the settings class."""

    def __post_init__(self) -> None:
        if callable(self.source) and isinstance(self.values, str):     # Preset(name, factory, source)
            object.__setattr__(self, "factory", self.source)
            object.__setattr__(self, "source", self.values)
            object.__setattr__(self, "values", {})

    @property
    def attack(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def short(self) -> str:
        return self.name.split(".", 1)[1]

    def settings(self, **overrides: Any) -> Any:
        """The preset's settings with fields replaced where an override is not None (checked once, when built)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.cls(preset=self.name, **{**self.values, **given})

"""What a split-learning attack's experiment shares: its config (the run's seed and device, the attack's preset
and settings overrides, the victim's options) and the contract `splitlab attack NAME` runs.

An attack's spec names its `Experiment`: the config class, `prepare(config)` (everything validated and
loaded, nothing written), `execute(prepared, run, ...)` (through the one driver) and `summary` (the human
line). The victim's options are the fields of the experiment's `victim` dataclass; the attack's own are its
settings' option fields; both are generated into the command (`attacks.split.cli`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Mapping

from vfl.errors import SplitlabError
from vfl.options import Runtime, option, options_of, optional, route, text

__all__ = ["SplitConfig", "Experiment", "family_victim"]


def family_victim(options: type, defaults: Mapping[str, Any], check: Callable[[Any], None] | None,
                  **given: Any) -> Any:
    """An attack family's victim: `options` (the split case) built from the given fields over the family's
    `defaults`, checked by the case, then by the family's own `check`."""
    victim = options(**{**defaults, **given})
    if check is not None:
        check(victim)
    return victim


@dataclass(frozen=True, kw_only=True)
class SplitConfig(Runtime):
    """A split attack's run: the attack's preset and settings overrides, and the victim's given options."""
    attack: ClassVar[str]
    bound_spec: ClassVar[Any]
    """Its attack's spec, bound by the spec when it is built (`attacks.spec.AttackSpec`)."""
    victim_options: ClassVar[type]
    """The dataclass whose option fields describe the victim (`vfl.case.SplitCase`, `FshaVictim`)."""
    victim_defaults: ClassVar[Mapping[str, Any]] = {}
    """The attack family's defaults over its victim's fields (the label attacks': a binary task, cut 6), where
    neither the user nor the preset gives one: presets of the family over the one case, not fields declared again."""
    victim_hidden: ClassVar[tuple[str, ...]] = ()
    """Victim fields the family's command does not offer (the API refuses them in the victim's check)."""
    preset: str | None = option(None, "The attack's preset (default: its own default).", optional(text()))
    options: Mapping[str, Any] = field(default_factory=dict)
    """The attack's settings fields to override; None keeps the preset's."""
    victim: Mapping[str, Any] = field(default_factory=dict)
    """The victim's fields that were given (the rest are the preset's or their defaults)."""

    def check(self) -> None:
        self.settings                       # every name and number, once, when the config is built

    check_victim: ClassVar[Callable[[Any], None] | None] = None
    """What the family needs of its victim beyond the victim's own checks (the label attacks': one feature party)."""

    @classmethod
    def victim_of(cls, **given: Any) -> Any:
        """The family's victim from the given fields over its defaults (`family_victim`); checked."""
        return family_victim(cls.victim_options, cls.victim_defaults, cls.check_victim, **given)

    @functools.cached_property
    def victim_config(self) -> Any:
        """This run's victim: the given fields over the preset's (`Preset.experiment`) over the family's defaults,
        with the run's own fields (seed, device, data root and draw); checked."""
        preset = dict(type(self).bound_spec.preset(self.preset).experiment)
        return self.victim_of(**{**preset, **self.victim, **self.runtime})

    @property
    def runtime(self) -> dict[str, Any]:
        """The run's `Runtime` fields, which its victim runs with."""
        return {f.name: getattr(self, f.name) for f, _ in options_of(Runtime)}

    def check_data(self) -> None:
        """What the data decides (the dataset is here, counts the options must fit), checked by the command with
        its other inputs before any work, so a sweep refuses a grid whose data cannot serve a cell up front."""

    @functools.cached_property
    def settings(self) -> Any:
        spec = type(self).bound_spec
        own = {f.name for f, _ in options_of(spec.settings)}
        unknown = sorted(set(self.options) - own)
        if unknown:
            raise SplitlabError(f"{spec.name} has no option {unknown[0]!r}; its options are {', '.join(sorted(own))}")
        victim_fields = {f.name for f in fields(self.victim_options)}
        stray = sorted(set(self.victim) - victim_fields)
        if stray:
            raise SplitlabError(f"{spec.name}'s victim has no option {stray[0]!r}")
        return spec.preset(self.preset).settings(**self.options)

    @classmethod
    def of(cls, **values: Any) -> "SplitConfig":
        """The config from flat values: the attack's settings fields go to `options`, the victim's to `victim`;
        None means not given."""
        return route(cls, cls.attack, {"options": cls.bound_spec.settings, "victim": cls.victim_options},
                     **values)


@dataclass(frozen=True)
class Experiment:
    """How `splitlab attack NAME` runs a split attack (see the module docstring)."""
    config: type
    prepare: Callable[[Any], Any]
    execute: Callable[..., Any]
    summary: Callable[..., Callable]
    victim_skip: tuple[str, ...] = ()
    """Fields of the victim dataclass that are not options of the command (set from the attack's settings)."""


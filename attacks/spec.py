"""The declaration of an attack: one `AttackSpec`, exported as `SPEC` by the attack's package.

A spec says everything the lab needs to run, document and judge an attack without naming it anywhere
else: what it is and where it comes from, which setting it attacks (split learning or horizontal FL),
which observations it takes, its settings class (whose option fields are its CLI options), its attack
class, its named presets with their sources, the label knowledge it accepts, how it deviates from its
paper, the arguments its smoke run takes, and optional hooks where it needs more than the generic
experiment does (building its own observation, diagnostics of the observation, evaluation against the
ground truth, extra files). The attack object and each hook, with the arguments the lab passes them, are
the protocols of `attacks.hooks`.

The whole spec is checked when it is built (so when its module loads): a field of the wrong kind, a preset
its settings refuse, a hook that cannot take its arguments, a split attack without its experiment is a
one-line `SpecError` naming the spec and the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from attacks.hooks import CheckHook, ConfigureHook, DiagnosticsHook, EvaluateHook, ObserveHook, WriteHook
from attacks.spec_checks import check_spec
from attacks.spec_parts import DISPLAYS, LABEL_KNOWLEDGE, SETTINGS, UPLOADS, Deviation, Preset, SpecError

__all__ = ["AttackSpec", "Preset", "Deviation", "SpecError", "SETTINGS", "LABEL_KNOWLEDGE", "UPLOADS", "DISPLAYS"]

@dataclass(frozen=True)
class AttackSpec:
    name: str
    setting: str
    """hfl or split (`SETTINGS`)."""
    title: str
    """One line: what the attack does."""
    paper: str
    """The source paper, as cited in the docs."""
    observes: tuple[str, ...]
    """Observation kinds it takes, the default first (fedsgd, fedavg, rounds, cut-activations, session)."""
    settings: type
    """A frozen dataclass built on `attacks.settings.AttackSettings`, whose `option(...)` fields are its options."""
    attack: type
    """`attack(settings)` is the attack object (`attacks.hooks.Attack`): `attack(observation, *, seed, engine)`."""
    presets: tuple[Preset, ...]
    default: str
    """The preset run without --preset: the paper's where it fits a laptop, else a quick one."""
    labels: tuple[str, ...] = ("recovered",)
    """Label knowledge it accepts (`LABEL_KNOWLEDGE`); the first is its default."""
    aggregates: bool = False
    """Whether it can attack a secure aggregate of several clients' uploads."""
    observation_options: type | None = None
    """A dataclass of option fields for building its own observation (with `observe`)."""
    observe: ObserveHook | None = None
    diagnostics: DiagnosticsHook | None = None
    evaluate: EvaluateHook | None = None
    write: WriteHook | None = None
    configure: ConfigureHook | None = None
    check: CheckHook | None = None
    model: str | None = None
    """HFL: the global model it runs on when no --arch is given (its paper's where it fits a CPU)."""
    experiment: Any = None
    """Split attacks: the experiment that builds the victim and runs the attack (`splitlab attack NAME`)."""
    display: str = "clamp"
    """How reconstruction.png draws the answer: clamp, or minmax (per-image, as the JAST paper shows UnSplit's)."""
    deviations: tuple[Deviation, ...] = ()
    entry_point: str | None = field(default=None, compare=False)
    """A plug-in's entry point (`name = module:ATTR`), set by the registry when it loads it; None for the lab's own."""
    smoke: Mapping[str, Any] = field(default_factory=dict)
    """Options of its smoke run (`splitlab.api.attack(name, **smoke)`): small enough for a test, long enough to beat
    its initial guess on a one-image observation (`tests/test_contract.py` runs every attack so)."""

    def __post_init__(self) -> None:
        check_spec(self)
        if self.experiment is not None:                  # a split config knows its spec without looking it up
            config = self.experiment.config
            if getattr(config, "attack", None) != self.name:
                raise SpecError(f"spec {self.name!r}: its experiment's config says attack = "
                                f"{getattr(config, 'attack', None)!r}; give the config attack = {self.name!r}")
            config.bound_spec = self

    def preset(self, name: str | None = None) -> Preset:
        """A preset by its dotted or short name; None gives the default."""
        from vfl.errors import SplitlabError

        name = self.default if name is None else name
        dotted = name if "." in name else f"{self.name}.{name}"
        if dotted.split(".", 1)[0] != self.name:
            raise SplitlabError(f"preset {name} is for attack {dotted.split('.', 1)[0]}, not {self.name}; use "
                                f"--preset {' or '.join(p.name for p in self.presets)}")
        for preset in self.presets:
            if preset.name == dotted:
                return preset
        raise SplitlabError(f"unknown preset {name!r} for {self.name}; choose one of: "
                            f"{', '.join(p.name for p in self.presets)}")

    def settings_for(self, preset: str | None = None, **overrides: Any) -> Any:
        """The preset's settings with overrides (None keeps the preset's); an unknown field is a one-line error."""
        from dataclasses import fields

        from vfl.errors import SplitlabError

        known = {f.name for f in fields(self.settings)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise SplitlabError(f"{self.name} has no setting {unknown[0]!r}; its settings are {', '.join(sorted(known))}")
        return self.preset(preset).settings(**overrides)

    def make(self, settings: Any) -> Any:
        """The attack object for these settings."""
        return self.attack(settings)

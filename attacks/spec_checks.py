"""The whole of an `AttackSpec` checked when it is built: every field of the kind the lab needs, every preset built
by its settings, every hook able to take the arguments the lab passes (`attacks.hooks`), a split attack's
experiment present. The first problem is a one-line `SpecError` naming the spec and the field, with the fix;
the registry adds the entry point (`attacks.registry`).
"""
from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import replace
from typing import Any, Callable, Mapping

from attacks.hooks import HOOK_ARGUMENTS
from attacks.spec_parts import DISPLAYS, LABEL_KNOWLEDGE, SETTINGS, UPLOADS, Deviation, Preset, SpecError

__all__ = ["check_spec"]

NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def check_spec(spec) -> None:
    """Check `spec` (an AttackSpec being built) and give its presets their settings class; raise SpecError."""
    name = spec.name if isinstance(spec.name, str) else repr(spec.name)

    def fail(message: str) -> None:
        raise SpecError(f"spec {name}: {message}")

    if not isinstance(spec.name, str) or not NAME.fullmatch(spec.name):
        fail("name must be lower-case letters, digits, - or _ (it is the command-line name)")
    if spec.setting not in SETTINGS:
        fail(f"setting must be one of {', '.join(SETTINGS)}, got {spec.setting!r}")
    for text in ("title", "paper", "default"):
        if not isinstance(getattr(spec, text), str) or not getattr(spec, text).strip():
            fail(f"{text} must be a non-empty string")
    _words(fail, "observes", spec.observes)
    if spec.setting == "hfl" and spec.observe is None and not set(spec.observes) <= set(UPLOADS):
        fail(f"observes {', '.join(spec.observes)}: the HFL experiment builds {' and '.join(UPLOADS)} uploads; "
             "another kind needs an observe hook")
    _words(fail, "labels", spec.labels)
    if not set(spec.labels) <= set(LABEL_KNOWLEDGE):
        fail(f"labels must be among {', '.join(LABEL_KNOWLEDGE)}, got {', '.join(spec.labels)}")
    _settings_class(fail, spec.settings)
    _attack_class(fail, spec.attack, spec.setting)
    for hook, (protocol, count) in HOOK_ARGUMENTS.items():
        _hook(fail, hook, getattr(spec, hook), count)
    if spec.observation_options is not None:
        if not dataclasses.is_dataclass(spec.observation_options) or not isinstance(spec.observation_options, type):
            fail("observation_options must be a dataclass of option fields")
        if spec.observe is None:
            fail("observation_options need an observe hook that builds the observation from them")
    if spec.setting == "split":
        _experiment(fail, spec.experiment)
    elif spec.experiment is not None:
        fail("experiment is for split attacks; an HFL attack runs through `splitlab hfl`")
    if spec.display not in DISPLAYS:
        fail(f"display must be one of {', '.join(DISPLAYS)}, got {spec.display!r}")
    if spec.model is not None and not isinstance(spec.model, str):
        fail("model must be an architecture name (see `splitlab models`) or None")
    if not isinstance(spec.aggregates, bool):
        fail("aggregates must be True or False")
    if not isinstance(spec.smoke, Mapping) or not all(isinstance(k, str) for k in spec.smoke):
        fail("smoke must map option names to values (`splitlab.api.attack` keywords)")
    object.__setattr__(spec, "presets", _presets(fail, spec))
    _deviations(fail, spec)


def _words(fail: Callable, what: str, value: Any) -> None:
    if not isinstance(value, tuple) or not value or not all(isinstance(v, str) and v for v in value):
        fail(f"{what} must be a non-empty tuple of names, got {value!r}")


def _settings_class(fail: Callable, settings: Any) -> None:
    from attacks.settings import AttackSettings

    if not (isinstance(settings, type) and issubclass(settings, AttackSettings) and dataclasses.is_dataclass(settings)
            and settings.__dataclass_params__.frozen):
        shown = settings.__name__ if isinstance(settings, type) else repr(settings)
        fail(f"settings {shown} is not a frozen dataclass built on attacks.kit.AttackSettings; declare it "
             "`@dataclass(frozen=True, kw_only=True) class ...(AttackSettings)`")


def _attack_class(fail: Callable, attack: Any, setting: str) -> None:
    call = next((vars(k)["__call__"] for k in attack.__mro__ if "__call__" in vars(k)), None) \
        if isinstance(attack, type) else None
    if call is None:
        fail(f"attack {getattr(attack, '__name__', attack)!r} is not a class whose objects are called "
             "attack(observation, *, seed, engine) -> Reconstruction")
    try:
        parameters = inspect.signature(call).parameters
    except (TypeError, ValueError):
        return                                          # a builtin signature: taken on trust
    free = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    engine = "engine" in parameters or {"mode", "progress"} <= set(parameters)     # or the earlier contract
    if not free and ("seed" not in parameters or not engine):
        fail(f"attack {attack.__name__}.__call__ must take (observation, *, seed, engine); it takes "
             f"({', '.join(list(parameters)[1:])})")
    if setting == "hfl" and not callable(getattr(attack, "check", None)):
        fail(f"attack {attack.__name__} needs check(observation): the HFL experiment calls it to refuse an "
             "observation that lacks what the attack needs (attacks.kit.check_requirements)")


def _hook(fail: Callable, name: str, hook: Any, count: int) -> None:
    if hook is None:
        return
    if not callable(hook):
        fail(f"{name} must be a function, got {type(hook).__name__}")
    try:
        inspect.signature(hook).bind(*[None] * count)
    except TypeError:
        fail(f"{name} hook {getattr(hook, '__name__', hook)} must take {count} positional arguments "
             f"(attacks.hooks.{HOOK_ARGUMENTS[name][0].__name__})")
    except ValueError:
        pass                                            # no signature to read (a builtin): taken on trust


def _experiment(fail: Callable, experiment: Any) -> None:
    from attacks.split.experiment import Experiment, SplitConfig

    if not isinstance(experiment, Experiment):
        fail("a split attack needs experiment=split_experiment(config, family) (attacks.kit; a label attack's "
             "label_experiment(config)): it builds the victim `splitlab attack NAME` runs")
    if not (isinstance(experiment.config, type) and issubclass(experiment.config, SplitConfig)):
        fail("experiment.config must be a SplitConfig subclass (attacks.split.experiment)")


def _presets(fail: Callable, spec) -> tuple[Preset, ...]:
    if not isinstance(spec.presets, tuple) or not spec.presets or not all(isinstance(p, Preset) for p in spec.presets):
        fail("presets must be a non-empty tuple of attacks.kit.Preset")
    names = [p.name for p in spec.presets]
    wrong = [n for n in names if not isinstance(n, str) or n.split(".", 1)[0] != spec.name or "." not in n]
    if wrong or spec.default not in names or len(set(names)) != len(names):
        fail(f"presets must be distinct `{spec.name}.*` names including the default {spec.default!r}, got {names}")
    fields = {f.name: f for f in dataclasses.fields(spec.settings) if f.init}
    presets = []
    for preset in spec.presets:
        if preset.factory is not None:
            preset = replace(preset, values=_factory_values(fail, preset, spec.settings, fields))
        if not isinstance(preset.source, str) or not preset.source.strip():
            fail(f"preset {preset.name} must say where its numbers come from (source)")
        if not isinstance(preset.values, Mapping) or not isinstance(preset.experiment, Mapping):
            fail(f"preset {preset.name}: values and experiment must be mappings of field names to values")
        unknown = sorted(set(preset.values) - set(fields))
        if unknown:
            fail(f"preset {preset.name} sets {unknown[0]!r}, which {spec.settings.__name__} has no field for")
        preset = replace(preset, cls=spec.settings)
        try:
            preset.settings()
        except (ValueError, TypeError) as exc:          # SplitlabError is a ValueError
            fail(f"preset {preset.name} is refused by its settings: {exc}")
        presets.append(preset)
    return tuple(presets)


def _factory_values(fail: Callable, preset: Preset, cls: type, fields: dict) -> dict[str, Any]:
    """The earlier `Preset(name, factory, source)`: the fields of the factory's settings that differ from the
    defaults."""
    try:
        built = preset.factory()
    except Exception as exc:                            # noqa: BLE001 - a plug-in's factory, reported in one line
        fail(f"preset {preset.name}'s factory failed: {type(exc).__name__}: {exc}")
    if not isinstance(built, cls):
        fail(f"preset {preset.name}'s factory returned {type(built).__name__}, not {cls.__name__}")
    values = {}
    for name, f in fields.items():
        default = f.default if f.default is not dataclasses.MISSING else \
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING
        if name != "preset" and getattr(built, name) != default:
            values[name] = getattr(built, name)
    return values


def _deviations(fail: Callable, spec) -> None:
    if not isinstance(spec.deviations, tuple) or not all(isinstance(d, Deviation) for d in spec.deviations):
        fail("deviations must be a tuple of attacks.kit.Deviation")
    names = {p.name for p in spec.presets}
    for deviation in spec.deviations:
        unknown = [p for p in deviation.presets if p not in names]
        if unknown:
            fail(f"deviation {deviation.what!r} names preset {unknown[0]}, which the spec does not have")

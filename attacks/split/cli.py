"""`splitlab attack NAME`: one command per split-learning attack in the registry, every option generated.

A command's options are its experiment's (the run's seed and device, the preset, a checkpoint), its
victim's (the model to train, or the honest client) and the attack's own (its settings' option fields); a
command is built only when it is asked for, so `splitlab attack unsplit` loads UnSplit's package only.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, Iterator, Mapping

import typer
from typer.core import TyperGroup

from attacks import registry
from vfl.cli_options import (METRIC_WEIGHTS, Output, command_from, parameters, renamed_parameters, shared_parameters,
                              values)
from vfl.cli_output import emit, handles_errors
from vfl.options import Runtime, options_of, take_renamed
from vfl.preflight import inputs_checked
from vfl.runs import Run

__all__ = ["register", "split_command", "split_app"]

RUNTIME = tuple(f.name for f, _ in options_of(Runtime))


def _run(name: str, given: dict[str, Any]) -> None:
    from attacks.metrics import load_fid, load_lpips

    spec = registry.spec(name)
    experiment = spec.experiment
    output = Output(**values(Output, given))
    given = take_renamed(given, experiment.config.renamed)
    victim = {k: v for k, v in values(experiment.config.victim_options, given).items() if k not in RUNTIME}
    config = experiment.config.of(**values(experiment.config, given), victim=victim,
                                  options=values(spec.settings, given))
    config.check_data()                             # what the data decides, with the other inputs
    inputs_checked()
    prepared = experiment.prepare(config)
    lpips, fid = load_lpips(backbone_weights=output.lpips_weights), load_fid(output.fid_weights)
    run = Run.create(f"attack-{name}", {**prepared.record(), "attack_origin": registry.origin(name)},
                     Path(output.out) if output.out else None, overwrite=output.overwrite)
    outcome = experiment.execute(prepared, run, lpips=lpips, fid=fid, progress=not output.as_json)
    emit(run.record(outcome.metrics), output.as_json, experiment.summary(prepared, outcome, run))


@functools.cache
def split_command(name: str):
    """The command function of split attack `name`, its options generated from its declarations."""
    spec = registry.spec(name)
    experiment = spec.experiment
    groups = [parameters(experiment.config),
              parameters(experiment.config.victim_options, panel="Victim", skip=RUNTIME + experiment.victim_skip
                         + experiment.config.victim_hidden),
              shared_parameters(("out", "overwrite", "as_json", *METRIC_WEIGHTS), panel="Output"),
              parameters(spec.settings, panel=f"{name} options", preset=(spec.default, spec.preset().settings()))]
    for p in groups[1]:                         # what a victim field means for this family, where it is its own
        p.default.help = experiment.config.victim_help.get(p.name, p.default.help)
    groups.append(renamed_parameters(groups[1], dict(experiment.config.renamed)))
    for p in groups[0]:
        if p.name == "preset":
            p.default.help = f"Preset: {', '.join(x.name for x in spec.presets)} (default {spec.default})."
    defaults = {f.name: f.default for f in dataclasses.fields(experiment.config.victim_options)}
    defaults.update(experiment.config.victim_defaults)      # the attack family's own defaults over the case
    for p in groups[1]:
        if p.name in experiment.config.victim_defaults:
            p.default.show_default = str(experiment.config.victim_defaults[p.name])
    for p in groups[1]:                         # a victim field a preset sets: its default is the preset's
        by_preset = {x.short: x.experiment.get(p.name, defaults[p.name]) for x in spec.presets}
        if any(p.name in x.experiment for x in spec.presets):
            p.default.show_default = False
            p.default.help += " Default: the preset's (" + ", ".join(f"{k} {v:g}" if isinstance(v, float) else
                                                                       f"{k} {v}" for k, v in by_preset.items()) + ")."
    return handles_errors(command_from(functools.partial(_run, name), groups, name=name, doc=spec.title + "."))


def split_app(name: str) -> typer.Typer:
    """An app whose one command is split attack `name` (`splitlab.help_index` reads it too)."""
    app = typer.Typer(add_completion=False)
    app.command(name)(split_command(name))
    return app


@functools.cache
def _click_command(name: str) -> Any:
    return typer.main.get_group(split_app(name)).commands[name]


class _Commands(Mapping):
    """`group.commands`: the registry's split attacks by name, each built on first access."""

    def __iter__(self) -> Iterator[str]:
        return iter(registry.names("split"))

    def __len__(self) -> int:
        return len(registry.names("split"))

    def __getitem__(self, name: str) -> Any:
        if name not in registry.names("split"):
            raise KeyError(name)
        return _click_command(name)


class AttackGroup(TyperGroup):
    """The split attacks of the registry as subcommands, each built when it is asked for."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, name: str) -> Any:
        return self.commands.get(name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """As click's, with each plug-in that failed to load named at the end (its setting is unknown)."""
        broken = registry.failures()
        self.epilog = ("Plug-ins that failed to load: " + "; ".join(
            f"{n} ({why.split(' failed to load: ', 1)[-1]})" for n, why in broken.items())) if broken else None
        super().format_help(ctx, formatter)


def register(app: typer.Typer) -> None:
    app.add_typer(typer.Typer(cls=AttackGroup, no_args_is_help=True, add_completion=False), name="attack",
                  help="Attacks on a split-learning model.")

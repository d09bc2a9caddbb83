"""`splitlab hfl`: reconstruct a client's batch from what an HFL server sees.

Every option is generated from a declaration (`vfl.cli_options`): the experiment's (`HFLConfig`), the
run's (`Output`), and the chosen attack's own, from its settings and observation options. The attack's
options depend on `--attack`, so the command is built for the attack named on the command line
(`resolve`): `splitlab hfl --attack fedleak --help` lists FedLeak's, and only FedLeak's package is loaded.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import typer

from attacks import registry
from attacks.hfl.cli_args import attack_in
from attacks.hfl.experiment import HFLConfig, execute, prepare
from vfl.cli_output import emit, handles_errors
from vfl.cli_options import Output, command_from, parameters, values
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.preflight import inputs_checked
from vfl.runs import Run

__all__ = ["register", "resolve", "hfl_command", "hfl_app", "attack_in"]

HELP = "Gradient inversion by an honest-but-curious HFL server: reconstruct a client's batch from its upload."


def _summary(m: dict, name: str, preset: str, config: HFLConfig, run: Run):
    def show(console) -> None:
        head = (f"{name} ({preset}) on {config.arch}, {config.dataset}, batch {config.batch_size}, "
                f"defence {config.plan.defence.spec}, {m['n_trials']} trials ({config.mode})")
        if m["best_trial"] is None:
            console.print(f"{head}: every trial diverged; no reconstruction. Run directory {run.path}")
            return
        lp = "-" if m["lpips"] is None else f"{m['lpips']:.3f}"
        labels = "-" if m["label_accuracy"] is None else f"{m['label_accuracy']:.2f} ({m['label_rule']})"
        console.print(f"{head}: PSNR {m['psnr']:.2f} dB (max {m['psnr_max']:.2f}, std {m['psnr_std']:.2f}; "
                      f"zero-image baseline {m['baselines']['zero']['psnr']:.2f}), SSIM {m['ssim']:.3f}, LPIPS {lp}, "
                      f"label accuracy {labels}, {m['seconds']:.1f} s ({1e3 * m['seconds_per_step']:.1f} ms/step)"
                      + (f", diverged trials {m['diverged_trials']}" if m["diverged_trials"] else "")
                      + f"; run directory {run.path}")
    return show


def _run(spec, given: dict[str, Any]) -> None:
    from attacks.metrics import load_fid, load_lpips

    output = Output(**values(Output, given))
    flat = values(HFLConfig, given)
    if spec is not None:
        flat |= values(spec.settings, given)
        if spec.observation_options is not None:
            flat |= values(spec.observation_options, given)
    config = HFLConfig.of(**flat)
    datasets.require(config.dataset, config.data_root)
    inputs_checked()
    prepared = prepare(config)
    lpips, fid = load_lpips(backbone_weights=output.lpips_weights), load_fid(output.fid_weights)
    run = Run.create("hfl", prepared.record(), Path(output.out) if output.out else None, overwrite=output.overwrite)
    m = execute(prepared, run, lpips=lpips, fid=fid, progress=not output.as_json).metrics
    emit(run.record(m), output.as_json, _summary(m, config.plan.spec.name, config.plan.settings.preset, config, run))


def _attacks_text(every: bool) -> str:
    """The attacks `--attack` takes: with `every`, each plug-in loaded to read its setting (and one that fails
    listed with why); else the lab's own and the plug-ins' names, none loaded."""
    if every:
        return f"Attacks: {', '.join(registry.listed('hfl'))}."
    plugins = registry.plugin_names()
    return (f"Attacks: {', '.join(registry.BUILTIN['hfl'])}"
            + (f"; plug-ins: {', '.join(plugins)} (`splitlab hfl --help` loads them)" if plugins else "") + ".")


@functools.cache
def hfl_command(attack: str, every: bool = False):
    """The `hfl` command function with `attack`'s own options (none for an unknown name: running it then
    says which attacks there are); `every`: its help lists every attack (`_attacks_text`)."""
    try:
        spec = registry.spec(attack)
        spec = spec if spec.setting == "hfl" else None
    except SplitlabError:
        spec = None
    config = parameters(HFLConfig)
    for p in config:                                    # texts that depend on the registry and the attack
        if p.name == "attack":
            p.default.help = f"{p.default.help} {_attacks_text(every)}"
        if p.name == "preset" and spec is not None:
            p.default.help = f"{spec.name}'s preset: {', '.join(x.name for x in spec.presets)} (default {spec.default})."
        if p.name == "labels" and spec is not None:
            p.default.help += f" {spec.name} takes {' or '.join(spec.labels)}."
    groups = [config, parameters(Output, panel="Output")]
    if spec is not None:
        default = spec.preset()
        groups.append(parameters(spec.settings, panel=f"{spec.name} options",
                                 preset=(default.name, default.settings())))
        if spec.observation_options is not None:
            observation = ("default", spec.observation_options())
            groups.append(parameters(spec.observation_options, panel=f"{spec.name} observation", preset=observation))
    return handles_errors(command_from(functools.partial(_run, spec), groups, name="hfl", doc=HELP))


def hfl_app(attack: str, every: bool) -> typer.Typer:
    """An app whose one command is `hfl` with `attack`'s options (`splitlab.help_index` reads it too)."""
    app = typer.Typer(add_completion=False)
    app.command("hfl")(hfl_command(attack, every))
    return app


def _group(attack: str, every: bool):
    return typer.main.get_group(hfl_app(attack, every))


def register(app: typer.Typer) -> None:
    app.command("hfl")(hfl_command(HFLConfig.attack))


def resolve(name: str, args: list[str]):
    """The click command `hfl` for these arguments (its options are the named attack's). Only `--help` without
    `--attack` loads every plug-in, to list each under its setting."""
    attack = attack_in(args)
    asks_help = any(word in ("--help", "-h") for word in args)
    return _group(attack or HFLConfig.attack, attack is None and asks_help).commands[name]


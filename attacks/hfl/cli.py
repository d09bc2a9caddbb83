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
from attacks.hfl.experiment import HFLConfig, execute, prepare
from vfl.cli_output import emit, handles_errors
from vfl.cli_options import Output, command_from, parameters, values
from vfl.errors import SplitlabError
from vfl.preflight import inputs_checked
from vfl.runs import Run

__all__ = ["register", "resolve", "hfl_command"]

HELP = "Gradient inversion by an honest-but-curious HFL server: reconstruct a client's batch from its upload."


def attack_in(args: list[str]) -> str:
    """The attack named on the command line (`--attack X` or `--attack=X`), else the default."""
    for i, word in enumerate(args):
        if word == "--attack" and i + 1 < len(args):
            return args[i + 1]
        if word.startswith("--attack="):
            return word.split("=", 1)[1]
    return HFLConfig.attack


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
    inputs_checked()
    prepared = prepare(config)
    lpips, fid = load_lpips(backbone_weights=output.lpips_weights), load_fid(output.fid_weights)
    run = Run.create("hfl", prepared.record(), Path(output.out) if output.out else None, overwrite=output.overwrite)
    m = execute(prepared, run, lpips=lpips, fid=fid, progress=not output.as_json).metrics
    emit(run.record(m), output.as_json, _summary(m, config.plan.spec.name, config.plan.settings.preset, config, run))


@functools.cache
def hfl_command(attack: str):
    """The `hfl` command function with `attack`'s own options (none for an unknown name: running it then
    says which attacks there are)."""
    try:
        spec = registry.spec(attack) if attack in registry.names("hfl") else None
    except SplitlabError:
        spec = None
    config = parameters(HFLConfig)
    for p in config:                                    # texts that depend on the registry and the attack
        if p.name == "attack":
            p.default.help = f"{p.default.help} Attacks: {', '.join(registry.names('hfl'))}."
        if p.name == "preset" and spec is not None:
            p.default.help = f"{spec.name}'s preset: {', '.join(x.name for x in spec.presets)} (default {spec.default})."
        if p.name == "labels" and spec is not None:
            p.default.help += f" {spec.name} takes {' or '.join(spec.labels)}."
    groups = [config, parameters(Output, panel="Output")]
    if spec is not None:
        groups.append(parameters(spec.settings, panel=f"{spec.name} options", show_defaults=False))
        if spec.observation_options is not None:
            groups.append(parameters(spec.observation_options, panel=f"{spec.name} observation"))
    return handles_errors(command_from(functools.partial(_run, spec), groups, name="hfl", doc=HELP))


def _group(attack: str):
    app = typer.Typer(add_completion=False)
    app.command("hfl")(hfl_command(attack))
    return typer.main.get_group(app)


def register(app: typer.Typer) -> None:
    app.command("hfl")(hfl_command(HFLConfig.attack))


def resolve(name: str, args: list[str]):
    """The click command `hfl` for these arguments (its options are the named attack's)."""
    return _group(attack_in(args)).commands[name]

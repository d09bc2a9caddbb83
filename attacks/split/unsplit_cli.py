"""`splitlab attack unsplit`: train (or load) a split model, then attack it with UnSplit."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from attacks.metrics import load_fid, load_lpips
from attacks.presets import names_for, settings
from attacks.split.experiment import attack_victim, load_victim, train_victim
from attacks.split.unsplit import CLONE_MODES, UnSplit
from vfl.cli import (
    ARCH_OPTION,
    CUT_OPTION,
    DATASET_OPTION,
    DEFENCE_OPTION,
    EPOCHS_OPTION,
    ITERATIONS_OPTION,
    METRIC_WEIGHTS,
    RUN,
    RunOptions,
    emit,
    handles_errors,
    with_run_options,
)
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, load_data

PRESET_OPTION = typer.Option("jast", "--preset", help=f"UnSplit preset: {', '.join(names_for('unsplit'))} "
                             "(the short form jast, original, quick works too).")
CLONE_OPTION = typer.Option("per-target", "--clone", help="shared (one clone across targets, as the paper's code) "
                            "or per-target (a clone per target, all targets batched).")
LAMBDA_TV_OPTION = typer.Option(None, "--lambda-tv", help="Override the preset's TV weight.")


def unsplit_settings(preset: str, clone: str, **overrides):
    """The named UnSplit preset with overrides (validated when built)."""
    if clone not in CLONE_MODES:
        raise SplitlabError(f"unknown clone mode {clone!r}; use --clone {' or '.join(CLONE_MODES)}")
    return settings(preset, "unsplit", clone=clone, **overrides)


@with_run_options(*RUN, *METRIC_WEIGHTS)
def unsplit_command(
    dataset: str = DATASET_OPTION,
    arch: str = ARCH_OPTION,
    cut_layer: int = CUT_OPTION,
    epochs: int = EPOCHS_OPTION,
    defence: str = DEFENCE_OPTION,
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Attack this trained model instead of "
                                              "training one (its dataset, arch, cut and defence are used)."),
    preset_name: str = PRESET_OPTION,
    clone: str = CLONE_OPTION,
    lambda_tv: Optional[float] = LAMBDA_TV_OPTION,
    lambda_l2: Optional[float] = typer.Option(None, "--lambda-l2", help="Override the preset's L2 weight."),
    iterations: Optional[int] = ITERATIONS_OPTION,
    opts: RunOptions = RunOptions(),
) -> None:
    """UnSplit (model inversion + model stealing) by an honest-but-curious server on the cut-layer activations."""
    attack = UnSplit(unsplit_settings(preset_name, clone, lambda_tv=lambda_tv, lambda_l2=lambda_l2, rounds=iterations))
    resolve_device(opts.device)
    if checkpoint is not None:
        victim = load_victim(checkpoint, opts.device, opts.root)
        config, provenance = victim.trained.config, victim.test.provenance
        if defence not in ("none", config.defence):    # the defence is part of the trained model
            raise SplitlabError(f"the checkpoint was trained with defence {config.defence!r}; drop --defence "
                                f"or train with --defence {defence} first")
    else:
        config = TrainConfig(dataset=dataset, arch=arch, cut_layer=cut_layer, epochs=epochs, defence=defence,
                             seed=opts.seed, device=opts.device, data_root=opts.root)
        config.validate()
        train, test = load_data(config)
        provenance = test.provenance
    lpips, fid = load_lpips(backbone_weights=opts.lpips_weights), load_fid(opts.fid_weights)
    run = Run.create("attack-unsplit", {
        "train": config, "checkpoint": str(checkpoint) if checkpoint else None, "unsplit": attack.settings,
        "seed": opts.seed, "device": str(resolve_device(opts.device)), "dataset_provenance": provenance}, opts.out,
        overwrite=opts.overwrite)
    if checkpoint is None:
        victim = train_victim(config, train, test, run, progress=not opts.as_json)
    m = attack_victim(victim, attack, run, seed=opts.seed, lpips=lpips, fid=fid, progress=not opts.as_json).metrics

    def summary(console) -> None:
        head = f"UnSplit on {config.arch} cut {config.cut_layer} ({config.dataset}, defence {config.defence})"
        if m["image_mse"] is None:
            console.print(f"{head}: every target diverged; accuracy {m['accuracy']:.4f}; run directory {run.path}")
            return
        console.print(f"{head}: MSE X (min-max) {m['image_mse_minmax']:.4f}, plain {m['image_mse']:.4f} (zero-image "
                      f"baseline {m['baselines']['zero']['image_mse']:.4f}), MSE Z {m['activation_mse']:.3g}, "
                      f"PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.3f}, accuracy {m['accuracy']:.4f}; "
                      f"run directory {run.path}")

    emit(run.record(m), opts.as_json, summary)


def register(attack: typer.Typer) -> None:
    attack.command("unsplit")(handles_errors(unsplit_command))

"""`splitlab attack unsplit`: train (or load) a split model, then attack it with UnSplit."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from attacks.metrics import load_fid, load_lpips
from attacks.split.experiment import attack_victim, load_victim, train_victim
from attacks.split.unsplit import CLONE_MODES, PRESETS, preset
from vfl.cli import (ARCH_OPTION, CUT_OPTION, DATA_ROOT_OPTION, DATASET_OPTION, DEFENCE_OPTION, DEVICE_OPTION,
                     EPOCHS_OPTION, JSON_OPTION, OUT_OPTION, SEED_OPTION, emit, handles_errors)
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, load_data

LPIPS_OPTION = typer.Option(None, "--lpips-weights", help="AlexNet weights for LPIPS (default: the torch hub cache).")
FID_OPTION = typer.Option(None, "--fid-weights", help="pt_inception weights for FID (default: the torch hub cache).")
PRESET_OPTION = typer.Option("jast", "--preset", help=f"UnSplit preset: {', '.join(PRESETS)}.")
CLONE_OPTION = typer.Option("per-target", "--clone", help="shared (one clone across targets, as the paper's code) "
                            "or per-target (a clone per target, all targets batched).")
LAMBDA_TV_OPTION = typer.Option(None, "--lambda-tv", help="Override the preset's TV weight.")


def check_clone_mode(mode: str) -> None:
    if mode not in CLONE_MODES:
        raise SplitlabError(f"unknown clone mode {mode!r}; use --clone {' or '.join(CLONE_MODES)}")


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
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Override the preset's number of rounds."),
    seed: int = SEED_OPTION,
    device: str = DEVICE_OPTION,
    data_root: Optional[Path] = DATA_ROOT_OPTION,
    lpips_weights: Optional[Path] = LPIPS_OPTION,
    fid_weights: Optional[Path] = FID_OPTION,
    out: Optional[Path] = OUT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """UnSplit (model inversion + model stealing) by an honest-but-curious server on the cut-layer activations."""
    settings = preset(preset_name, lambda_tv=lambda_tv, lambda_l2=lambda_l2, rounds=rounds)
    check_clone_mode(clone)
    resolve_device(device)
    if checkpoint is not None:
        victim = load_victim(checkpoint, device)
        config, provenance = victim.trained.config, victim.test.provenance
        if defence not in ("none", config.defence):    # the defence is part of the trained model
            raise SplitlabError(f"the checkpoint was trained with defence {config.defence!r}; drop --defence "
                                f"or train with --defence {defence} first")
    else:
        config = TrainConfig(dataset=dataset, arch=arch, cut_layer=cut_layer, epochs=epochs, defence=defence,
                             seed=seed, device=device, data_root=str(data_root) if data_root else None)
        config.validate()
        train, test = load_data(config)
        provenance = test.provenance
    run = Run.create("attack-unsplit", {
        "train": config, "checkpoint": str(checkpoint) if checkpoint else None, "preset": preset_name,
        "unsplit": settings, "clone": clone, "seed": seed, "device": str(resolve_device(device)),
        "dataset_provenance": provenance}, out)
    if checkpoint is None:
        victim = train_victim(config, train, test, run)
    outcome = attack_victim(victim, settings, clone, run, seed=seed,
                            lpips=load_lpips(backbone_weights=lpips_weights), fid=load_fid(fid_weights))
    m = outcome.metrics
    emit(run.record(m), as_json, lambda c: c.print(
        f"UnSplit on {config.arch} cut {config.cut_layer} ({config.dataset}, defence {config.defence}): "
        f"MSE X (min-max) {m['image_mse_minmax']:.4f}, plain {m['image_mse']:.4f}, MSE Z {m['activation_mse']:.3g}, "
        f"PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.3f}, accuracy {m['accuracy']:.4f}; run directory {run.path}"))


def register(attack: typer.Typer) -> None:
    attack.command("unsplit")(handles_errors(unsplit_command))

"""`splitlab attack fsha`: the Feature-Space Hijacking Attack against a ResNet or a dense (MLP) client."""
from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Optional

import typer

from attacks.split.fsha import PRESETS, load_split, run_fsha, settings_from, settings_record
from vfl.cli import DATA_ROOT_OPTION, DEVICE_OPTION, JSON_OPTION, OUT_OPTION, emit, handles_errors, table
from vfl.runs import Run
from vfl.runtime import resolve_device


def fsha(
    preset: str = typer.Option("paper", help=f"Settings to start from: {', '.join(PRESETS)} "
                               "(quick fits a 2-core CPU in minutes; paper is the paper's 3000 iterations)."),
    dataset: Optional[str] = typer.Option(None, help="Dataset; private = train split, public = test split "
                                          "(default: the preset's, mnist5k for quick and paper)."),
    arch: Optional[str] = typer.Option(None, help="Client setup: resnet (FSHA's CNN) or mlp (dense, JAST). "
                                       "Default resnet."),
    level: Optional[int] = typer.Option(None, help="Split level 1-4 (default 4)."),
    iterations: Optional[int] = typer.Option(None, help="Protocol rounds (default: the preset's)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Private and public batch size."),
    loss: Optional[str] = typer.Option(None, help="wgan (default) or bce."),
    gp_norm: Optional[str] = typer.Option(None, "--gp-norm", help="Gradient-penalty norm: full (default) or "
                                          "spatial (the original's per-channel norm over H, W)."),
    gp_weight: Optional[float] = typer.Option(None, "--gp-weight", help="Gradient-penalty weight (default 500)."),
    width: Optional[float] = typer.Option(None, help="Multiplier on every network's widths (paper 1.0)."),
    lr_client: Optional[float] = typer.Option(None, "--lr-client", help="Client Adam learning rate."),
    lr_pilot: Optional[float] = typer.Option(None, "--lr-pilot", help="Pilot + decoder Adam learning rate."),
    lr_discriminator: Optional[float] = typer.Option(None, "--lr-discriminator", help="Critic Adam learning rate."),
    discriminator_entry: Optional[str] = typer.Option(None, "--discriminator-entry",
                                                      help="tf (default, what the TF code runs) or strided."),
    log_every: Optional[int] = typer.Option(None, "--log-every", help="Log interval in iterations."),
    seed: Optional[int] = typer.Option(None, help="Seed (default 0)."),
    device: str = DEVICE_OPTION,
    data_root: Optional[Path] = DATA_ROOT_OPTION,
    out: Optional[Path] = OUT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """FSHA: a malicious server hijacks the client's feature space and decodes its private images."""
    settings = settings_from(preset, dataset=dataset, arch=arch, level=level, iterations=iterations,
                             batch_size=batch_size, loss=loss, gp_norm=gp_norm, gp_weight=gp_weight, width=width,
                             lr_client=lr_client, lr_pilot=lr_pilot, lr_discriminator=lr_discriminator,
                             discriminator_entry=discriminator_entry, log_every=log_every, seed=seed,
                             device=device, data_root=str(data_root) if data_root else None)
    private, public = load_split(settings)
    run = Run.create("attack fsha", {"fsha": settings_record(settings), "device": str(resolve_device(device)),
                                     "dataset_provenance": private.provenance,
                                     "private_images": len(private), "public_images": len(public)}, out)
    with _terminate_as_interrupt():
        result = run_fsha(settings, run, progress=not as_json, interruptible=True)
    metrics = result.metrics()

    def summary(console) -> None:
        console.print(table(f"FSHA, {settings.arch} client, level {settings.level}, {settings.dataset} "
                            "(MSE on [-1,1]; means over each log interval)", metrics["log"],
                            ["iteration", "encoder_decoder_mse", "reconstruction_mse", "discriminator_loss",
                             "client_loss"]))
        final, best = metrics["reconstruction_mse_final"], metrics["reconstruction_mse_best"]
        console.print(f"reconstruction MSE final {_fmt(final)} / best {_fmt(best)} on [-1,1] "
                      f"({_fmt(metrics['reconstruction_mse01_final'])} / {_fmt(metrics['reconstruction_mse01_best'])} "
                      f"on [0,1]); {metrics['iterations']} iterations in {metrics['seconds']:.1f} s "
                      f"({metrics['iterations_per_second']:.3g} it/s on {metrics['device']}); run {run.path}")
        if metrics["interrupted"]:
            console.print(f"interrupted by hand after {metrics['iterations']} of {settings.iterations} iterations")
        if metrics["diverged_at"] is not None:
            console.print(f"diverged by iteration {metrics['diverged_at']}: no final values reported")

    emit(run.record(metrics), as_json, summary)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """`kill PID` on a background run stops it like Ctrl-C: the run still writes what it reached.

    Only the first: it puts the previous handler back, so a second `kill` ends a run that hangs while writing.
    """
    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, previous)
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:                      # not the main thread (an embedding app): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def register(attack_app: typer.Typer) -> None:
    """Add `fsha` to the `attack` sub-app."""
    attack_app.command("fsha")(handles_errors(fsha))

"""`splitlab attack fsha`: the Feature-Space Hijacking Attack against a ResNet or a dense (MLP) client."""
from __future__ import annotations

import contextlib
import signal
from typing import Optional

import typer

from attacks.metrics import load_fid, load_lpips
from attacks.presets import names_for, settings
from attacks.split.fsha import FSHA, load_split, run_fsha, victim_for
from vfl.cli import ITERATIONS_OPTION, METRIC_WEIGHTS, RUN, RunOptions, emit, handles_errors, table, with_run_options
from vfl.runs import Run
from vfl.runtime import resolve_device


def _preset(field: str, *, victim: bool = False) -> str:
    """`[default: ...]` text for an option whose default is the preset's: its value in every preset."""
    values = {}
    for name in names_for("fsha"):
        record = victim_for(name) if victim else settings(name, "fsha")
        value = getattr(record, field)
        values[name.split(".", 1)[1]] = f"{value:g}" if isinstance(value, float) else str(value)
    if len(set(values.values())) == 1:
        return f"the preset's: {next(iter(values.values()))}"
    return "the preset's: " + ", ".join(f"{name} {value}" for name, value in values.items())


@with_run_options(*RUN, *METRIC_WEIGHTS)
def fsha(
    preset: str = typer.Option("quick", "--preset", help=f"Settings to start from: {', '.join(names_for('fsha'))} "
                               "(short forms quick, paper, paper-fashion work too; quick fits a 2-core CPU in "
                               "minutes, paper is the paper's 3000 iterations)."),
    dataset: Optional[str] = typer.Option(None, help="Dataset; private = train split, public = test split.",
                                          show_default=_preset("dataset", victim=True)),
    arch: str = typer.Option("resnet", "--arch", help="Client setup: resnet (FSHA's CNN) or mlp (dense, JAST)."),
    level: int = typer.Option(4, "--level", help="Split level 1-4."),
    iterations: Optional[int] = typer.Option(None, "--iterations", help=ITERATIONS_OPTION.help,
                                            show_default=_preset("iterations")),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Private and public batch size.",
                                             show_default=_preset("batch_size")),
    loss: Optional[str] = typer.Option(None, help="wgan or bce.", show_default=_preset("loss")),
    gp_norm: Optional[str] = typer.Option(None, "--gp-norm", help="Gradient-penalty norm: full or spatial "
                                          "(the original's per-channel norm over H, W).",
                                          show_default=_preset("gp_norm")),
    gp_weight: Optional[float] = typer.Option(None, "--gp-weight", help="Gradient-penalty weight.",
                                              show_default=_preset("gp_weight")),
    width: Optional[float] = typer.Option(None, help="Multiplier on every network's widths, the client's and the "
                                          "server's.", show_default=_preset("width")),
    lr_client: Optional[float] = typer.Option(None, "--lr-client", help="Client Adam learning rate.",
                                              show_default=_preset("lr_client", victim=True)),
    lr_pilot: Optional[float] = typer.Option(None, "--lr-pilot", help="Pilot + decoder Adam learning rate.",
                                             show_default=_preset("lr_pilot")),
    lr_discriminator: Optional[float] = typer.Option(None, "--lr-discriminator", help="Critic Adam learning rate.",
                                                     show_default=_preset("lr_discriminator")),
    discriminator_entry: Optional[str] = typer.Option(None, "--discriminator-entry", help="tf (what the TF code "
                                                      "runs) or strided.", show_default=_preset("discriminator_entry")),
    log_every: Optional[int] = typer.Option(None, "--log-every", help="Log interval in iterations.",
                                            show_default=_preset("log_every")),
    eval_images: int = typer.Option(1000, "--eval-images", help="Private images scored after training."),
    opts: RunOptions = RunOptions(),
) -> None:
    """FSHA: a malicious server hijacks the client's feature space and decodes its private images."""
    attack = FSHA(settings(preset, "fsha", iterations=iterations, batch_size=batch_size, loss=loss, gp_norm=gp_norm,
                           gp_weight=gp_weight, width=width, lr_pilot=lr_pilot, lr_discriminator=lr_discriminator,
                           discriminator_entry=discriminator_entry, log_every=log_every))
    s = attack.settings
    victim = victim_for(s.preset, dataset=dataset, arch=arch, level=level, lr_client=lr_client, batch_size=batch_size,
                        width=width, eval_images=eval_images, seed=opts.seed, device=opts.device,
                        data_root=opts.root)
    private, public = load_split(victim, s.batch_size)
    lpips, fid = load_lpips(backbone_weights=opts.lpips_weights), load_fid(opts.fid_weights)
    run = Run.create("attack fsha", {"fsha": s, "victim": victim, "seed": opts.seed,
                                     "device": str(resolve_device(opts.device)),
                                     "dataset_provenance": private.provenance,
                                     "private_images": len(private), "public_images": len(public)}, opts.out,
                     overwrite=opts.overwrite)
    with _terminate_as_interrupt():
        outcome = run_fsha(victim, attack, run, seed=opts.seed, lpips=lpips, fid=fid, progress=not opts.as_json,
                           interruptible=True)
    m = outcome.metrics
    e = m["extras"]

    def summary(console) -> None:
        console.print(table(f"FSHA, {victim.arch} client, level {victim.level}, {victim.dataset} "
                            "(MSE on [-1,1]; means over each log interval)", e["log"],
                            ["iteration", "encoder_decoder_mse", "reconstruction_mse", "discriminator_loss",
                             "client_loss"]))
        console.print(f"training-interval reconstruction MSE final {_fmt(e['training_interval_mse_pm1_final'])} / "
                      f"best {_fmt(e['training_interval_mse_pm1_best'])} on [-1,1] "
                      f"({_fmt(e['training_interval_mse01_final'])} / {_fmt(e['training_interval_mse01_best'])} "
                      f"on [0,1]); targets: image_mse {_fmt(m['image_mse'])} on [0,1] (zero-image baseline "
                      f"{_fmt((m['baselines'] or {}).get('zero', {}).get('image_mse'))}), PSNR {_fmt(m['psnr'], 2)} dB, "
                      f"SSIM {_fmt(m['ssim'], 3)}; {m['steps']} iterations in {m['seconds']:.1f} s "
                      f"({_fmt(e['iterations_per_second'], 3)} it/s on {e['device']}); run {run.path}")
        if e["interrupted"]:
            console.print(f"interrupted by hand after {m['steps']} of {s.iterations} iterations")
        if e["diverged_at"] is not None:
            console.print(f"diverged by iteration {e['diverged_at']}: no final values reported")

    emit(run.record(m), opts.as_json, summary)


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


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def register(attack_app: typer.Typer) -> None:
    """Add `fsha` to the `attack` sub-app."""
    attack_app.command("fsha")(handles_errors(fsha))

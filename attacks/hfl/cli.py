"""`splitlab hfl`: reconstruct a client's batch from what an HFL server sees."""
from __future__ import annotations

import inspect
from typing import Callable, Optional

import typer

from attacks.hfl.experiment import (ATTACK_OPTIONS, ATTACKS, KNOWN_LABELS, LABEL_KNOWLEDGE, OBSERVATIONS, HFLConfig,
                                    execute, model_names, prepare)
from attacks.hfl.options import Option, negated
from attacks.hfl.tgias_experiment import TRACE_OPTIONS, TraceOptions
from attacks.hfl.variables import TRIAL_MODES
from attacks.metrics import load_fid, load_lpips
from attacks.presets import DEFAULT_PRESET, PRESETS
from vfl.cli import (ITERATIONS_OPTION, METRIC_WEIGHTS, RUN, RunOptions, emit, handles_errors, splice_parameters,
                     with_run_options)
from vfl.runs import Run

__all__ = ["hfl_command", "register"]

TRACE_HELP = {
    "clients": "--observe rounds: FL clients K; client 0 holds the target batch.",
    "sample_fraction": "--observe rounds: fraction of clients sampled per round.",
    "server_lr": "--observe rounds: the server's SGD learning rate.",
    "invalid": "tgias-ro: how many of the T temporal gradients are invalid.",
    "invalid_kind": "tgias-ro: trained (the batch's gradient at a model converged on the clients' data), "
                    "other-batch or noise.",
    "trained_steps": "tgias-ro, --invalid-kind trained: full-batch Adam steps that train that model on the "
                     "clients' images.",
}
"""The FL trace's CLI options (`--observe rounds`); names, types and defaults come from `TraceOptions`."""
HFL_PRESETS = [name for name, p in PRESETS.items() if p.attack in ATTACKS]


def with_attack_options(fn: Callable) -> Callable:
    """Give the command one CLI option per entry of `ATTACK_OPTIONS` (declared once, in each attack's settings
    module) and hand their values to it as `attack_options` (a switch left off is not given: `is_given`)."""
    def parameter(option: Option) -> inspect.Parameter:
        if option.check is negated:                     # a single switch: off is not given
            default, annotation = typer.Option(False, option.flag, help=option.help), bool
        else:
            default = typer.Option(None, option.flags or option.flag, help=option.help)
            annotation = Optional[option.kind]
        return inspect.Parameter(option.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                 annotation=annotation)

    return splice_parameters(fn, "attack_options", [parameter(o) for o in ATTACK_OPTIONS], dict)


def with_trace_options(fn: Callable) -> Callable:
    """Give the command one CLI option per `TraceOptions` field (its default, type and `TRACE_HELP` text) and
    hand their values to it as `trace_options`."""
    defaults = TraceOptions()
    extra = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=type(getattr(defaults, name)),
                               default=typer.Option(getattr(defaults, name), "--" + name.replace("_", "-"),
                                                    help=TRACE_HELP[name]))     # every field needs its help text
             for name in TRACE_OPTIONS]
    return splice_parameters(fn, "trace_options", extra, dict)


@with_run_options(*RUN, *METRIC_WEIGHTS)
@with_attack_options
@with_trace_options
def hfl_command(
    attack: str = typer.Option("dlg", "--attack", help=f"Attack: {', '.join(ATTACKS)}."),
    arch: str = typer.Option("lenet", "--arch", help=f"Global model: {model_names()} (see `splitlab models`)."),
    dataset: str = typer.Option("mnist5k", "--dataset", help="Dataset (see `splitlab datasets`); the client's "
                                "batch comes from its train split."),
    batch_size: int = typer.Option(1, "--batch-size", help="The client's batch size."),
    index: int = typer.Option(0, "--index", help="First image of the client's batch in the train split."),
    preset_name: Optional[str] = typer.Option(None, "--preset", help=f"Preset: {', '.join(HFL_PRESETS)} (default: "
                                              + ", ".join(f"{DEFAULT_PRESET[a]}" for a in ATTACKS) + ")."),
    restarts: Optional[int] = typer.Option(None, "--restarts", help="Override the preset's restarts."),
    iterations: Optional[int] = ITERATIONS_OPTION,
    tv: Optional[float] = typer.Option(None, "--tv", help="invgrad: override the TV weight (default per dataset)."),
    defence: str = typer.Option("none", "--defence", help="Client defence on the upload: none, "
                                "gaussian:sigma=S[,clip=C], topk:keep=F, quant:bits=N, dp:epsilon=E[,delta=D]."),
    observe: str = typer.Option("fedsgd", "--observe", help=f"What the server sees: {' or '.join(OBSERVATIONS)} "
                                "(FedAvg: the update after local SGD; rounds: a FedSGD trace, tgias-ro)."),
    local_lr: float = typer.Option(1e-4, "--local-lr", help="FedAvg local learning rate."),
    local_epochs: int = typer.Option(1, "--local-epochs", help="FedAvg local epochs."),
    local_batch_size: Optional[int] = typer.Option(None, "--local-batch-size", help="FedAvg mini-batch size "
                                                   "(default: the whole batch)."),
    labels: str = typer.Option("recovered", "--labels", help=f"{', '.join(KNOWN_LABELS)}: "
                               f"{' or '.join(LABEL_KNOWLEDGE)} (recovered: iDLG at batch 1, a counting rule at "
                               "larger batches; fedleak: its --label-rule; awa and agic need known; tgias-ro: "
                               "last-layer label optimisation)."),
    trials: str = typer.Option("auto", "--trials", help=f"Restarts {', '.join(TRIAL_MODES)} (auto: the faster mode by "
                               "the engine's measured rule)."),
    secure_aggregation: int = typer.Option(1, "--secure-aggregation", help="fedleak: the server sees only the sum "
                                           "of this many clients' uploads (each --batch-size images)."),
    pretrain_epochs: int = typer.Option(0, "--pretrain-epochs", help="Train the global model this many epochs on "
                                        "the dataset's test split first (pretrained weights)."),
    opts: RunOptions = RunOptions(),
    attack_options: dict | None = None,
    trace_options: dict | None = None,
) -> None:
    """Gradient inversion by an honest-but-curious HFL server: reconstruct a client's batch from its upload."""
    given = {k: v for k, v in locals().items() if k not in ("preset_name", "opts", "attack_options", "trace_options")}
    config = HFLConfig.of(**given, **attack_options, **trace_options, preset=preset_name, seed=opts.seed, device=opts.device,
                          data_root=opts.root)
    prepared = prepare(config)
    lpips, fid = load_lpips(backbone_weights=opts.lpips_weights), load_fid(opts.fid_weights)
    run = Run.create("hfl", prepared.record(), opts.out, overwrite=opts.overwrite)
    m = execute(prepared, run, lpips=lpips, fid=fid, progress=not opts.as_json).metrics

    def summary(console) -> None:
        head = (f"{prepared.attack.name} ({prepared.settings.name}) on {arch}, {dataset}, batch {batch_size}, "
                f"defence {prepared.defence.spec}, {m['n_trials']} restarts ({trials})")
        if m["best_trial"] is None:
            console.print(f"{head}: every restart diverged; no reconstruction. Run directory {run.path}")
            return
        lp = "-" if m["lpips"] is None else f"{m['lpips']:.3f}"
        console.print(f"{head}: PSNR {m['psnr']:.2f} dB (max {m['psnr_max']:.2f}, std {m['psnr_std']:.2f}; "
                      f"zero-image baseline {m['baselines']['zero']['psnr']:.2f}), SSIM {m['ssim']:.3f}, LPIPS {lp}, "
                      f"label accuracy {m['label_accuracy']:.2f} ({m['label_rule']}), {m['seconds']:.1f} s "
                      f"({1e3 * m['seconds_per_step']:.1f} ms/step)"
                      + (f", diverged restarts {m['diverged_trials']}" if m["diverged_trials"] else "")
                      + f"; run directory {run.path}")

    emit(run.record(m), opts.as_json, summary)


def register(app: typer.Typer) -> None:
    app.command("hfl")(handles_errors(hfl_command))

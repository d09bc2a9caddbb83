"""`splitlab hfl`: reconstruct a client's batch from what an HFL server sees."""
from __future__ import annotations

from dataclasses import fields
from typing import Optional

import typer

from attacks.hfl.fedleak_settings import LABEL_RULES, PROBE_SIGNS, SELECTIONS
from attacks.hfl.experiment import (ATTACKS, KNOWN_LABELS, LABEL_KNOWLEDGE, OBSERVATIONS, HFLConfig, execute,
                                    model_names, prepare)
from attacks.hfl.variables import TRIAL_MODES
from attacks.metrics import load_fid, load_lpips
from attacks.presets import DEFAULT_PRESET, PRESETS
from vfl.cli import ITERATIONS_OPTION, METRIC_WEIGHTS, RUN, RunOptions, emit, handles_errors, with_run_options
from vfl.runs import Run

__all__ = ["hfl_command", "register"]

HFL_PRESETS = [name for name, p in PRESETS.items() if p.attack in ATTACKS]


@with_run_options(*RUN, *METRIC_WEIGHTS)
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
    bo_trials: Optional[int] = typer.Option(None, "--bo-trials", help="awa: Bayesian-optimisation trials over Q "
                                            "(0: the preset's fixed Q; default: the preset's)."),
    bo_random: Optional[int] = typer.Option(None, "--bo-random", help="awa: of the BO trials, how many are random "
                                            "before the GP (default: the preset's)."),
    target_epoch: Optional[int] = typer.Option(None, "--target-epoch", help="awa: the interpolated local epoch it "
                                               "attacks when E > 1 and B > 1 (default 1)."),
    ratio: Optional[float] = typer.Option(None, "--ratio", help="fedleak: fraction R of gradient entries matched "
                                          "(top-R% of |dummy gradient|; preset 0.5)."),
    selection: Optional[str] = typer.Option(None, "--selection", help=f"fedleak: top-R% over the "
                                            f"{' or per '.join(SELECTIONS)} gradient (preset global)."),
    blend: Optional[float] = typer.Option(None, "--blend", help="fedleak: gradient-regularisation weight lambda' "
                                          "in [0, 1] (0: off; preset 0.7)."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="fedleak: TV weight (preset 1e-5)."),
    beta: Optional[float] = typer.Option(None, "--beta", help="fedleak: activation-L1 weight (preset 1e-4)."),
    probe_step: Optional[float] = typer.Option(None, "--probe-step", help="fedleak: k, the probe step length "
                                               "(preset 0.01)."),
    probe: Optional[str] = typer.Option(None, "--probe", help=f"fedleak: probe direction, {' or '.join(PROBE_SIGNS)} "
                                        "(+grad as the equations, or -grad as the appendix example; preset ascent)."),
    label_rule: Optional[str] = typer.Option(None, "--label-rule", help=f"fedleak: {' or '.join(LABEL_RULES)} "
                                             "(the counting rule, or FedLeak's column-sum rule; preset count)."),
    no_refine: bool = typer.Option(False, "--no-refine", help="fedleak: keep the inferred labels fixed "
                                   "(default: refine them jointly with the images)."),
    secure_aggregation: int = typer.Option(1, "--secure-aggregation", help="fedleak: the server sees only the sum "
                                           "of this many clients' uploads (each --batch-size images)."),
    pretrain_epochs: int = typer.Option(0, "--pretrain-epochs", help="Train the global model this many epochs on "
                                        "the dataset's test split first (pretrained weights)."),
    temporal: Optional[int] = typer.Option(None, "--temporal", help="tgias-ro: temporal gradients T of the target "
                                           "batch (default: the preset's, 10)."),
    clients: int = typer.Option(4, "--clients", help="--observe rounds: FL clients K; client 0 holds the target batch."),
    sample_fraction: float = typer.Option(1.0, "--sample-fraction", help="--observe rounds: fraction of clients "
                                          "sampled per round."),
    server_lr: float = typer.Option(0.1, "--server-lr", help="--observe rounds: the server's SGD learning rate."),
    aggregator: Optional[str] = typer.Option(None, "--aggregator", help="tgias-ro: joint (Eq. 5) or Algorithm 1 "
                                             "with mean, median, trimmed or krum (default: the preset's)."),
    invalid: int = typer.Option(0, "--invalid", help="tgias-ro: how many of the T temporal gradients are invalid."),
    invalid_kind: str = typer.Option("other-batch", "--invalid-kind", help="tgias-ro: trained (a trained model's "
                                     "gradient), other-batch or noise."),
    local_steps: Optional[int] = typer.Option(None, "--local-steps", help="tgias-ro: R_l, L-BFGS steps per round "
                                              "(per copy in Algorithm 1; default: the preset's, 1)."),
    layer_ramp: Optional[bool] = typer.Option(None, "--layer-ramp/--uniform-layers", help="tgias-ro: linearly "
                                              "increasing layer weights or uniform ones (default: the preset's)."),
    trim_beta: Optional[float] = typer.Option(None, "--trim-beta", help="tgias-ro trimmed mean: fraction dropped "
                                              "at each end (default 0.3)."),
    krum_f: Optional[int] = typer.Option(None, "--krum-f", help="tgias-ro Krum: invalid copies it expects (default 3)."),
    carry_state: bool = typer.Option(False, "--carry-state", help="tgias-ro Algorithm 1: keep the L-BFGS state "
                                     "across each aggregation (default: fresh every round)."),
    opts: RunOptions = RunOptions(),
) -> None:
    """Gradient inversion by an honest-but-curious HFL server: reconstruct a client's batch from its upload."""
    given = dict(locals())                               # every option, by its HFLConfig field name
    given.update(no_refine=no_refine or None, carry_state=carry_state or None,    # a switch left off: not given
                 preset=preset_name, seed=opts.seed, device=opts.device, data_root=opts.root)
    config = HFLConfig(**{f.name: given[f.name] for f in fields(HFLConfig)})
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

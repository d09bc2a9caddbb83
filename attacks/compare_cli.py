"""`splitlab compare`: the lab's main job (Table 1 and Figures 1, 2, 8 of the JAST paper)."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import typer

from attacks.compare import FSHA_SETUP, compare
from attacks.metrics import load_fid, load_lpips
from attacks.presets import names_for, settings
from attacks.split.fsha import FSHA
from attacks.split.unsplit import UnSplit
from attacks.split.unsplit_cli import CLONE_OPTION, LAMBDA_TV_OPTION, PRESET_OPTION, unsplit_settings
from vfl.cli import (
    CUT_OPTION,
    DATASET_OPTION,
    EPOCHS_OPTION,
    METRIC_WEIGHTS,
    RUN,
    RunOptions,
    emit,
    handles_errors,
    table,
    with_run_options,
)
from vfl.defences import split_specs
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, load_data

ATTACKS = ("unsplit", "fsha")


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _check_attacks(names: list[str], archs: list[str]) -> bool:
    """Whether FSHA runs; UnSplit always does (it makes Table 1)."""
    unknown = [n for n in names if n not in ATTACKS]
    if unknown or "unsplit" not in names:
        raise SplitlabError(f"--attacks takes unsplit or unsplit,fsha (got {','.join(names) or 'nothing'})")
    if "fsha" in names and not any(a in FSHA_SETUP for a in archs):
        raise SplitlabError(f"FSHA attacks the {' and '.join(FSHA_SETUP)} rows; add one of them to --archs")
    return "fsha" in names


@with_run_options(*RUN, *METRIC_WEIGHTS)
def compare_command(
    dataset: str = DATASET_OPTION,
    archs: str = typer.Option("cnn,mlp,small-mlp", "--archs", help="Comma-separated architectures to compare."),
    attacks: str = typer.Option("unsplit", "--attacks", help="unsplit, or unsplit,fsha to add FSHA columns (FSHA's "
                                "ResNet client for the cnn row, its dense client for the mlp row)."),
    fsha_preset: str = typer.Option("quick", "--fsha-preset", help=f"FSHA preset: {', '.join(names_for('fsha'))} "
                                    "(quick: minutes per client on a 2-core CPU)."),
    fsha_iterations: Optional[int] = typer.Option(None, "--fsha-iterations", help="Override the FSHA preset's "
                                                  "iterations."),
    defences: str = typer.Option("none", "--defences", help="Comma-separated defence specs, each applied to every "
                                 "architecture (e.g. none,orthogonal,dp:epsilon=6,delta=0.5)."),
    cut_layer: int = CUT_OPTION,
    epochs: int = EPOCHS_OPTION,
    preset_name: str = PRESET_OPTION,
    clone: str = CLONE_OPTION,
    lambda_tv: Optional[float] = LAMBDA_TV_OPTION,
    opts: RunOptions = RunOptions(),
) -> None:
    """Train and attack CNN, MLP and SmallMLP clients (--archs) with UnSplit (and FSHA with --attacks
    unsplit,fsha); write report.md (Table 1 with the paper's numbers), report.csv and figures."""
    attack = UnSplit(unsplit_settings(preset_name, clone, lambda_tv=lambda_tv))
    base = TrainConfig(dataset=dataset, cut_layer=cut_layer, epochs=epochs, seed=opts.seed, device=opts.device,
                       data_root=opts.root)
    arch_list, defence_list = _names(archs), split_specs(defences) or ["none"]
    if not arch_list:
        raise SplitlabError("--archs needs at least one architecture, e.g. --archs cnn,mlp")
    fsha = None
    if _check_attacks(_names(attacks), arch_list):
        fsha = FSHA(settings(fsha_preset, "fsha", iterations=fsha_iterations))
    for arch in arch_list:                      # every row's config is checked before anything is written
        for defence in defence_list:
            replace(base, arch=arch, defence=defence).validate()
    provenance = load_data(base)[1].provenance
    lpips, fid = load_lpips(backbone_weights=opts.lpips_weights), load_fid(opts.fid_weights)
    run = Run.create("compare", {"base": base, "archs": arch_list, "defences": defence_list,
                                 "unsplit": attack.settings, "device": str(resolve_device(opts.device)),
                                 "dataset_provenance": provenance, "fsha": fsha and fsha.settings},
                     opts.out, overwrite=opts.overwrite)
    rows = compare(base, arch_list, defence_list, attack, run,
                   lpips=lpips, fid=fid, fsha=fsha)
    records = [{"model": r.label, "accuracy": r.metrics["accuracy"], "image_mse_minmax": r.metrics["image_mse_minmax"],
                "paper_mse_x": r.paper.get("mse_x"), "activation_mse": r.metrics["activation_mse"],
                "paper_mse_z": r.paper.get("mse_z"), "fid": r.metrics["fid"], "run_dir": r.run_dir,
                **({"fsha_mse_x": r.fsha["image_mse_minmax"], "fsha_interval_pm1": r.fsha["interval_pm1_final"],
                    "paper_fsha_interval_pm1": r.fsha["paper"], "fsha_run_dir": r.fsha["run_dir"]} if r.fsha else {})}
               for r in rows]
    metrics = {"rows": records}
    run.write_metrics(metrics)

    def summary(console) -> None:
        console.print(table(f"UnSplit on {dataset}, cut layer {cut_layer} (ours vs the JAST paper)", records,
                            ["model", "accuracy", "image_mse_minmax", "paper_mse_x", "activation_mse", "paper_mse_z",
                             "fid"] + (["fsha_mse_x", "fsha_interval_pm1", "paper_fsha_interval_pm1"] if fsha else [])))
        console.print(f"report: {run.file('report.md')}; figures: {run.file('reconstructions.png')}, "
                      f"{run.file('per_class.png')}")

    emit(run.record(metrics, report=str(run.file("report.md"))), opts.as_json, summary)


def register(app: typer.Typer) -> None:
    app.command("compare")(handles_errors(compare_command))

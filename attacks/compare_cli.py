"""`splitlab compare`: the lab's main job (Table 1 and Figures 1, 2, 8 of the JAST paper)."""
from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import typer

from attacks import registry
from attacks.compare import FSHA_SETUP, compare
from attacks.compare_tabular import check_tabular_dataset, compare_tabular
from attacks.metrics import load_fid, load_lpips
from attacks.split.fsha import FSHA
from attacks.split.unsplit import UnSplit, UnsplitSettings
from vfl import data as datasets
from vfl.cli_options import METRIC_WEIGHTS, Output, command_from, parameters, shared_parameters, values
from vfl.cli_output import emit, handles_errors, table
from vfl.defences import split_specs
from vfl.errors import SplitlabError
from vfl.preflight import inputs_checked
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


def _own(name: str, default: Any, flag: str, help: str, annotation: Any = str) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=typer.Option(default, flag, help=help),
                             annotation=annotation)


OWN = [
    _own("job", "images", "--job", "images (UnSplit, and FSHA, on image clients: JAST's Table 1) or tabular (the label "
         "attacks on a binary tabular set, default wdbc, splitVFL beside aggVFL, over --seeds)."),
    _own("seeds", "0,1,2", "--seeds", "With --job tabular: comma-separated seeds, each its own train/test split."),
    _own("archs", "cnn,mlp,small-mlp", "--archs", "Comma-separated architectures to compare."),
    _own("attacks", "unsplit", "--attacks", "unsplit, or unsplit,fsha to add FSHA columns (FSHA's ResNet client for "
         "the cnn row, its dense client for the mlp row)."),
    _own("defences", "none", "--defences", "Comma-separated defence specs, each applied to every architecture (e.g. "
         "none,orthogonal,input-dp:epsilon=6,delta=0.5)."),
    _own("preset", "unsplit.jast", "--preset", "UnSplit preset (unsplit.jast, unsplit.original, unsplit.quick)."),
    _own("fsha_preset", "fsha.quick", "--fsha-preset", "FSHA preset (fsha.quick: minutes per client on a 2-core "
         "CPU)."),
    _own("fsha_iterations", None, "--fsha-iterations", "Override the FSHA preset's iterations.", Optional[int]),
]
"""compare's own options; the victims' and UnSplit's come from their declarations."""
VICTIM = ("seed", "device", "data_root", "dataset", "cut_layer", "epochs")


def _compare(given: dict[str, Any]) -> None:
    """Train and attack CNN, MLP and SmallMLP clients (--archs) with UnSplit (and FSHA with --attacks
    unsplit,fsha); write report.md (Table 1 with the paper's numbers), report.csv and figures."""
    output = Output(**values(Output, given))
    if given["job"] not in ("images", "tabular"):
        raise SplitlabError(f"--job {given['job']!r}: use images or tabular")
    if given["job"] == "tabular":
        return _compare_tabular(given, output)
    archs, attacks, defences = given["archs"], given["attacks"], given["defences"]
    preset_name, fsha_preset, fsha_iterations = given["preset"], given["fsha_preset"], given["fsha_iterations"]
    if given.get("dataset") is not None:
        datasets.require_images(given["dataset"], "compare (UnSplit and FSHA)")
    base = TrainConfig(**{k: v for k, v in values(TrainConfig, given).items() if k in VICTIM})
    dataset, cut_layer = base.dataset, base.cut_layer
    attack = UnSplit(registry.preset(preset_name, "unsplit").settings(**values(UnsplitSettings, given)))
    arch_list, defence_list = _names(archs), split_specs(defences) or ["none"]
    if not arch_list:
        raise SplitlabError("--archs needs at least one architecture, e.g. --archs cnn,mlp")
    fsha = None
    if _check_attacks(_names(attacks), arch_list):
        fsha = FSHA(registry.preset(fsha_preset, "fsha").settings(iterations=fsha_iterations))
    for arch in arch_list:                      # every row's config is checked before anything is written
        for defence in defence_list:
            replace(base, arch=arch, defence=defence)
    inputs_checked()
    provenance = load_data(base)[1].provenance
    lpips, fid = load_lpips(backbone_weights=output.lpips_weights), load_fid(output.fid_weights)
    run = Run.create("compare", {"base": base, "archs": arch_list, "defences": defence_list,
                                 "unsplit": attack.settings, "device": str(resolve_device(base.device)),
                                 "dataset_provenance": provenance, "fsha": fsha and fsha.settings},
                     Path(output.out) if output.out else None, overwrite=output.overwrite)
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

    emit(run.record(metrics, report=str(run.file("report.md"))), output.as_json, summary)


def _compare_tabular(given: dict[str, Any], output: Output) -> None:
    """--job tabular: the label attacks on a binary tabular set (`attacks.compare_tabular`)."""
    dataset = given.get("dataset") or "wdbc"
    check_tabular_dataset(dataset)
    base = TrainConfig(**{**{k: v for k, v in values(TrainConfig, given).items() if k in VICTIM}, "dataset": dataset,
                          "arch": "tabular-mlp"})
    try:
        seeds = [int(s) for s in _names(given["seeds"])]
    except ValueError:
        raise SplitlabError(f"--seeds {given['seeds']!r}: give whole numbers joined by commas, e.g. 0,1,2") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise SplitlabError(f"--seeds {given['seeds']!r}: give distinct non-negative seeds, e.g. 0,1,2")
    provenance = datasets.load(dataset, "train", base.data_root, seed=seeds[0], draw=base.data_draw).provenance
    inputs_checked()
    run = Run.create("compare", {"job": "tabular", "dataset": dataset, "seeds": seeds, "epochs": base.epochs,
                                 "device": str(resolve_device(base.device)), "dataset_provenance": provenance},
                     Path(output.out) if output.out else None, overwrite=output.overwrite)
    rows = compare_tabular(dataset, seeds, base.epochs, base.device, base.data_root, run)
    metrics = {"rows": rows}
    run.write_metrics(metrics)

    def summary(console) -> None:
        console.print(table(f"label attacks on {dataset}, seeds {','.join(map(str, seeds))} (splitVFL vs aggVFL)",
                            rows, ["attack", "architecture", "task_accuracy", "leak_auc", "label_accuracy",
                                   "majority_label_accuracy"]))
        console.print(f"report: {run.file('report.md')}; figure: {run.file('attacks.png')}")

    emit(run.record(metrics, report=str(run.file("report.md"))), output.as_json, summary)


compare_command = command_from(
    _compare, [OWN, parameters(TrainConfig, only=VICTIM, panel="Victims"),
               parameters(UnsplitSettings, panel="UnSplit", show_defaults=False),
               shared_parameters(("out", "overwrite", "as_json", *METRIC_WEIGHTS), panel="Output")],
    name="compare", doc=_compare.__doc__)


def register(app: typer.Typer) -> None:
    app.command("compare")(handles_errors(compare_command))

"""`splitlab compare`: the JAST paper's Table 1 and Figures 1, 2 and 8 on one dataset.

For each architecture (and defence) the split model is trained with the explicit protocol, UnSplit
attacks the first test image of each class, and the results go into `report.md` (the paper's
Table 1 format with the paper's numbers beside ours), `report.csv`, `reconstructions.png`
(originals above each architecture's reconstructions) and `per_class.png` (Figure 8). Each row's
training and attack live in their own run directory under the compare directory, with its config.

With FSHA settings, every architecture that has an FSHA counterpart (`FSHA_SETUP`: the CNN row
gets FSHA's convolutional ResNet client, the MLP row its dense client) is also attacked by the
malicious server of `attacks.split.fsha` (once per architecture, undefended rows only), adding FSHA
columns, `fsha_reconstructions.png` (Figures 3-4) and `fsha_curves.png` (Figure 5).
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import torch

from attacks.figures import image_grid, per_class_bars
from attacks.metrics import FidMetric, LpipsMetric, Unavailable
from attacks.driver import shown
from attacks.split.fsha import FSHA
from attacks.split.fsha.evaluation import curves_figure
from attacks.split.session.experiment import run_fsha, victim_for
from attacks.split.unsplit import UnSplit
from attacks.split.cut_experiment import Victim, attack_victim, train_victim
from vfl.runs import Run, atomic_write_text
from vfl.training import TrainConfig, load_data

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PAPER_TABLE1 = {
    # (dataset, arch) -> the paper's Table 1 row (UnSplit, cut layer 1): MSE X (min-max), MSE Z, FID, accuracy %
    ("mnist", "mlp"): {"mse_x": 0.27, "mse_z": 3e-8, "fid": 394, "accuracy": 98.42},
    ("mnist", "cnn"): {"mse_x": 0.05, "mse_z": 2e-2, "fid": 261, "accuracy": 98.68},
    ("fashion-mnist", "mlp"): {"mse_x": 0.19, "mse_z": 4e-5, "fid": 361, "accuracy": 88.31},
    ("fashion-mnist", "cnn"): {"mse_x": 0.37, "mse_z": 4e-2, "fid": 169, "accuracy": 89.23},
    ("cifar10", "mlp-mixer"): {"mse_x": 1.398, "mse_z": 6e-6, "fid": 423, "accuracy": 89.29},
    ("cifar10", "cifar-cnn"): {"mse_x": 0.056, "mse_z": 4e-3, "fid": 455, "accuracy": 93.61},
    # Appendix C: SmallMLP accuracies only (its UnSplit result is shown as images)
    ("mnist", "small-mlp"): {"accuracy": 92.6},
    ("fashion-mnist", "small-mlp"): {"accuracy": 83.8},
}
PAPER_FSHA = {
    # (dataset, FSHA client) -> the paper's Figure 5 reconstruction error on [-1,1] at the end of the run
    # (MNIST 3000, Fashion-MNIST 5000 iterations), read off the plot: a range, not a single number
    ("mnist", "resnet"): "0.04-0.05", ("mnist", "mlp"): "0.35-0.41",
    ("fashion-mnist", "resnet"): "0.03-0.04", ("fashion-mnist", "mlp"): "0.36-0.75",
}
FSHA_SETUP = {"cnn": "resnet", "mlp": "mlp"}
"""The FSHA client standing in for a compared architecture: FSHA attacks its own client networks
(`vfl.models.fsha`), a convolutional ResNet and a dense MLP, as in the paper's section 4.2."""
PAPER_DATASET = {"mnist5k": "mnist"}
"""Which paper dataset a lab dataset is compared with (mnist5k is a 5,000-image subset of MNIST)."""


@dataclass
class Row:
    arch: str
    defence: str
    metrics: dict
    run_dir: str                         # relative to the compare directory
    reconstructions: torch.Tensor
    targets: torch.Tensor
    paper: dict = field(default_factory=dict)
    fsha: dict | None = None             # FSHA metrics for this architecture's counterpart, if run

    @property
    def label(self) -> str:
        return self.arch if self.defence == "none" else f"{self.arch} + {self.defence}"


def compare(base: TrainConfig, archs: list[str], defences: list[str], attack: UnSplit, run: Run, *, lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
            progress: bool = True, fsha: FSHA | None = None) -> list[Row]:
    """Train and attack every (architecture, defence) with UnSplit, and with FSHA when `fsha` is
    given; write the report files into `run`."""
    rows, fsha_runs = [], []
    for arch in archs:
        fsha_metrics = None
        if fsha is not None and arch in FSHA_SETUP:
            fsha_metrics = _run_fsha(fsha, base, FSHA_SETUP[arch], run, progress, lpips, fid)
            fsha_runs.append(fsha_metrics)
        for defence in defences:
            config = replace(base, arch=arch, defence=defence)
            name = arch if defence == "none" else f"{arch}-{defence.replace(':', '_').replace(',', '_')}"
            sub = Run.create("compare-row", {"train": config, "unsplit": attack.settings}, run.file(name))
            victim = train_victim(Victim(config, *load_data(config)), sub, progress)
            outcome = attack_victim(victim, attack, sub, seed=config.seed, lpips=lpips, fid=fid, progress=progress)
            paper = PAPER_TABLE1.get((PAPER_DATASET.get(config.dataset, config.dataset), arch), {})
            rows.append(Row(arch, defence, outcome.metrics, os.path.relpath(sub.path, run.path),
                            shown(outcome.reconstruction, outcome.metrics, "minmax"), outcome.targets,
                            paper if defence == "none" else {},
                            fsha_metrics if defence == "none" else None))
            run.log(f"{name}: accuracy {outcome.metrics['accuracy']:.4f}, "
                    f"MSE X {outcome.metrics['image_mse_minmax']:.4f}")
    write_report(run, base, attack.settings, rows)
    if fsha_runs:
        write_fsha_figures(run, fsha_runs)
    return rows


def _run_fsha(attack: FSHA, base: TrainConfig, setup: str, run: Run, progress: bool, lpips, fid) -> dict:
    """One FSHA run against `setup` on the compared dataset, in its own run directory, scored by the same
    function on the same [0,1] scale as the UnSplit rows."""
    victim = victim_for(attack.settings, arch=setup, dataset=base.dataset, seed=base.seed, device=base.device,
                        data_root=base.data_root)
    sub = Run.create("compare-fsha", {"fsha": attack.settings, "victim": victim}, run.file(f"fsha-{setup}"))
    outcome = run_fsha(victim, attack, sub, seed=base.seed, lpips=lpips, fid=fid, progress=progress)
    m, extras = outcome.metrics, outcome.metrics["extras"]
    paper = PAPER_FSHA.get((PAPER_DATASET.get(base.dataset, base.dataset), setup))
    run.log(f"fsha {setup}: MSE X (min-max) {m['image_mse_minmax']}; training-interval MSE on [-1,1] final "
            f"{extras['training_interval_mse_pm1_final']}, best {extras['training_interval_mse_pm1_best']}")
    return {"arch": setup, "level": victim.cut_layer, "iterations": m["steps"], "preset": attack.settings.preset,
            "image_mse_minmax": m["image_mse_minmax"], "image_mse": m["image_mse"], "psnr": m["psnr"],
            "interval_pm1_final": extras["training_interval_mse_pm1_final"],
            "interval_pm1_best": extras["training_interval_mse_pm1_best"], "log": extras["log"], "paper": paper,
            "run_dir": os.path.relpath(sub.path, run.path), "originals": outcome.targets,
            "reconstructions": outcome.shown}


def write_fsha_figures(run: Run, fsha_runs: list[dict]) -> None:
    """Figures 3-4 (private images above each FSHA client's reconstructions) and Figure 5 (curves)."""
    run.save_figure("fsha_reconstructions.png", image_grid(
        [("private", fsha_runs[0]["originals"])] + [(f"FSHA, {m['arch']} client", m["reconstructions"])
                                                     for m in fsha_runs],
        title=f"FSHA reconstructions after {fsha_runs[0]['iterations']} iterations (level {fsha_runs[0]['level']})"))
    run.save_figure("fsha_curves.png", curves_figure([(m["arch"], m["log"]) for m in fsha_runs]))


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (abs(value) < 1e-3 or abs(value) >= 1e4) and value != 0:
        return f"{value:.1e}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table_rows(base: TrainConfig, rows: list[Row]) -> list[dict]:
    out = []
    for row in rows:
        m, p = row.metrics, row.paper
        out.append({
            "dataset": base.dataset, "model": row.label,
            "mse_x": m["image_mse_minmax"], "paper_mse_x": p.get("mse_x"),
            "mse_z": m["activation_mse"], "paper_mse_z": p.get("mse_z"),
            "fid": m["fid"], "paper_fid": p.get("fid"),
            "accuracy": 100 * m["accuracy"], "paper_accuracy": p.get("accuracy"),
            "image_mse": m["image_mse"], "psnr": m["psnr"], "ssim": m["ssim"], "lpips": m["lpips"],
            "mse_z_trajectory": m["activation_mse_trajectory"], "attack_seconds": m["seconds"],
            "run_dir": row.run_dir,
        })
        if any(r.fsha for r in rows):
            f = row.fsha or {}
            out[-1].update({"fsha_client": f.get("arch"), "fsha_mse_x": f.get("image_mse_minmax"),
                            "fsha_image_mse": f.get("image_mse"), "fsha_psnr": f.get("psnr"),
                            "fsha_interval_pm1": f.get("interval_pm1_final"),
                            "fsha_interval_pm1_best": f.get("interval_pm1_best"), "paper_fsha_interval_pm1": f.get("paper"),
                            "fsha_iterations": f.get("iterations"), "fsha_run_dir": f.get("run_dir")})
    return out


def write_report(run: Run, base: TrainConfig, settings, rows: list[Row]) -> None:
    records = table_rows(base, rows)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(records[0]))
    writer.writeheader()
    writer.writerows(records)
    atomic_write_text(run.file("report.csv"), buffer.getvalue())

    paper_dataset = PAPER_DATASET.get(base.dataset, base.dataset)
    with_fsha = "fsha_mse_x" in records[0]
    lines = [
        f"# UnSplit{' and FSHA' if with_fsha else ''} against split-learning clients on {base.dataset}",
        "",
        f"Cut layer {base.cut_layer}; training: {base.epochs} epochs, {base.optimizer} lr {base.lr}, batch "
        f"{base.batch_size}, seed {base.seed}. Attack: UnSplit, {settings.iterations} rounds of "
        f"{settings.input_steps} input + {settings.clone_steps} clone steps, lambda_tv {settings.lambda_tv}, "
        f"lambda_l2 {settings.lambda_l2}, clone {settings.clone}; targets: the first test image of each class.",
        "",
        "MSE X: reconstruction MSE after per-image min-max normalisation (the paper's measure); MSE Z: "
        "final clone-fit MSE at the cut layer; FID: 10 reconstructions vs the 10 targets (`-` when the "
        "Inception weights are not available here). Paper values: JAST (arXiv 2412.11689) Table 1"
        + (f" on full {paper_dataset.upper()}" if paper_dataset != base.dataset else "") + ".",
        "",
    ]
    if with_fsha:
        fsha = next(row.fsha for row in rows if row.fsha)
        lines += [f"FSHA X: the FSHA client's attack scored exactly as UnSplit's (`attacks.metrics.score`, min-max MSE "
                  f"on [0,1] against the first private image of each class) after {fsha['iterations']} iterations at "
                  f"level {fsha['level']} (preset {fsha['preset']}). FSHA [-1,1]: the paper's Figure 5 quantity, the "
                  "reconstruction MSE of the received batches on FSHA's [-1,1] scale, mean over the last log interval "
                  "(best interval in brackets); paper: Figure 5 at the end of its run.", ""]
    header = "| Dataset | Model | MSE X | paper | MSE Z | paper | FID | paper | Acc % | paper |"
    lines += [header + (" FSHA client | FSHA X | FSHA [-1,1] | paper |" if with_fsha else ""),
              "|---" * (header.count("|") - 1 + (4 if with_fsha else 0)) + "|"]
    for r in records:
        line = (f"| {r['dataset']} | {r['model']} | {_fmt(r['mse_x'])} | {_fmt(r['paper_mse_x'])} | "
                f"{_fmt(r['mse_z'])} | {_fmt(r['paper_mse_z'])} | {_fmt(r['fid'], 0)} | "
                f"{_fmt(r['paper_fid'], 0)} | {_fmt(r['accuracy'], 2)} | {_fmt(r['paper_accuracy'], 2)} |")
        if with_fsha:
            best = f" ({_fmt(r['fsha_interval_pm1_best'])})" if r["fsha_interval_pm1"] is not None else ""
            line += (f" {_fmt(r['fsha_client'])} | {_fmt(r['fsha_mse_x'])} | {_fmt(r['fsha_interval_pm1'])}{best} | "
                     f"{_fmt(r['paper_fsha_interval_pm1'])} |")
        lines.append(line)
    lines += ["", "Also measured (plain [0,1] scale, reconstructions clamped):", "",
              "| Model | MSE | PSNR dB | SSIM | LPIPS | MSE Z (trajectory mean) | attack s | run |",
              "|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['model']} | {_fmt(r['image_mse'])} | {_fmt(r['psnr'], 2)} | {_fmt(r['ssim'])} | "
                     f"{_fmt(r['lpips'])} | {_fmt(r['mse_z_trajectory'])} | {_fmt(r['attack_seconds'], 1)} | "
                     f"`{r['run_dir']}` |")
    unavailable = {k: v for row in rows for k, v in row.metrics.get("unavailable", {}).items()}
    if unavailable:
        lines += ["", "Not measured here: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items())]
    lines += ["", "![reconstructions](reconstructions.png)", "", "![per-class errors](per_class.png)", ""]
    if with_fsha:
        lines += ["![FSHA reconstructions](fsha_reconstructions.png)", "", "![FSHA curves](fsha_curves.png)", ""]
    atomic_write_text(run.file("report.md"), "\n".join(lines))

    run.save_figure("reconstructions.png", image_grid(
        [("original", rows[0].targets)] + [(row.label, row.reconstructions) for row in rows],
        title=f"UnSplit reconstructions on {base.dataset} (cut layer {base.cut_layer}; min-max normalised)"))
    run.save_figure("per_class.png", per_class_figure(rows))


def per_class_figure(rows: list[Row]) -> Figure:
    """JAST Figure 8: per-class reconstruction MSE and trajectory-mean cut-layer MSE."""
    from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
    figure = Figure(figsize=(11, 3.4))
    left, right = figure.subplots(1, 2)

    def series(key: str) -> dict[str, list[float]]:
        return {row.label: [row.metrics["per_class"][c].get(key, float("nan")) for c in sorted(row.metrics["per_class"])]
                for row in rows}

    per_class_bars(series("image_mse_minmax"), "reconstruction MSE (min-max)", "reconstruction error", ax=left)
    per_class_bars(series("activation_mse_trajectory"), "cut-layer MSE (trajectory mean)", "cut-layer fit",
                   log=True, ax=right)
    figure.tight_layout()
    return figure

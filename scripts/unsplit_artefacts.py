"""Regenerate the JAST paper's UnSplit artefacts: Table 1, the lambda_tv sweep, Table 3 (CNN cut
layers 1-6 with and without DP noise), the SmallMLP accuracies and Table 1's accuracies over seeds.

Defaults run on `mnist5k` on a CPU; on a GPU with the torchvision datasets in the data root, pass
the paper's datasets (`--datasets mnist,fashion-mnist,cifar10`) and presets (`--preset jast`).

    python scripts/unsplit_artefacts.py table1 --datasets mnist5k --preset jast
    python scripts/unsplit_artefacts.py tv-sweep --values 0.1,1,10,100
    python scripts/unsplit_artefacts.py cut-layers --cuts 1,2,3,4,5,6
    python scripts/unsplit_artefacts.py small-mlp --datasets mnist5k
    python scripts/unsplit_artefacts.py accuracy-seeds --archs cnn,mlp --seeds 10
"""
from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from attacks.compare import PAPER_DATASET, PAPER_TABLE1, compare
from attacks.figures import image_grid
from attacks.metrics import minmax_normalise
from attacks.split.experiment import attack_victim, train_victim
from attacks.split.unsplit import preset
from vfl import data as datasets
from vfl.cli import DATA_ROOT_OPTION, handles_errors
from vfl.defences import split_specs
from vfl.runs import Run, atomic_write_text
from vfl.training import TrainConfig, load_data, train_split

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n\n")[0])
ARCHS = {"cifar10": ["cifar-cnn", "mlp-mixer"]}
DEFAULT_ARCHS = ["cnn", "mlp", "small-mlp"]


def _root(data_root: Optional[Path]) -> Optional[str]:
    return str(data_root) if data_root else None


def _available(names: str, data_root: Optional[Path]) -> list[str]:
    chosen = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        ok, reason = datasets.availability(name, data_root)
        if ok:
            chosen.append(name)
        else:
            typer.echo(f"skipping {name}: {reason}", err=True)
    return chosen


def _markdown(rows: list[dict], columns: list[str]) -> list[str]:
    def cell(v):
        return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + \
           ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]


@app.command()
@handles_errors
def table1(datasets_: str = typer.Option("mnist5k", "--datasets"), preset_name: str = typer.Option("jast", "--preset"),
           clone: str = "per-target", epochs: int = 10, device: str = "auto",
           data_root: Optional[Path] = DATA_ROOT_OPTION, out: Optional[Path] = None) -> None:
    """Table 1: UnSplit against CNN and MLP clients on every available dataset (one compare each)."""
    settings = preset(preset_name)
    run = Run.create("artefact-table1", {"datasets": datasets_, "preset": preset_name, "epochs": epochs}, out)
    lines = ["# JAST Table 1 (UnSplit, cut layer 1)", ""]
    for name in _available(datasets_, data_root):
        base = TrainConfig(dataset=name, epochs=epochs, device=device, data_root=_root(data_root))
        sub = Run.create("compare", {"base": base, "preset": preset_name}, run.file(name))
        rows = compare(base, ARCHS.get(name, DEFAULT_ARCHS), ["none"], settings, clone, sub)
        lines += [f"## {name}", "", f"[report]({name}/report.md)", ""] + _markdown(
            [{"model": r.label, "MSE X": r.metrics["image_mse_minmax"], "paper MSE X": r.paper.get("mse_x"),
              "MSE Z": r.metrics["activation_mse"], "paper MSE Z": r.paper.get("mse_z"),
              "accuracy %": 100 * r.metrics["accuracy"], "paper accuracy %": r.paper.get("accuracy")} for r in rows],
            ["model", "MSE X", "paper MSE X", "MSE Z", "paper MSE Z", "accuracy %", "paper accuracy %"]) + [""]
    atomic_write_text(run.file("report.md"), "\n".join(lines))
    typer.echo("\n".join(lines))


@app.command("tv-sweep")
@handles_errors
def tv_sweep(dataset: str = "mnist5k", arch: str = "mlp", values: str = "0.1,1,10,100",
             preset_name: str = typer.Option("jast", "--preset"), clone: str = "per-target", epochs: int = 10,
             device: str = "auto", data_root: Optional[Path] = DATA_ROOT_OPTION, out: Optional[Path] = None) -> None:
    """The lambda_tv sweep for a dense client (paper Section 4.1: raised up to 100, the attack still fails)."""
    lambdas = [float(v) for v in values.split(",")]
    config = TrainConfig(dataset=dataset, arch=arch, epochs=epochs, device=device,
                         data_root=_root(data_root))
    config.validate()
    train, test = load_data(config)                     # missing data files fail before the run is written
    run = Run.create("artefact-tv-sweep", {"train": config, "lambda_tv": lambdas, "preset": preset_name}, out)
    victim = train_victim(config, train, test, Run.create("train", {"train": config}, run.file("train")))
    rows, images = [], []
    for lam in lambdas:
        sub = Run.create("attack-unsplit", {"lambda_tv": lam, "preset": preset_name}, run.file(f"tv_{lam:g}"))
        outcome = attack_victim(victim, preset(preset_name, lambda_tv=lam), clone, sub)
        rows.append({"lambda_tv": lam, "MSE X": outcome.metrics["image_mse_minmax"],
                     "MSE": outcome.metrics["image_mse"], "MSE Z": outcome.metrics["activation_mse"]})
        images.append((f"tv {lam:g}", outcome.reconstructions))
    run.save_figure("tv_sweep.png", image_grid([("original", outcome.targets)] + images,
                                               title=f"UnSplit on {arch}, lambda_tv sweep ({dataset})"))
    lines = [f"# lambda_tv sweep, UnSplit on {arch} ({dataset}), accuracy {victim.trained.accuracy:.4f}", ""] + \
        _markdown(rows, ["lambda_tv", "MSE X", "MSE", "MSE Z"]) + ["", "![sweep](tv_sweep.png)"]
    atomic_write_text(run.file("report.md"), "\n".join(lines))
    typer.echo("\n".join(lines))


@app.command("cut-layers")
@handles_errors
def cut_layers(dataset: str = "mnist5k", arch: str = "cnn", cuts: str = "1,2,3,4,5,6",
               noise: str = "none,dp:epsilon=6,delta=0.5", preset_name: str = typer.Option("jast", "--preset"),
               clone: str = "per-target", epochs: int = 10, device: str = "auto",
               data_root: Optional[Path] = DATA_ROOT_OPTION, out: Optional[Path] = None) -> None:
    """Table 3: UnSplit on the CNN at every cut layer, without and with DP input noise."""
    cut_list = [int(c) for c in cuts.split(",")]
    defences = split_specs(noise)
    base = TrainConfig(dataset=dataset, arch=arch, epochs=epochs, device=device,
                       data_root=_root(data_root))
    for cut in cut_list:
        for defence in defences:
            replace(base, cut_layer=cut, defence=defence).validate()
    train, test = load_data(base)
    run = Run.create("artefact-cut-layers", {"base": base, "cuts": cut_list, "defences": defences,
                                             "preset": preset_name}, out)
    rows, grids = [], {d: [] for d in defences}
    targets = None
    for defence in defences:
        for cut in cut_list:
            config = replace(base, cut_layer=cut, defence=defence)
            name = f"cut{cut}" + ("" if defence == "none" else "-dp")
            sub = Run.create("compare-row", {"train": config, "preset": preset_name}, run.file(name))
            victim = train_victim(config, train, test, sub)
            outcome = attack_victim(victim, preset(preset_name), clone, sub)
            targets = outcome.targets
            rows.append({"cut layer": cut, "defence": defence, "accuracy": victim.trained.accuracy,
                         "MSE X": outcome.metrics["image_mse_minmax"], "MSE": outcome.metrics["image_mse"],
                         "MSE Z": outcome.metrics["activation_mse"], "run": name})
            grids[defence].append((f"cut {cut}", outcome.reconstructions))
    for defence, grid in grids.items():
        label = "without noise" if defence == "none" else f"with noise ({defence})"
        run.save_figure(f"cut_layers_{'none' if defence == 'none' else 'dp'}.png",
                        image_grid([("Ref.", targets)] + grid, title=f"UnSplit on {arch}, {label}"))
    lines = [f"# UnSplit on {arch} by cut layer ({dataset}); JAST Table 3", ""] + \
        _markdown(rows, ["cut layer", "defence", "accuracy", "MSE X", "MSE", "MSE Z", "run"]) + \
        [""] + [f"![{d}](cut_layers_{'none' if d == 'none' else 'dp'}.png)" for d in defences]
    atomic_write_text(run.file("report.md"), "\n".join(lines))
    typer.echo("\n".join(lines))


@app.command("small-mlp")
@handles_errors
def small_mlp(datasets_: str = typer.Option("mnist5k", "--datasets"), epochs: int = 10, device: str = "auto",
              data_root: Optional[Path] = DATA_ROOT_OPTION, out: Optional[Path] = None) -> None:
    """Appendix C: SmallMLP accuracy beside the four-layer MLP's (paper: 92.6 vs 98.5 MNIST, 83.8 vs 88.3 F-MNIST)."""
    run = Run.create("artefact-small-mlp", {"datasets": datasets_, "epochs": epochs}, out)
    rows = []
    for name in _available(datasets_, data_root):
        for arch in ("small-mlp", "mlp"):
            config = TrainConfig(dataset=name, arch=arch, epochs=epochs, device=device,
                                 data_root=_root(data_root))
            train, test = load_data(config)
            trained = train_split(config, train, test, Run.create("train", {"train": config}, run.file(f"{name}-{arch}")))
            paper = PAPER_TABLE1.get((PAPER_DATASET.get(name, name), arch), {}).get("accuracy")
            rows.append({"dataset": name, "arch": arch, "accuracy %": 100 * trained.accuracy, "paper %": paper})
    lines = ["# SmallMLP vs MLP accuracy (JAST Appendix C)", ""] + _markdown(rows, ["dataset", "arch", "accuracy %", "paper %"])
    atomic_write_text(run.file("report.md"), "\n".join(lines))
    typer.echo("\n".join(lines))


@app.command("accuracy-seeds")
@handles_errors
def accuracy_seeds(dataset: str = "mnist5k", archs: str = "cnn,mlp", seeds: int = typer.Option(10, min=2),
                   epochs: int = 10, device: str = "auto", data_root: Optional[Path] = DATA_ROOT_OPTION,
                   out: Optional[Path] = None) -> None:
    """Table 1's accuracy column for seeds 0..N-1: how far the last epoch's test accuracy moves with the seed."""
    from matplotlib.figure import Figure

    configs = {arch: TrainConfig(dataset=dataset, arch=arch, epochs=epochs, device=device, data_root=_root(data_root))
               for arch in [a.strip() for a in archs.split(",") if a.strip()]}
    for config in configs.values():
        config.validate()
    train, test = load_data(next(iter(configs.values())))
    run = Run.create("artefact-accuracy-seeds", {"configs": configs, "seeds": seeds}, out)
    rows, summary = [], []
    fig = Figure(figsize=(5 * len(configs), 3.5))
    for ax, (arch, base) in zip(fig.subplots(1, len(configs), squeeze=False)[0], configs.items()):
        finals = []
        for seed in range(seeds):
            config = replace(base, seed=seed)
            trained = train_split(config, train, test, Run.create("train", {"train": config},
                                                                   run.file(f"{arch}-seed{seed}")))
            finals.append(trained.accuracy)
            rows.append({"arch": arch, "seed": seed, "accuracy": trained.accuracy,
                         "best epoch accuracy": max(h["test_accuracy"] for h in trained.history)})
            ax.plot([h["epoch"] for h in trained.history], [h["test_accuracy"] for h in trained.history],
                    alpha=0.6, lw=1)
        summary.append({"arch": arch, "seeds": seeds, "mean": statistics.mean(finals),
                        "std": statistics.stdev(finals), "min": min(finals), "max": max(finals)})
        ax.set(xlabel="epoch", ylabel="test accuracy", title=f"{arch}: one line per seed")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    run.save_figure("accuracy_seeds.png", fig)
    run.write_metrics({"per_seed": rows, "summary": summary})
    lines = [f"# Last-epoch test accuracy over seeds ({dataset}, {epochs} epochs, paper recipe)", ""] + \
        _markdown(summary, ["arch", "seeds", "mean", "std", "min", "max"]) + [""] + \
        _markdown(rows, ["arch", "seed", "accuracy", "best epoch accuracy"]) + ["", "![seeds](accuracy_seeds.png)"]
    atomic_write_text(run.file("report.md"), "\n".join(lines))
    typer.echo("\n".join(lines))


if __name__ == "__main__":
    app()

"""`splitlab compare --job tabular`: the label attacks on a binary tabular task in one command, splitVFL (the label
party holds a top model) beside aggVFL (it only sums the class scores), over seeds that each draw their own split.

One row per attack and architecture: the task's test accuracy, the leak AUC and label accuracy (mean ± std over
the seeds) beside the majority class's, and what the papers report at their own setting (Li et al.'s near-1 leak
AUC, Fu et al.'s 100% direct inference); `report.md`, `report.csv` and `attacks.png` (the bars with the majority
baseline drawn across them).
"""
from __future__ import annotations

import csv
import statistics
from typing import Any

from attacks import registry
from vfl.errors import SplitlabError
from vfl.runs import Run

ATTACKS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("label-norm", {}), ("label-direction", {}), ("label-direct", {}), ("label-completion", {"labelled": 10}))
"""The label attacks the job runs, with their own options (completion: Fu et al.'s 20 known labels on BCW)."""
TOPS = {"model": "splitVFL", "none": "aggVFL"}
PAPERS = {
    "label-norm": "Li et al.: leak AUC near 1 without defence (Criteo, Avazu; no table)",
    "label-direction": "Li et al.: leak AUC near 1 without defence (Criteo, Avazu; no table)",
    "label-direct": "Fu et al.: 100% label accuracy on every dataset",
    "label-completion": "Fu et al.: accuracy rising with known labels (BCW: 20 in their code; number not sourced)",
}


def positive_class(dataset: str) -> int:
    """The minority class as the positive one (what the label papers attack): wdbc's malignant 0, else 1."""
    return 0 if dataset == "wdbc" else 1


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def compare_tabular(dataset: str, seeds: list[int], epochs: int, device: str, data_root: str | None,
                    run: Run, progress: bool = False) -> list[dict[str, Any]]:
    """Every attack of `ATTACKS` under both tops of `TOPS` (label-direct under none only: it needs no top model),
    each seed its own victim; the rows of the report, written with its figure into `run`."""
    rows = []
    for name, own in ATTACKS:
        experiment = registry.spec(name).experiment
        for top in (("none",) if name == "label-direct" else tuple(TOPS)):
            cells = []
            for seed in seeds:
                options = dict(dataset=dataset, arch="tabular-mlp", task="binary", positive=positive_class(dataset),
                               epochs=epochs, seed=seed, device=device, data_root=data_root, **own)
                if name != "label-direct":
                    options["top"] = top
                prepared = experiment.prepare(experiment.config.of(**options))
                cells.append(experiment.execute(prepared, None, progress=progress).metrics)
            row: dict[str, Any] = {"attack": name, "architecture": TOPS[top], "top": top, "seeds": len(cells)}
            for key, value in (("task_accuracy", lambda m: m["accuracy"]), ("leak_auc", lambda m: m["leak_auc"]),
                               ("label_accuracy", lambda m: m["label_accuracy"]),
                               ("majority_label_accuracy", lambda m: m["baselines"]["majority"]["label_accuracy"])):
                found = [value(m) for m in cells if value(m) is not None]
                row[key], row[key + "_std"] = _mean_std(found) if found else (None, None)
            row["paper"] = PAPERS[name]
            rows.append(row)
            run.log(f"{name} ({TOPS[top]}): leak AUC {row['leak_auc']}, label accuracy {row['label_accuracy']}")
    _write(rows, dataset, seeds, run)
    return rows


def _shown(mean: float | None, std: float | None) -> str:
    return "-" if mean is None else f"{mean:.3f} ± {std:.3f}"


def _write(rows: list[dict[str, Any]], dataset: str, seeds: list[int], run: Run) -> None:
    columns = list(rows[0])
    with open(run.file("report.csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    lines = [f"# Label attacks on {dataset}: splitVFL against aggVFL", "",
             f"The tabular MLP on {dataset}'s binary task (positive class {positive_class(dataset)}), no defence, "
             f"seeds {', '.join(map(str, seeds))}, each its own stratified split; mean ± std over the seeds. The "
             "majority column is the trivial answer an attack must beat.", "",
             "| attack | architecture | task accuracy | leak AUC | label accuracy | majority | the paper |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['attack']} | {r['architecture']} | {_shown(r['task_accuracy'], r['task_accuracy_std'])} | "
              f"{_shown(r['leak_auc'], r['leak_auc_std'])} | {_shown(r['label_accuracy'], r['label_accuracy_std'])} | "
              f"{_shown(r['majority_label_accuracy'], r['majority_label_accuracy_std'])} | {r['paper']} |"
              for r in rows]
    lines += ["", "![label accuracy per attack against the majority class](attacks.png)", ""]
    run.file("report.md").write_text("\n".join(lines))
    _figure(rows, dataset, run)


def _figure(rows: list[dict[str, Any]], dataset: str, run: Run) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['attack']}\n{r['architecture']}" for r in rows]
    fig, ax = plt.subplots(figsize=(1.3 * len(rows) + 2, 4))
    ax.bar(range(len(rows)), [r["label_accuracy"] for r in rows], yerr=[r["label_accuracy_std"] for r in rows],
           color=["tab:blue" if r["top"] == "model" else "tab:orange" for r in rows], capsize=3)
    ax.plot(range(len(rows)), [r["majority_label_accuracy"] for r in rows], "k_", markersize=30,
            label="majority class")
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("label accuracy")
    ax.set_title(f"label attacks on {dataset} (blue: splitVFL, orange: aggVFL)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(run.file("attacks.png"), dpi=120)
    plt.close(fig)


def check_tabular_dataset(dataset: str) -> None:
    """The job takes a binary tabular set (the label papers' attacks score two classes)."""
    from vfl import data as datasets

    spec = datasets.dataset_spec(dataset)
    if spec.tabular is None or spec.num_classes != 2:
        binary = [n for n, s in datasets.DATASETS.items() if s.tabular is not None and s.num_classes == 2]
        raise SplitlabError(f"--job tabular attacks a binary tabular set's labels; {dataset} is not one (use "
                            f"{', '.join(binary)})")

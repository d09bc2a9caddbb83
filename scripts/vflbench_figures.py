"""The figures and tables of the VFL benchmark attacks from their shipped grids: batch label inference's label
accuracy against the batch size (mnist5k, wdbc) beside the majority class; ESA's and GRN's feature error against
the share of the columns the attacker holds beside the training mean (wdbc; GRN on the digits too); each
backdoor's success rate and clean accuracy beside the unpoisoned model (wdbc and the digits, with their
defences); each attack with two defences. Means over seeds 0-2 with their spread; a grid not shipped yet is left
out (and said). Writes docs/figures/vflbench.png and prints the tables.

    python scripts/vflbench_figures.py
"""
from __future__ import annotations

import statistics
from pathlib import Path

from matplotlib.figure import Figure

from splitlab.claims.results import RESULTS, read_csv

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> list[dict] | None:
    path = RESULTS / f"{name}.csv"
    if not path.is_file():
        print(f"{name}: not shipped")
        return None
    return [r for r in read_csv(path) if r.get("status") == "ok"]


def stats(rows: list[dict], key: str) -> tuple[float, float, int]:
    values = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    if not values:
        return float("nan"), float("nan"), 0
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values)


def defences(row: dict) -> str:
    """The defences a cell ran: its feature parties' and the label party's, "none" for neither."""
    ran = [row[k] for k in ("defence", "send-back") if row.get(k) not in (None, "", "none")]
    return "+".join(ran) or "none"


def table(name: str, rows: list[dict], x: str, keys: tuple[str, ...]) -> list[tuple]:
    """Per value of `x` (in the grid's order; "defences": `defences(row)`): the mean and std of each key, printed."""
    value_of = defences if x == "defences" else (lambda r: r[x])
    order = list(dict.fromkeys(value_of(r) for r in rows))
    print(f"\n{name} (x = {x}; mean ± std over seeds, n cells)")
    print(" | ".join([x, *keys]))
    out = []
    for value in order:
        chosen = [r for r in rows if value_of(r) == value]
        found = [stats(chosen, k) for k in keys]
        out.append((value, found))
        print(" | ".join([str(value)] + [f"{m:.4f} ± {s:.4f} ({n})" for m, s, n in found]))
    return out


def curve(ax, points, label: str, style: str, as_float=float) -> None:
    xs = [as_float(v) for v, _ in points]
    ax.errorbar(xs, [f[0][0] for _, f in points], yerr=[f[0][1] for _, f in points], fmt=style, label=label,
                capsize=3)


def main() -> None:
    fig = Figure(figsize=(14, 9))
    (bli, feature), (backdoor, defended) = fig.subplots(2, 2)
    for name, label in (("bli-batch", "mnist5k, 10 classes"), ("bli-tabular", "wdbc, binary")):
        rows = load(name)
        if rows:
            points = table(name, rows, "batch-size", ("label_accuracy", "baselines.majority.label_accuracy",
                                                       "accuracy"))
            curve(bli, points, f"BLI, {label}", "o-")
            bli.plot([float(v) for v, _ in points], [f[1][0] for _, f in points], "k:", alpha=0.6,
                     label=f"majority class, {label}")
    bli.set(xscale="log", xlabel="batch size", ylabel="label accuracy", title="batch label inference", ylim=(0, 1.05))
    bli.legend(fontsize=7)
    for name, label in (("esa-share", "ESA, logistic regression, wdbc"), ("grn-share", "GRN, tabular MLP, wdbc"),
                        ("grn-digits", "GRN, small MLP, mnist5k")):
        rows = load(name)
        if rows:
            points = table(name, rows, "held", ("feature_mse", "baselines.mean.feature_mse", "held_share",
                                                 "accuracy"))
            shares = [f[2][0] for _, f in points]
            feature.errorbar(shares, [f[0][0] for _, f in points], yerr=[f[0][1] for _, f in points], fmt="o-",
                             label=label, capsize=3)
            feature.plot(shares, [f[1][0] for _, f in points], ":", alpha=0.7, label=f"training mean ({label})")
    feature.set(xlabel="share of the columns the attacker holds", ylabel="per-feature MSE (standardised)",
                title="feature inference from predictions (wdbc 5 parties, mnist5k 4)")
    feature.legend(fontsize=7)
    labels, success, clean, accuracy, clean_accuracy = [], [], [], [], []
    for attack, data in (("gr-backdoor", "tabular"), ("bli-replace", "tabular"), ("gr-backdoor", "digits"),
                         ("bli-replace", "digits")):
        rows = load(f"{attack}-{data}")
        if rows:
            for value, found in table(f"{attack}-{data}", rows, "send-back",
                                      ("backdoor_success", "clean_model_success", "accuracy", "clean_model_accuracy")):
                shown = "+".join(part.split(":")[0] for part in value.split("+"))
                labels.append(f"{attack} {data}\n{shown}")
                success.append(found[0][0])
                clean.append(found[1][0])
                accuracy.append(found[2][0])
                clean_accuracy.append(found[3][0])
    if labels:
        xs = range(len(labels))
        width = 0.2
        for shift, values, label in ((-1.5, success, "backdoor success"), (-0.5, clean, "unpoisoned model's rate"),
                                     (0.5, accuracy, "clean accuracy"), (1.5, clean_accuracy,
                                                                         "unpoisoned accuracy")):
            backdoor.bar([x + shift * width for x in xs], values, width, label=label)
        backdoor.set_xticks(list(xs), labels, fontsize=7)
    backdoor.set(ylabel="share of test inputs", title="backdoors (wdbc target benign; mnist5k target 0)",
                 ylim=(0, 1.05))
    backdoor.legend(fontsize=7)
    names, means, errors = [], [], []
    for name, key in (("bli-defences", "label_accuracy"), ("bli-cae", "label_accuracy"),
                      ("esa-defences", "feature_mse"), ("esa-field-defences", "feature_mse"),
                      ("grn-defences", "feature_mse"), ("grn-field-defences", "feature_mse")):
        rows = load(name)
        if rows:
            for value, found in table(name, rows, "defences", (key, "accuracy")):
                names.append(f"{name.split('-')[0]} {key}\n{value.split(':')[0]}")
                means.append(found[0][0])
                errors.append(found[0][1])
    if names:
        defended.bar(range(len(names)), means, yerr=errors, capsize=3)
        defended.set_xticks(range(len(names)), names, fontsize=6)
    defended.set(title="with a defence in training (label-rr, grad-perturb, cae, dcae, nopeek, gradient-noise)")
    fig.tight_layout()
    out = ROOT / "docs" / "figures" / "vflbench.png"
    fig.savefig(out, dpi=110)
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""Figures shared by the attacks: image grids (originals above reconstructions) and per-class plots.

Everything draws on a fresh matplotlib Figure (Agg canvas, no pyplot state, no global rc changes);
callers save it with `vfl.runs.Run.save_figure`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _as_image(x: torch.Tensor) -> np.ndarray:
    x = x.detach().float().cpu().clamp(0, 1)
    if x.dim() == 1:                               # a flat vector: show it as the squarest rectangle
        side = int(np.ceil(np.sqrt(x.numel())))
        x = torch.nn.functional.pad(x, (0, side * side - x.numel())).view(1, side, side)
    return x[0].numpy() if x.shape[0] == 1 else x.permute(1, 2, 0).numpy()


def image_grid(rows: Sequence[tuple[str, torch.Tensor]], title: str = "", column_titles: Sequence[str] = (),
               cell: float = 1.0) -> Figure:
    """One row per (label, images in [0,1] shaped (N, C, H, W)); originals usually first."""
    columns = max(len(images) for _, images in rows)
    from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
    figure = Figure(figsize=(cell * columns + 1.2, cell * len(rows) + (0.5 if title else 0.1)))
    axes = figure.subplots(len(rows), columns, squeeze=False)
    for r, (label, images) in enumerate(rows):
        for c in range(columns):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_visible(False)
            if c < len(images):
                image = _as_image(images[c])
                ax.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=1)
            if c == 0:
                ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
            if r == 0 and c < len(column_titles):
                ax.set_title(column_titles[c], fontsize=8)
    if title:
        figure.suptitle(title, fontsize=10)
    return figure


def per_class_bars(series: dict[str, Sequence[float]], ylabel: str, title: str = "",
                   log: bool = False, ax=None) -> Figure | None:
    """Grouped bars: one group per class, one bar per series (JAST Figure 8 style)."""
    figure = None
    if ax is None:
        from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
        figure = Figure(figsize=(7, 3))
        ax = figure.subplots()
    names = list(series)
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        values = np.asarray(series[name], dtype=float)
        ax.bar(np.arange(len(values)) + (i - (len(names) - 1) / 2) * width, values, width, label=name)
    ax.set_xticks(range(max(len(v) for v in series.values())))
    ax.set_xlabel("class")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return figure


def loss_curve_figure(history: dict[str, torch.Tensor], title: str = "") -> Figure:
    """One panel per loss term: the mean over trials per step, with the trials' min-max band (log scale
    where the values are positive)."""
    names = [k for k, v in history.items() if v.numel()]
    from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
    figure = Figure(figsize=(4.2 * max(len(names), 1), 3.2))
    axes = figure.subplots(1, max(len(names), 1), squeeze=False)[0]
    for ax, name in zip(axes, names):
        values = history[name].detach().double().cpu()
        values = values.view(len(values), -1)
        finite = torch.where(torch.isfinite(values), values, torch.full_like(values, float("nan")))
        evaluated = ~torch.isnan(finite).all(1)        # a term a block does not minimise is not computed there
        steps, finite = np.arange(1, len(values) + 1)[evaluated.numpy()], finite[evaluated]
        ax.plot(steps, np.nanmean(finite.numpy(), axis=1), lw=1.2, label="mean over trials")
        if values.shape[1] > 1:
            ax.fill_between(steps, np.nanmin(finite.numpy(), axis=1), np.nanmax(finite.numpy(), axis=1), alpha=0.25,
                            label="min-max over trials")
            ax.legend(fontsize=7)
        if bool((finite[torch.isfinite(finite)] > 0).all()) and bool(torch.isfinite(finite).any()):
            ax.set_yscale("log")
        ax.set(xlabel="step", title=name)
        ax.grid(alpha=0.3)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure


def label_figure(scores: torch.Tensor, predicted: torch.Tensor, labels: torch.Tensor, title: str = "") -> Figure:
    """A label-inference attack's answer against the private labels. Binary: the distribution of its
    positive-class score per true class, and the ROC curve. Multi-class: the confusion matrix (rows: true)."""
    scores, predicted, labels = scores.detach().double().cpu(), predicted.cpu().long(), labels.cpu().long()
    classes = scores.shape[-1]
    from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
    figure = Figure(figsize=(9, 3.4))
    left, right = figure.subplots(1, 2)
    if classes == 2:
        score = (scores[:, 1] - scores[:, 0]).numpy()
        bins = np.histogram_bin_edges(score, bins=40)
        for c, name in ((0, "negative"), (1, "positive")):
            left.hist(score[(labels == c).numpy()], bins=bins, alpha=0.6, density=True, label=f"true {name}")
        left.set(xlabel="attack's score for the positive class", ylabel="density", title="scores by true label")
        left.legend(fontsize=8)
        order = np.argsort(-score, kind="stable")
        truth = (labels == 1).numpy()[order]
        tpr = np.concatenate([[0], np.cumsum(truth) / max(truth.sum(), 1)])
        fpr = np.concatenate([[0], np.cumsum(~truth) / max((~truth).sum(), 1)])
        right.plot(fpr, tpr, lw=1.2)
        right.plot([0, 1], [0, 1], "k:", lw=0.8)
        right.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC (pooled over rounds)")
    else:
        confusion = np.zeros((classes, classes))
        np.add.at(confusion, (labels.numpy(), predicted.clamp(0, classes - 1).numpy()), 1)
        left.imshow(confusion / np.maximum(confusion.sum(1, keepdims=True), 1), vmin=0, vmax=1, cmap="viridis")
        left.set(xlabel="inferred label", ylabel="true label", title="confusion (row-normalised)")
        recall = np.diag(confusion) / np.maximum(confusion.sum(1), 1)
        right.bar(np.arange(classes), recall)
        right.set(xlabel="class", ylabel="accuracy", ylim=(0, 1), title="label accuracy per class")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure

"""Scores of a label-inference attack: per-sample label accuracy and the leak AUC, against the private labels.

Leak AUC (Li et al., ICLR 2022, Sec. 3): the area under the ROC curve of the attack's per-sample score for
the positive class against the true labels, 1 when the score separates the classes perfectly, 0.5 when it
carries nothing. Li et al. take it within each protocol round (batch) and average over the rounds; so does
the lab when the attack says which round each sample's gradient came from (`Reconstruction.label_rounds`),
over the rounds that hold both classes. Multi-class: one-vs-rest AUC per class, averaged over the classes
present (pooled over the rounds: a batch holds too few samples of each class to rank within it).
"""
from __future__ import annotations

import math

import torch

__all__ = ["auc", "leak_auc", "label_scores", "LABEL_UNAVAILABLE"]

LABEL_UNAVAILABLE = "a label-inference attack reconstructs no images"


def auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """The ROC AUC of `scores` for the `positive` samples (ties count one half); nan with one class only."""
    positive = positive.detach().cpu().bool().flatten()
    n1 = int(positive.sum())
    n0 = len(positive) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    from scipy.stats import rankdata          # scipy.stats (a second of imports) loads when an AUC is scored

    ranks = torch.as_tensor(rankdata(scores.detach().cpu().double().flatten().numpy()))
    return float((ranks[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _one_vs_rest(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """(N, K) scores: the binary AUC of class 1 (K = 2, on the score difference) or the mean one-vs-rest AUC."""
    if scores.shape[1] == 2:
        return auc(scores[:, 1] - scores[:, 0], labels == 1)
    values = [auc(scores[:, c], labels == c) for c in range(scores.shape[1])]
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else float("nan")


def leak_auc(scores: torch.Tensor, labels: torch.Tensor, rounds: torch.Tensor | None = None
             ) -> tuple[float | None, float | None, int]:
    """(leak AUC, pooled AUC, rounds averaged): per round and averaged for a binary task with `rounds`, else
    pooled (then the first two agree and no rounds are counted). None where no round or pool holds both
    classes."""
    scores, labels = scores.detach().cpu().double(), labels.detach().cpu().long()
    pooled = _one_vs_rest(scores, labels)
    pooled_value = None if math.isnan(pooled) else pooled
    if rounds is None or scores.shape[1] != 2:
        return pooled_value, pooled_value, 0
    rounds = rounds.detach().cpu().long()
    order = torch.argsort(rounds, stable=True)
    counts = torch.unique_consecutive(rounds[order], return_counts=True)[1].tolist()
    per_round = [_one_vs_rest(s, y) for s, y in zip(scores[order].split(counts), labels[order].split(counts))]
    per_round = [v for v in per_round if not math.isnan(v)]
    if not per_round:
        return None, pooled_value, 0
    return sum(per_round) / len(per_round), pooled_value, len(per_round)


def label_scores(scores: torch.Tensor, predicted: torch.Tensor, labels: torch.Tensor,
                 rounds: torch.Tensor | None = None) -> dict:
    """One trial's scores: per-sample accuracy, leak AUC (and its pooled form), the confusion counts."""
    predicted, labels = predicted.detach().cpu().long(), labels.detach().cpu().long()
    classes = scores.shape[-1]
    value, pooled, counted = leak_auc(scores, labels, rounds)
    confusion = torch.zeros(classes, classes, dtype=torch.long)
    confusion.index_put_((labels, predicted.clamp(0, classes - 1)), torch.ones_like(labels), accumulate=True)
    return {"label_accuracy": float((predicted == labels).double().mean()), "leak_auc": value,
            "leak_auc_pooled": pooled, "leak_auc_rounds": counted, "confusion": confusion.tolist()}

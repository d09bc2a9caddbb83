"""Scoring a reconstruction against the client's private batch (evaluation only; attacks never see it).

Metrics use the lab's keys (`vfl.runs.METRIC_KEYS`): the best restart's images are matched one-to-one
to the originals (Hungarian assignment on per-pair MSE) when the batch has more than one image, then
scored by `attacks.metrics.score_reconstruction` (PSNR mean/max/std, SSIM, LPIPS, image MSE on
[0,1]-clamped images). Label accuracy is multiset accuracy (order-free). Every restart that did not
diverge is scored too (`per_restart`); a diverged restart is listed in `diverged_trials` and never
scored. When every restart diverged, the image metrics are null with the reason under `unavailable`.
"""
from __future__ import annotations

from typing import Any

import torch

from attacks.hfl.labels import label_accuracy
from attacks.hfl.reconstruction import Reconstruction
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, score_reconstruction

__all__ = ["score", "IMAGE_KEYS"]

IMAGE_KEYS = ("psnr", "psnr_max", "psnr_std", "ssim", "lpips", "fid", "image_mse", "image_mse_minmax")


def score(reconstruction: Reconstruction, x_true: torch.Tensor, y_true: torch.Tensor, *,
          lpips: LpipsMetric | Unavailable | None = None,
          fid: FidMetric | Unavailable | None = None) -> dict[str, Any]:
    """metrics.json for one attack run: best-restart metrics at the top level, per-restart ones below."""
    rec = reconstruction
    x_true = x_true.detach().to(rec.restart_images.device, torch.float32)
    match = len(x_true) > 1
    diverged = [int(i) for i in torch.nonzero(rec.diverged).flatten()]
    per_restart = []
    for r in range(rec.restarts):
        entry: dict[str, Any] = {"restart": r, "diverged": r in diverged}
        if r not in diverged:
            s = score_reconstruction(rec.restart_images[r].float(), x_true, match=match)
            entry.update({"loss": float(rec.loss[r]), "psnr": s["psnr"], "ssim": s["ssim"],
                          "image_mse": s["image_mse"],
                          "label_accuracy": label_accuracy(rec.restart_labels[r], y_true)})
        per_restart.append(entry)
    best = rec.best_restart
    metrics: dict[str, Any] = {"attack": rec.attack, "preset": rec.preset, "label_rule": rec.label_rule,
                               "batch_size": len(x_true), "restarts": rec.restarts, "best_restart": best,
                               "diverged_trials": diverged, "iterations": rec.iterations,
                               "seconds": rec.seconds,
                               "seconds_per_iteration": rec.seconds / max(rec.iterations, 1),
                               "trials_mode": rec.mode}
    if best is None:
        metrics.update({k: None for k in IMAGE_KEYS})
        metrics.update({"label_accuracy": None, "labels_predicted": None, "labels_true": y_true.tolist(),
                        "matched": match, "perm": None, "per_image": None,
                        "unavailable": {k: "every restart diverged" for k in IMAGE_KEYS + ("label_accuracy",)}})
    else:
        s = score_reconstruction(rec.restart_images[best].float(), x_true, match=match, lpips=lpips, fid=fid)
        metrics.update({k: s[k] for k in IMAGE_KEYS})
        metrics.update({"label_accuracy": label_accuracy(rec.restart_labels[best], y_true),
                        "labels_predicted": rec.restart_labels[best].tolist(), "labels_true": y_true.tolist(),
                        "matched": match, "perm": s["perm"], "per_image": s["per_image"],
                        "unavailable": s["unavailable"]})
    metrics["per_restart"] = per_restart
    return metrics

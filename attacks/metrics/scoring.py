"""The one scoring path: an attack's `Reconstruction` against the private targets, as metrics.json.

Images are compared on the [0,1] reporting scale after undoing any normalisation; reconstructions are
clamped to [0,1] first (`attacks.metrics.pixel`). Reconstructions come back in arbitrary order in
gradient inversion, so a restart attack's batch is matched one-to-one (Hungarian assignment on per-pair
MSE) before scoring. LPIPS and FID are optional: a metric that was not requested or is `Unavailable`
is null with its reason under `unavailable`.
"""
from __future__ import annotations

from typing import Callable

import torch

from attacks.metrics.labels import LABEL_UNAVAILABLE, label_scores
from attacks.metrics.perceptual import FidMetric, LpipsMetric
from attacks.metrics.pixel import (best_match_psnr, check_pair, image_mse, match_pairs, minmax_normalise, psnr, ssim,
                                   ssim_global)
from attacks.metrics.schema import BASELINE_KEYS, IMAGE_KEYS
from attacks.metrics.weights import Unavailable
from attacks.result import Reconstruction
from vfl.errors import SplitlabError


def score_reconstruction(
    x_rec: torch.Tensor,
    x_true: torch.Tensor,
    *,
    match: bool = False,
    lpips: LpipsMetric | Unavailable | None = None,
    fid: FidMetric | Unavailable | None = None,
) -> dict:
    """Score reconstructions against targets with the lab's shared keys, as plain floats for JSON.

    Reconstructions are clamped to [0,1] first (targets must already be in [0,1]). With `match`,
    they are paired one-to-one to the targets (Hungarian, per-pair MSE) before scoring. `psnr` is the
    mean of per-image PSNRs (capped at 100 dB), `psnr_std` the population std. `image_mse_minmax`
    min-max-normalises each reconstruction (not the target), as the JAST paper does. Every metric
    left `None` has its reason under `unavailable`.
    """
    _check_images("the reconstruction", x_rec)
    _check_targets(x_true)
    _check_optional_metrics(lpips, fid)
    raw = x_rec.detach()
    perm = match_pairs(raw.clamp(0, 1), x_true) if match else None
    if perm is not None:
        raw = raw[perm]
    check_pair(raw, x_true, images=True)
    rec = raw.clamp(0, 1)
    per_image = {
        "image_mse": image_mse(rec, x_true),
        "image_mse_minmax": image_mse(minmax_normalise(raw), x_true),
        "psnr": psnr(rec, x_true),
        "ssim": ssim(rec, x_true),
        "psnr_best_match": best_match_psnr(rec, x_true),
        "ssim_global": ssim_global(rec, x_true),
    }
    unavailable: dict[str, str] = {}
    lpips_values = _optional_metric("lpips", lpips, unavailable, lambda m: m(rec, x_true))
    if len(x_true) < 2 and isinstance(fid, FidMetric):
        fid = Unavailable("FID needs at least 2 images per set to estimate a covariance")
    fid_value = _optional_metric("fid", fid, unavailable, lambda m: m(x_true, rec))
    return {
        "n_images": len(x_true),
        "image_mse": float(per_image["image_mse"].mean()),
        "image_mse_minmax": float(per_image["image_mse_minmax"].mean()),
        "psnr": float(per_image["psnr"].mean()),
        "psnr_max": float(per_image["psnr"].max()),
        "psnr_std": float(per_image["psnr"].std(correction=0)),
        "ssim": float(per_image["ssim"].mean()),
        "psnr_best_match": float(per_image["psnr_best_match"].mean()),
        "ssim_global": float(per_image["ssim_global"].mean()),
        "lpips": None if lpips_values is None else float(lpips_values.mean()),
        "fid": fid_value,
        "matched": match,
        "perm": None if perm is None else perm.tolist(),
        "per_image": {
            **{name: values.tolist() for name, values in per_image.items()},
            "lpips": None if lpips_values is None else lpips_values.tolist(),
        },
        "unavailable": unavailable,
    }


def _optional_metric(
    name: str,
    metric: LpipsMetric | FidMetric | Unavailable | None,
    unavailable: dict[str, str],
    compute: Callable,
):
    """Run an optional metric, or record why it has no value (not requested, or unavailable)."""
    if metric is None:
        unavailable[name] = "not requested"
        return None
    if isinstance(metric, Unavailable):
        unavailable[name] = metric.reason
        return None
    return compute(metric)


def _image_scores(x: torch.Tensor, x_true: torch.Tensor) -> dict[str, float]:
    rec = x.clamp(0, 1)
    return {"image_mse": float(image_mse(rec, x_true).mean()), "psnr": float(psnr(rec, x_true).mean()),
            "ssim": float(ssim(rec, x_true).mean())}


def baselines(x_true: torch.Tensor, initial: torch.Tensor | None = None) -> dict[str, dict[str, float] | None]:
    """Scores of trivial answers on the same targets: the floor every attack's score is read against."""
    flat_mean = x_true.flatten(1).mean(1).view(-1, *[1] * (x_true.dim() - 1))
    return {"zero": _image_scores(torch.zeros_like(x_true), x_true),
            "mean": _image_scores(flat_mean.expand_as(x_true), x_true),
            "initial": None if initial is None else _image_scores(initial.float(), x_true)}


def majority_baseline(y: torch.Tensor) -> dict[str, float]:
    """The multiset label accuracy of naming the batch's majority class for every sample (1/B on a batch of
    distinct labels): the floor an attack that infers a batch's labels is read against."""
    counts = torch.bincount(y.long())
    return {"label_accuracy": float(counts.max()) / len(y)}


def score(reconstruction: Reconstruction, x_true: torch.Tensor, y_true: torch.Tensor | None = None, *,
          lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None) -> dict:
    """metrics.json for any attack's `attacks.result.Reconstruction` against the private targets.

    The answer (the best restart, or each target's own trial) is scored on [0,1] with
    `score_reconstruction`; a restart attack's answer is matched one-to-one to a batch of more than one
    image first. Diverged targets are left out and listed; when nothing is left, the image metrics are
    null with the reason. Every restart is scored too (`per_trial`). Label accuracy where the attack
    infers labels. Baselines on the same targets beside the scores.

    `x_true` are the (N, C, H, W) images the attack reconstructed, in [0, 1]; `y_true` their (N,) integer
    labels or None. Anything else is a `SplitlabError` naming what was expected. Where the attack infers the
    labels, `baselines.majority` holds the majority class's label accuracy beside the image baselines. A label-inference attack's
    answer (no images) is scored against `y_true` alone (`x_true` None), the same keys with the image scores
    null.
    """
    if isinstance(reconstruction, Reconstruction) and reconstruction.infers_labels:
        return _score_labels(reconstruction, y_true)
    if isinstance(reconstruction, Reconstruction) and reconstruction.infers_features:
        return _score_features(reconstruction, x_true)
    _check_score_inputs(reconstruction, x_true, y_true, lpips, fid)
    rec = reconstruction
    x_true = x_true.detach().float().cpu()
    answer = rec.images.detach().float().cpu()
    kept = rec.kept
    match = not rec.per_target and len(x_true) > 1
    diverged = [int(i) for i in torch.nonzero(rec.diverged.cpu()).flatten()]
    metrics: dict = {"attack": rec.attack, "preset": rec.preset, "n_targets": len(x_true), "n_trials": rec.n_trials,
                     "per_target": rec.per_target, "best_trial": rec.best_trial, "diverged_trials": diverged,
                     "steps": rec.steps, "seconds": rec.seconds, "seconds_per_step": rec.seconds / max(rec.steps, 1),
                     "trials_mode": rec.mode, "label_rule": rec.label_rule}
    initial = rec.initial_images
    metrics["baselines"] = baselines(x_true[kept], None if initial is None else initial.detach().cpu()[kept]) \
        if bool(kept.any()) else None
    per_trial = []
    for t in range(rec.n_trials):
        entry = {"trial": t, "loss": float(rec.loss[t]), "diverged": t in diverged}
        if not rec.per_target and t not in diverged:
            s = score_reconstruction(rec.trials[t].detach().float().cpu(), x_true, match=match)
            entry.update({k: s[k] for k in BASELINE_KEYS})
            if rec.labels is not None and y_true is not None:
                entry["label_accuracy"] = label_accuracy(rec.labels[t], y_true)
        per_trial.append(entry)
    metrics["per_trial"] = per_trial
    if not bool(kept.any()):
        reason = "every trial diverged"
        metrics.update({k: None for k in IMAGE_KEYS})
        metrics.update({"label_accuracy": None, "matched": match, "perm": None, "per_image": None,
                        "unavailable": {k: reason for k in IMAGE_KEYS + ("label_accuracy",)}})
    else:
        s = score_reconstruction(answer[kept], x_true[kept], match=match, lpips=lpips, fid=fid)
        metrics.update({k: s[k] for k in IMAGE_KEYS})
        labels = rec.answer_labels
        accuracy = None
        if labels is not None and y_true is not None:
            accuracy = label_accuracy(labels.cpu()[kept], y_true.cpu()[kept])
        else:
            s["unavailable"]["label_accuracy"] = "the attack infers no labels"
        metrics.update({"label_accuracy": accuracy, "matched": match, "perm": s["perm"], "per_image": s["per_image"],
                        "unavailable": s["unavailable"]})
        if labels is not None:
            metrics["labels_predicted"] = labels.cpu()[kept].tolist()
        if accuracy is not None and rec.label_rule not in (None, "known") and metrics["baselines"] is not None:
            metrics["baselines"]["majority"] = majority_baseline(y_true.cpu()[kept])
        if y_true is not None:
            metrics["labels_true"] = y_true.cpu()[kept].tolist()
    metrics["extras"] = dict(rec.extras)
    metrics.update(leak_auc=None, accuracy=None)
    metrics["unavailable"].update(leak_auc="the attack infers no labels from gradients",
                                  accuracy="the attack's experiment trains no task model")
    return metrics


def feature_mse(x: torch.Tensor, x_true: torch.Tensor) -> torch.Tensor:
    """(D,) the mean squared error of each feature over the samples, on the features' own scale."""
    return ((x.double() - x_true.double()) ** 2).mean(0)


def categorical_accuracy(x: torch.Tensor, x_true: torch.Tensor,
                         groups: tuple[tuple[int, int], ...]) -> tuple[float | None, list[float | None]]:
    """(over every group and sample, per group) how often a one-hot group's argmax in `x` is the category present
    in `x_true`; samples whose category lies outside the group's columns (a group a partition split between
    parties, the category held by another) are not counted. None where nothing is counted."""
    hits, counted, per_group = 0, 0, []
    for start, stop in groups:
        truth = x_true[:, start:stop]
        present = truth.sum(1) > 0.5
        right = (x[:, start:stop].argmax(1) == truth.argmax(1)) & present
        hits, counted = hits + int(right.sum()), counted + int(present.sum())
        per_group.append(float(right.sum()) / int(present.sum()) if bool(present.any()) else None)
    return (hits / counted if counted else None), per_group


def _score_features(rec: Reconstruction, x_true) -> dict:
    """metrics.json of a feature-inference attack: its answer (N, D) against the private features (N, D) on their
    own scale (pixels on [0, 1], tabular columns standardised), per feature and overall, beside the attack's
    initial guess; the image scores are null (feature vectors are no images)."""
    if not isinstance(x_true, torch.Tensor) or x_true.dim() != 2:
        raise SplitlabError(f"a feature-inference answer is scored against features shaped (N, D), got "
                            f"{_describe(x_true)}")
    answer = rec.images.detach().double().cpu()
    x_true = x_true.detach().double().cpu()
    check_pair(answer, x_true, images=False)
    diverged = [int(i) for i in torch.nonzero(rec.diverged.cpu()).flatten()]
    per_feature = feature_mse(answer, x_true)
    initial = rec.initial_images
    reason = "the targets are feature vectors, not images (see feature_mse)"
    return {"attack": rec.attack, "preset": rec.preset, "n_targets": len(x_true), "n_trials": rec.n_trials,
            "per_target": rec.per_target, "best_trial": rec.best_trial, "diverged_trials": diverged,
            "steps": rec.steps, "seconds": rec.seconds, "seconds_per_step": rec.seconds / max(rec.steps, 1),
            "trials_mode": rec.mode, "label_rule": None, **{k: None for k in IMAGE_KEYS},
            "feature_mse": float(per_feature.mean()), "feature_mse_per_feature": per_feature.tolist(),
            "baselines": {"initial": None if initial is None else
                          {"feature_mse": float(feature_mse(initial.double().cpu(), x_true).mean())}},
            "per_trial": [{"trial": t, "loss": float(rec.loss[t]), "diverged": t in diverged}
                          for t in range(rec.n_trials)],
            "per_image": None, "matched": False, "perm": None, "label_accuracy": None, "leak_auc": None,
            "accuracy": None, "extras": dict(rec.extras),
            "unavailable": {**{k: reason for k in IMAGE_KEYS}, "label_accuracy": "the attack infers no labels",
                            "leak_auc": "the attack infers no labels",
                            "accuracy": "the attack's experiment trains no task model"}}


def _score_labels(rec: Reconstruction, y_true) -> dict:
    """metrics.json of a label-inference attack: per-sample label accuracy and leak AUC per trial and for the
    answer (the lowest-loss trial that did not diverge), against the majority-class baseline."""
    _check_label_inputs(rec, y_true)
    y = y_true.detach().cpu().long()
    diverged = [int(i) for i in torch.nonzero(rec.diverged.cpu()).flatten()]
    best = rec.best_trial
    rounds = rec.label_rounds
    unavailable = {k: LABEL_UNAVAILABLE for k in IMAGE_KEYS}
    unavailable["accuracy"] = "the attack's experiment trains no task model"
    counts = torch.bincount(y, minlength=rec.label_scores.shape[-1])
    metrics: dict = {"attack": rec.attack, "preset": rec.preset, "n_targets": len(y), "n_trials": rec.n_trials,
                     "per_target": False, "best_trial": best, "diverged_trials": diverged, "steps": rec.steps,
                     "seconds": rec.seconds, "seconds_per_step": rec.seconds / max(rec.steps, 1),
                     "trials_mode": rec.mode, "label_rule": rec.label_rule, "matched": False, "perm": None,
                     "per_image": None, **{k: None for k in IMAGE_KEYS}, "accuracy": None,
                     "baselines": {"majority": {"label_accuracy": float(counts.max()) / len(y), "leak_auc": 0.5,
                                                "class": int(counts.argmax())}}}
    per_trial, answer = [], None
    for t in range(rec.n_trials):
        entry = {"trial": t, "loss": float(rec.loss[t]), "diverged": t in diverged}
        if t not in diverged:
            found = label_scores(rec.label_scores[t], rec.labels[t], y, rounds)
            entry.update(label_accuracy=found["label_accuracy"], leak_auc=found["leak_auc"])
            answer = found if t == best else answer
        per_trial.append(entry)
    metrics["per_trial"] = per_trial
    extras = dict(rec.extras)
    if answer is None:
        metrics.update(label_accuracy=None, leak_auc=None)
        unavailable.update(label_accuracy="every trial diverged", leak_auc="every trial diverged")
    else:
        metrics.update(label_accuracy=answer["label_accuracy"], leak_auc=answer["leak_auc"])
        if answer["leak_auc"] is None:
            unavailable["leak_auc"] = "no round (or pool) of scored samples holds both classes"
        extras.update({k: answer[k] for k in ("leak_auc_pooled", "leak_auc_rounds", "confusion")})
    metrics["unavailable"] = unavailable
    metrics["extras"] = extras
    return metrics


def label_accuracy(predicted: torch.Tensor, true: torch.Tensor) -> float:
    """Multiset accuracy: |predicted ∩ true| / B, counting repeated labels (order does not matter)."""
    predicted, true = predicted.detach().cpu().long().flatten(), true.detach().cpu().long().flatten()
    if len(true) == 0:
        return float("nan")
    classes = int(max(predicted.max(), true.max())) + 1
    overlap = torch.minimum(torch.bincount(predicted, minlength=classes), torch.bincount(true, minlength=classes))
    return float(overlap.sum()) / len(true)


# --------------------------------------------------------------------------- input checks (one-line errors)


def _describe(value) -> str:
    """What a value is, for an error message: its type, and dtype and shape for a tensor."""
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor shaped {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _check_images(what: str, x, scale: str = "") -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or len(x) == 0:
        raise SplitlabError(f"{what} must be a tensor shaped (N, C, H, W) with N >= 1{scale}, got {_describe(x)}")


def _check_targets(x_true) -> None:
    """Targets are images already on the [0,1] scale; NaN fails the range test too."""
    _check_images("the target images", x_true, ", in [0, 1]")
    low, high = float(x_true.min()), float(x_true.max())
    if not (low >= -1e-6 and high <= 1 + 1e-6):
        raise SplitlabError(f"targets must be in [0,1] (undo normalisation first), got [{low:.3g}, {high:.3g}]")


def _check_optional_metrics(lpips, fid) -> None:
    for name, metric, kind in (("lpips", lpips, LpipsMetric), ("fid", fid, FidMetric)):
        if metric is not None and not isinstance(metric, (kind, Unavailable)):
            raise SplitlabError(f"{name} must be what load_{name}() returns (a {kind.__name__} or Unavailable) "
                                f"or None, got {_describe(metric)}")


def _check_label_inputs(rec: Reconstruction, y_true) -> None:
    """A label-inference answer: (T, N, K) scores, (T, N) labels, and (N,) integer true labels."""
    scores, labels = rec.label_scores, rec.labels
    if not isinstance(scores, torch.Tensor) or scores.dim() != 3 or scores.shape[-1] < 2:
        raise SplitlabError(f"a label-inference Reconstruction needs label_scores shaped (T, N, K) with K >= 2, got "
                            f"{_describe(scores)}")
    if not isinstance(labels, torch.Tensor) or labels.shape != scores.shape[:2]:
        raise SplitlabError(f"the Reconstruction's labels must be shaped (T, N) = {tuple(scores.shape[:2])}, got "
                            f"{_describe(labels)}")
    for field in ("loss", "diverged"):
        value = getattr(rec, field)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != (scores.shape[0],):
            raise SplitlabError(f"the Reconstruction's {field} must be shaped (T,) = ({scores.shape[0]},), got "
                                f"{_describe(value)}")
    n = scores.shape[1]
    if not isinstance(y_true, torch.Tensor) or y_true.shape != (n,) or y_true.is_floating_point() or y_true.is_complex():
        raise SplitlabError(f"a label-inference attack is scored against an integer tensor of labels shaped (N,) = "
                            f"({n},), got {_describe(y_true)}")
    if rec.label_rounds is not None and (not isinstance(rec.label_rounds, torch.Tensor)
                                         or rec.label_rounds.shape != (n,)):
        raise SplitlabError(f"the Reconstruction's label_rounds must be shaped (N,) = ({n},) or None, got "
                            f"{_describe(rec.label_rounds)}")


def _check_score_inputs(rec, x_true, y_true, lpips, fid) -> None:
    """Everything `score` indexes, checked before any work, so a wrong argument is named, not a bare error."""
    if not isinstance(rec, Reconstruction):
        raise SplitlabError(f"score needs an attacks.result.Reconstruction (what an attack returns) as its first "
                            f"argument, got {_describe(rec)}")
    trials = rec.trials
    if not isinstance(trials, torch.Tensor) or trials.dim() != 5:
        raise SplitlabError(f"the Reconstruction's trials must be a tensor shaped (T, B, C, H, W), "
                            f"got {_describe(trials)}")
    n_trials = trials.shape[0]
    for field in ("loss", "diverged"):
        value = getattr(rec, field)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != (n_trials,):
            raise SplitlabError(f"the Reconstruction's {field} must be a tensor shaped (T,) = ({n_trials},), one per "
                                f"trial, got {_describe(value)}")
    labels = rec.labels
    if labels is not None and (not isinstance(labels, torch.Tensor) or labels.shape[:2] != trials.shape[:2]):
        raise SplitlabError(f"the Reconstruction's labels must be a tensor shaped (T, B) = {tuple(trials.shape[:2])} "
                            f"or None, got {_describe(labels)}")
    _check_targets(x_true)
    if rec.images.shape != x_true.shape:
        raise SplitlabError(f"the Reconstruction's images are shaped {tuple(rec.images.shape)} but the target images "
                            f"{tuple(x_true.shape)}; pass the (N, C, H, W) images the attack reconstructed, in [0, 1]")
    if y_true is not None and (not isinstance(y_true, torch.Tensor) or y_true.shape != (len(x_true),)
                               or y_true.is_floating_point() or y_true.is_complex()):
        raise SplitlabError(f"the labels must be an integer tensor shaped (N,) = ({len(x_true)},), one per target "
                            f"image, or None; got {_describe(y_true)}")
    _check_optional_metrics(lpips, fid)

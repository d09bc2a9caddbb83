"""The one driver: attack an observation, score against the private targets, write the run directory.

    outcome = attack_and_score(spec, attack, observation, Truth(images, labels), run=run, seed=0)

Every command (`hfl`, `attack unsplit`, `attack fsha`, `compare`) and script goes through here, so every
run directory has the same files: `metrics.json` (the schema in `attacks.metrics.METRICS_SCHEMA`),
`reconstruction.png` (targets above the attack's answer) and `loss_curve.png` (the attack's loss
history), and whatever the attack's spec adds through its `evaluate` and `write` hooks. A label-inference
attack draws `labels.png` (its scores against the private labels) in place of `reconstruction.png`.
Ground truth enters only the scoring and the evaluation, after the attack has returned.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from attacks.figures import image_grid, label_figure, loss_curve_figure
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, minmax_normalise, score
from attacks.result import Reconstruction
from vfl.runs import Run

__all__ = ["Truth", "Outcome", "attack_and_score", "write_outputs", "shown"]


@dataclass(frozen=True, eq=False)
class Truth:
    """The private side of a run, for scoring and evaluation only: never handed to an attack."""
    images: torch.Tensor | None
    """The targets, [0,1], (N, C, H, W); None for a label-inference attack (its targets are `labels`)."""
    labels: torch.Tensor | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    """What the spec's evaluation needs beside the targets (the victim's client, its private data, ...)."""


@dataclass(frozen=True, eq=False)
class Outcome:
    reconstruction: Reconstruction
    metrics: dict[str, Any]
    targets: torch.Tensor
    """The private targets ([0,1], CPU), for figures that put several runs side by side (label inference: the
    private labels, (N,))."""

    @property
    def shown(self) -> torch.Tensor:
        return shown(self.reconstruction, self.metrics)


def shown(reconstruction: Reconstruction, metrics: dict[str, Any], display: str = "clamp") -> torch.Tensor:
    """The answer as drawn: in the targets' order (after one-to-one matching), clamped or min-max scaled."""
    images = reconstruction.images.detach().float().cpu()
    if metrics.get("perm") is not None:
        images = images[torch.as_tensor(metrics["perm"])]
    return minmax_normalise(images) if display == "minmax" else images.clamp(0, 1)


def attack_and_score(spec, attack, observation, truth: Truth, *, run: Run | None = None, seed: int = 0,
                     mode: str = "auto", progress: bool = True, lpips: LpipsMetric | Unavailable | None = None,
                     fid: FidMetric | Unavailable | None = None, facts: dict[str, Any] | None = None,
                     title: str = "", call: dict[str, Any] | None = None) -> Outcome:
    """Run `attack(observation)`, score it against the truth, add the spec's evaluation, and write the run
    directory if given (the driver's files, then the spec's own).

    `facts` adds command-level facts to metrics.json (the model, the defence); `call` passes keywords an
    attack takes beyond the contract's (FSHA's round monitor)."""
    reconstruction = attack(observation, seed=seed, mode=mode, progress=progress, **(call or {}))
    metrics = score(reconstruction, truth.images, truth.labels, lpips=lpips, fid=fid)
    metrics.update(facts or {})
    for key, value in (facts or {}).items():        # a fact the command measured has a value, not a reason
        if value is not None:
            metrics["unavailable"].pop(key, None)
    if spec.evaluate is not None:
        metrics.update(spec.evaluate(reconstruction, metrics, truth))
    targets = truth.labels.detach().cpu() if reconstruction.infers_labels else truth.images.detach().float().cpu()
    outcome = Outcome(reconstruction, metrics, targets)
    if run is not None:
        write_outputs(run, outcome, title=title, display=spec.display)
        if spec.write is not None:
            spec.write(run, outcome)
    return outcome


def write_outputs(run: Run, outcome: Outcome, *, title: str = "", display: str = "clamp") -> None:
    rec, m = outcome.reconstruction, outcome.metrics
    run.write_metrics(m)
    if rec.infers_labels:
        _write_label_outputs(run, outcome, title)
        return
    headline = (f"PSNR {m['psnr']:.1f} dB, SSIM {m['ssim']:.3f}, MSE {m['image_mse']:.4f}"
                if m["psnr"] is not None else "every trial diverged")
    answer = shown(rec, m, display)
    if rec.per_target:                              # a diverged target's row is drawn blank
        answer = torch.where(rec.kept.view(-1, 1, 1, 1), answer, torch.zeros_like(answer))
    run.save_figure("reconstruction.png", image_grid(
        [("target", outcome.targets), (rec.attack, answer)],
        title=f"{title or rec.attack} ({rec.preset}): {headline}"))
    run.save_figure("loss_curve.png", loss_curve_figure(rec.history, f"{rec.attack} ({rec.preset}) loss per step"))
    run.log(f"{rec.attack} ({rec.preset}): {headline}; {rec.steps} steps in {rec.seconds:.1f} s"
            + (f"; diverged trials {m['diverged_trials']}" if m["diverged_trials"] else ""))


def _write_label_outputs(run: Run, outcome: Outcome, title: str) -> None:
    """A label-inference attack's figures: its scores against the private labels, and its loss where it has one."""
    rec, m = outcome.reconstruction, outcome.metrics
    auc = "-" if m["leak_auc"] is None else f"{m['leak_auc']:.3f}"
    accuracy = "-" if m["label_accuracy"] is None else f"{m['label_accuracy']:.3f}"
    headline = f"leak AUC {auc}, label accuracy {accuracy} over {m['n_targets']} samples"
    trial = rec.best_trial if rec.best_trial is not None else 0
    run.save_figure("labels.png", label_figure(rec.label_scores[trial], rec.labels[trial], outcome.targets,
                                               f"{title or rec.attack} ({rec.preset}): {headline}"))
    if any(v.numel() for v in rec.history.values()):
        run.save_figure("loss_curve.png", loss_curve_figure(rec.history, f"{rec.attack} ({rec.preset}) loss per step"))
    run.log(f"{rec.attack} ({rec.preset}): {headline}; {rec.steps} steps in {rec.seconds:.1f} s")

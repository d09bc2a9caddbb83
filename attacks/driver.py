"""The one driver: attack an observation, score against the private targets, write the run directory.

    outcome = attack_and_score(attack, observation, images, labels, run=run, seed=0)

Every command (`hfl`, `attack unsplit`, `attack fsha`, `compare`) and script goes through here, so every
run directory has the same files: `metrics.json` (the schema in `attacks.metrics.METRICS_SCHEMA`),
`reconstruction.png` (targets above the attack's answer) and `loss_curve.png` (the attack's loss
history). Ground truth enters only the scoring, after the attack has returned.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from attacks.figures import image_grid, loss_curve_figure
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, minmax_normalise, score
from attacks.result import Reconstruction
from vfl.runs import Run

__all__ = ["Outcome", "attack_and_score", "write_outputs", "shown"]


@dataclass(frozen=True, eq=False)
class Outcome:
    reconstruction: Reconstruction
    metrics: dict[str, Any]
    targets: torch.Tensor
    """The private targets ([0,1], CPU), for figures that put several runs side by side."""

    @property
    def shown(self) -> torch.Tensor:
        return shown(self.reconstruction, self.metrics)


def shown(reconstruction: Reconstruction, metrics: dict[str, Any], display: str = "clamp") -> torch.Tensor:
    """The answer as drawn: in the targets' order (after one-to-one matching), clamped or min-max scaled."""
    images = reconstruction.images.detach().float().cpu()
    if metrics.get("perm") is not None:
        images = images[torch.as_tensor(metrics["perm"])]
    return minmax_normalise(images) if display == "minmax" else images.clamp(0, 1)


def attack_and_score(attack, observation, images: torch.Tensor, labels: torch.Tensor | None = None, *,
                     run: Run | None = None, seed: int = 0, mode: str = "auto", progress: bool = True,
                     lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
                     extra: dict[str, Any] | None = None, title: str = "", display: str = "clamp",
                     evaluate: Callable[[Reconstruction, dict], dict] | None = None) -> Outcome:
    """Run `attack(observation)`, score it against (images, labels), and write the run directory if given.

    `extra` adds command-level facts to metrics.json (the victim's accuracy, the model); `display`
    chooses how reconstruction.png draws the answer (`minmax`: per-image min-max, as the JAST paper shows
    UnSplit's); `evaluate(reconstruction, metrics)` adds evaluation-only diagnostics after scoring."""
    reconstruction = attack(observation, seed=seed, mode=mode, progress=progress)
    metrics = score(reconstruction, images, labels, lpips=lpips, fid=fid)
    metrics.update(extra or {})
    if evaluate is not None:
        metrics.update(evaluate(reconstruction, metrics))
    outcome = Outcome(reconstruction, metrics, images.detach().float().cpu())
    if run is not None:
        write_outputs(run, outcome, title=title, display=display)
    return outcome


def write_outputs(run: Run, outcome: Outcome, *, title: str = "", display: str = "clamp") -> None:
    rec, m = outcome.reconstruction, outcome.metrics
    run.write_metrics(m)
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

"""The images along an attack's run, every k iterations, scored after it returns: how quality grows with
the iteration budget from one run instead of one run per budget (AWA's Figure 4 reads SSIM this way).

The attack adds `Snapshots` to its block's hooks and hands `snapshots.record()` back as the artefact
`trajectory`; the spec's evaluation scores it (`evaluation`) and its write hook draws `trajectory.png`
(`save_figure`). Snapshots stay on the device until scored: no host read inside the loop.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from attacks.engine.optim import Hook
from attacks.metrics.scoring import score_reconstruction
from vfl.options import integer, option

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["trajectory_option", "Snapshots", "evaluation", "save_figure"]


def trajectory_option():
    """The one declaration of the setting that turns recording on (an attack's settings field)."""
    return option(0, "score the images every N iterations of the run (0: off): a curve in metrics.json "
                     "(trajectory) and trajectory.png. The curve follows the current iterate; the answer may be "
                     "an earlier, lower-loss one.", integer(low=0, high=1_000_000))


class Snapshots(Hook):
    """Copies the block's first variable (the images) after every `every`-th step and after the last.

    Batched trials arrive together as (R, ...); sequential ones one after another as (1, ...), each for
    `steps` steps, so the step within a trial is the call count modulo `steps`."""

    def __init__(self, every: int, steps: int):
        self.every, self.steps, self.calls = every, steps, 0
        self.images: list[torch.Tensor] = []

    def after_step(self, params: Sequence[torch.Tensor]) -> None:
        step = self.calls % self.steps + 1
        self.calls += 1
        if step % self.every == 0 or step == self.steps:
            self.images.append(params[0].detach().clone())

    @property
    def iterations(self) -> list[int]:
        marks = list(range(self.every, self.steps + 1, self.every))
        return marks if marks and marks[-1] == self.steps else marks + [self.steps]

    def record(self, trials: int, first: int = 0) -> dict[str, Any]:
        """{"iterations": [k, 2k, ..., steps], "images": (R, len(iterations), N, C, H, W), "trials": the
        reconstruction's trial indices these R runs are (`first` onwards)}."""
        n = len(self.iterations)
        stacked = torch.stack(self.images)                  # (calls, r, N, C, H, W) with r = R or 1
        if stacked.shape[1] != trials:                      # sequential: trial after trial
            stacked = stacked.view(trials, n, *stacked.shape[2:])
        else:
            stacked = stacked.transpose(0, 1)
        return {"iterations": self.iterations, "images": stacked, "trials": list(range(first, first + trials))}


def evaluation(reconstruction, metrics: dict, truth) -> dict[str, Any]:
    """PSNR and SSIM at every recorded iteration (matched one-to-one to the targets as the answer is) of
    the answer's trial, or of the last recorded one when the answer's was not recorded (AWA's BO records
    its re-run only; `trial` says which); nothing when no trajectory was recorded or every trial diverged."""
    record = reconstruction.artefacts.get("trajectory")
    best = reconstruction.best_trial
    if record is None or best is None:
        return {}
    trial = best if best in record["trials"] else record["trials"][-1]
    x_true = truth.images.detach().float().cpu()
    curve: dict[str, Any] = {"trial": trial, "iterations": record["iterations"], "psnr": [], "ssim": [],
                             "ssim_global": []}
    for images in record["images"][record["trials"].index(trial)].detach().float().cpu():
        s = score_reconstruction(images, x_true, match=len(x_true) > 1)
        for key in ("psnr", "ssim", "ssim_global"):
            curve[key].append(s[key])
    return {"trajectory": curve}


def save_figure(run, outcome) -> None:
    """trajectory.png: PSNR and SSIM (windowed, and from whole-image statistics) of the answer against the
    iteration, when a trajectory was scored."""
    curve = outcome.metrics.get("trajectory")
    if not curve:
        return
    from matplotlib.figure import Figure      # matplotlib loads when a figure is drawn
    figure = Figure(figsize=(7, 3))
    left, right = figure.subplots(1, 2)
    for ax, key, label in ((left, "psnr", "PSNR (dB)"), (right, "ssim", "SSIM")):
        ax.plot(curve["iterations"], curve[key], marker=".")
        ax.set(xlabel="iteration", ylabel=label)
        ax.grid(alpha=0.3)
    if "ssim_global" in curve:
        right.plot(curve["iterations"], curve["ssim_global"], marker=".", label="whole-image (AWA's formula)")
        right.lines[0].set_label("7x7 window")
        right.legend(fontsize=7)
    rec = outcome.reconstruction
    figure.suptitle(f"{rec.attack} ({rec.preset}) along the run", fontsize=9)
    figure.tight_layout()
    run.save_figure("trajectory.png", figure)

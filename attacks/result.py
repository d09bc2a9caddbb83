"""The one result type every attack returns.

An attack runs T trials. Either the trials are restarts of one reconstruction of the whole batch (DLG,
iDLG, Inverting Gradients: the answer is the lowest-loss restart that did not diverge), or trial t
reconstructs target t on its own (UnSplit: one clone and one dummy input per target; FSHA: one decoded
image per target), so the answer is every target's own trial. `per_target` says which.

Images are on the lab's [0,1] reporting scale (an attack that works on another scale converts before
returning) and unclamped; scoring clamps. Ground truth never enters a Reconstruction.

A label-inference attack (a feature party inferring the label party's labels) reconstructs no images:
its `trials` is None, and its answer is `labels` with the scores they come from (`label_scores`), one
trial per attack run (T = 1) over the N samples it scored.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Reconstruction"]


@dataclass(frozen=True, eq=False)
class Reconstruction:
    attack: str
    preset: str
    trials: torch.Tensor | None
    """(T, B, C, H, W): each trial's reconstruction (its best iterate where the attack keeps one); None for a
    label-inference attack, which reconstructs no images; (T, N, D) for a feature-inference attack, which infers
    feature vectors (a passive party's columns)."""
    loss: torch.Tensor
    """(T,): each trial's final loss (the loss its reconstruction was selected by); +inf if it diverged at once."""
    history: dict[str, torch.Tensor]
    """Loss terms per step: name -> (steps, T). Drawn in `loss_curve.png`."""
    diverged: torch.Tensor
    """(T,) bool: a non-finite loss stopped the trial; its images are never scored."""
    seconds: float
    steps: int
    per_target: bool = False
    """True: trial t reconstructs target t (B = 1). False: trials are restarts of one batch."""
    initial: torch.Tensor | None = None
    """(T, B, C, H, W): the starting guess, scored as a baseline (how far the attack moved from it)."""
    labels: torch.Tensor | None = None
    """(T, B): the labels each trial used (recovered or known) or found (DLG's optimised logits)."""
    label_rule: str | None = None
    """How the labels were obtained: joint, idlg, count, known; None when the attack infers no labels."""
    mode: str | None = None
    """How the trials ran: batched or sequential (the engine's report fills it in: `EngineReport.attach`), the
    attack's own loop, or the attack's own words where it arranges its trials itself (UnSplit's clones)."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Attack-specific quantities under names that say what they are (e.g. UnSplit's activation_mse)."""
    artefacts: dict[str, Any] = field(default_factory=dict, repr=False)
    """What the attacker holds afterwards (FSHA's trained networks), for evaluation hooks; never written."""
    label_scores: torch.Tensor | None = None
    """Label inference: (T, N, K) each trial's score of each sample for each class (higher: more likely),
    from which `labels` are the argmax and the leak AUC is taken."""
    label_rounds: torch.Tensor | None = None
    """Label inference from the gradients of protocol rounds: (N,) the round each scored sample's gradient came
    from, so the leak AUC is taken within each round, as Li et al. take it; None: one pool."""
    features: bool = False
    """True: a feature-inference answer, trials (T, N, D) of feature vectors (told, never guessed from a shape, so a
    malformed image answer is still refused as one)."""

    @property
    def infers_labels(self) -> bool:
        """A label-inference attack: no images, labels and their scores instead."""
        return self.trials is None

    @property
    def infers_features(self) -> bool:
        """A feature-inference attack: its trials are feature vectors (T, N, D), not images."""
        return self.trials is not None and self.features

    @property
    def n_trials(self) -> int:
        return int(self.diverged.shape[0])

    @property
    def best_trial(self) -> int | None:
        """Restart attacks: the lowest-loss trial that did not diverge (None when all diverged).
        Per-target attacks have no single best trial."""
        if self.per_target:
            return None
        ok = (~self.diverged) & torch.isfinite(self.loss)
        if not bool(ok.any()):
            return None
        return int(torch.where(ok, self.loss, torch.full_like(self.loss, float("inf"))).argmin())

    @property
    def kept(self) -> torch.Tensor:
        """(N,) bool over targets: which answers are results (a diverged target is not)."""
        if self.per_target:
            return ~self.diverged.cpu()
        targets = self.labels.shape[1] if self.trials is None else self.trials.shape[1]
        return torch.full((targets,), self.best_trial is not None)

    def _answer(self, per_trial: torch.Tensor | None) -> torch.Tensor | None:
        """The answer's rows of a per-trial tensor (T, B, ...): each target's own trial, or the best restart."""
        if per_trial is None:
            return None
        if self.per_target:
            return per_trial[:, 0]
        best = self.best_trial
        return per_trial[0 if best is None else best]

    @property
    def images(self) -> torch.Tensor:
        """(N, C, H, W): the answer, one image per target (rows of diverged trials included; see `kept`)."""
        return self._answer(self.trials)

    @property
    def answer_labels(self) -> torch.Tensor | None:
        """(N,) labels of the answer, where the attack infers labels."""
        return self._answer(self.labels)

    @property
    def initial_images(self) -> torch.Tensor | None:
        """(N, C, H, W): the starting guess of the answer's trial(s)."""
        return self._answer(self.initial)

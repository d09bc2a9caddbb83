"""What an HFL attack returns, and the pieces every attack shares (initial variables, restart choice)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from attacks.engine import EngineResult
from attacks.hfl.observations import Observation

__all__ = ["Reconstruction", "TRIAL_MODES", "initial_variables", "engine_context"]

TRIAL_MODES = ("batched", "sequential")


@dataclass(frozen=True, eq=False)
class Reconstruction:
    """The attack's output. Restarts are engine trials; the best restart is the one with the lowest
    loss (the engine's best iterate per trial), among the trials that did not diverge."""
    attack: str
    preset: str
    restart_images: torch.Tensor
    """(R, B, C, H, W): each restart's best iterate, unclamped."""
    restart_labels: torch.Tensor
    """(R, B): the labels each restart used (recovered, known) or found (DLG: argmax of its logits)."""
    label_rule: str
    """joint (DLG), idlg, count, or known."""
    loss: torch.Tensor
    """(R,): each restart's best loss; +inf for a restart that diverged at once."""
    diverged: torch.Tensor
    """(R,) bool: a non-finite loss stopped the restart (its images are not a result)."""
    iterations: int
    seconds: float
    mode: str
    engine: EngineResult

    @property
    def restarts(self) -> int:
        return int(self.diverged.shape[0])

    @property
    def best_restart(self) -> int | None:
        """Index of the lowest-loss restart that did not diverge; None when every restart diverged."""
        ok = (~self.diverged) & torch.isfinite(self.loss)
        if not bool(ok.any()):
            return None
        return int(torch.where(ok, self.loss, torch.full_like(self.loss, float("inf"))).argmin())

    @property
    def images(self) -> torch.Tensor | None:
        best = self.best_restart
        return None if best is None else self.restart_images[best]

    @property
    def labels(self) -> torch.Tensor | None:
        best = self.best_restart
        return None if best is None else self.restart_labels[best]


def initial_variables(observation: Observation, restarts: int, seed: int, *, label_logits: bool,
                      init: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """x ~ N(0, 1) of shape (R, B, C, H, W) (and label logits ~ N(0, 1), (R, B, K), for DLG).

    Drawn on the CPU from a generator seeded with `seed`, then moved to the model's device and dtype,
    so a seed gives the same start on every device and in both trial modes. `init` overrides any of them.
    """
    model = observation.model
    generator = torch.Generator().manual_seed(seed)
    variables = {"x": torch.randn(restarts, observation.batch_size, *model.input_shape, generator=generator,
                                  dtype=torch.float64)}
    if label_logits:
        variables["label_logits"] = torch.randn(restarts, observation.batch_size, model.num_classes,
                                                generator=generator, dtype=torch.float64)
    for name, value in (init or {}).items():
        if name not in variables or tuple(value.shape) != tuple(variables[name].shape):
            raise ValueError(f"init[{name!r}] must have shape {tuple(variables.get(name, value).shape)}")
        variables[name] = value
    return {k: v.to(device=model.device, dtype=model.dtype) for k, v in variables.items()}


def engine_context(observation: Observation, labels: torch.Tensor | None = None) -> dict[str, Any]:
    model = observation.model
    context: dict[str, Any] = {"params": dict(model.params), "buffers": dict(model.buffers)}
    if labels is not None:
        context["labels"] = labels.to(model.device)
    return context

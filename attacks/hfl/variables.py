"""What every HFL attack starts from: the initial variables of its trials and the engine context."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from attacks.engine import parameter_leaves
from attacks.hfl.observations import Observation

__all__ = ["INITIALISATIONS", "initial_variables", "engine_context"]

INITIALISATIONS = ("normal", "uniform")


def initial_variables(observation: Observation, restarts: int, seed: int, *, label_logits: bool,
                      init: Mapping[str, torch.Tensor] | None = None, images: str = "normal"
                      ) -> dict[str, torch.Tensor]:
    """x ~ N(0, 1) (`images="uniform"`: U(0, 1), FedLeak) of shape (R, B, C, H, W), and label logits
    ~ N(0, 1), (R, B, K), for DLG.

    Drawn on the CPU from a generator seeded with `seed`, then moved to the model's device and dtype,
    so a seed gives the same start on every device and in both trial modes. `init` overrides any of them.
    """
    if images not in INITIALISATIONS:
        raise ValueError(f"unknown image initialisation {images!r}; use {' or '.join(INITIALISATIONS)}")
    model = observation.model
    generator = torch.Generator().manual_seed(seed)
    draw = torch.randn if images == "normal" else torch.rand
    variables = {"x": draw(restarts, observation.batch_size, *model.input_shape, generator=generator,
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
    context: dict[str, Any] = {"params": parameter_leaves(model.params), "buffers": dict(model.buffers)}
    if labels is not None:
        context["labels"] = labels.to(model.device)
    return context

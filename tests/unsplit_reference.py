"""UnSplit written as a plain loop over targets, the way the UnSplit/JAST code runs it.

It is the obviously-correct reference the engine's per-target mode is tested against (test-only code).
Each target gets the clone the engine would give it (`clone_of(observation, seed, r)`), so both produce
the same reconstructions.
"""
from __future__ import annotations

import torch
from torch import nn

from attacks.engine.priors import l2, tv_squared
from attacks.split.unsplit import CutObservation, UnsplitSettings
from attacks.split.unsplit.attack import clone_of
from vfl.models import arch_spec


def unsplit_loop(observation: CutObservation, settings: UnsplitSettings, seed: int = 0) -> torch.Tensor:
    """Per-target clones, one target after the other; returns the final X~ of every target."""
    spec = arch_spec(observation.arch)
    device = observation.activations.device
    results = []
    for r, target in enumerate(observation.activations):
        clone = clone_of(observation, seed, r)
        x = torch.full((1, *spec.input_shape), settings.init, device=device, dtype=target.dtype, requires_grad=True)
        h = target.unsqueeze(0)
        opt_x = torch.optim.Adam([x], lr=settings.lr, amsgrad=True, fused=True)       # as the engine
        opt_clone = torch.optim.Adam(clone.parameters(), lr=settings.lr, amsgrad=True, fused=True)
        for _ in range(settings.iterations):
            for _ in range(settings.input_steps):
                opt_x.zero_grad(set_to_none=True)
                loss = nn.functional.mse_loss(clone(x), h) + settings.lambda_tv * tv_squared(x) \
                    + settings.lambda_l2 * l2(x)
                loss.backward()
                opt_x.step()
            for _ in range(settings.clone_steps):
                opt_clone.zero_grad(set_to_none=True)
                nn.functional.mse_loss(clone(x), h).backward()
                opt_clone.step()
        results.append(x.detach()[0])
    return torch.stack(results)

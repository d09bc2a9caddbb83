"""A schedule: blocks of optimiser steps on some variables, repeated for rounds, with an optional consensus
of the trials between rounds (the engine's `run` carries it out)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from attacks.engine.optim import LBFGS, Hook, OptimizerSpec, StepDecay

__all__ = ["Block", "Consensus", "Schedule"]


@dataclass(frozen=True)
class Block:
    """`steps` optimiser steps on the variables named in `update`, minimising the objective's weighted
    terms (`terms`: the names to include, None for the match and every prior).

    A combination the optimiser cannot honour is refused here, when the block is built: L-BFGS takes
    its own steps from raw gradients, so it runs no gradient-transforming hook and no step decay.
    """
    update: tuple[str, ...]
    optimizer: OptimizerSpec
    steps: int
    hooks: tuple[Hook, ...] = ()
    decay: StepDecay | None = None
    select: bool = True
    """Whether this block's loss decides each trial's best iterate."""
    terms: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"a block needs steps >= 0, got {self.steps}")
        if isinstance(self.optimizer, LBFGS):
            transforming = [type(h).__name__ for h in self.hooks if type(h).on_grads is not Hook.on_grads]
            if transforming:
                raise ValueError(f"L-BFGS cannot apply gradient hooks ({', '.join(transforming)}); use Adam or SGD, "
                                 "or keep only after-step hooks such as BoxClamp")
            if self.decay is not None:
                raise ValueError("L-BFGS takes no step decay; use Adam or SGD for a decayed learning rate")


@dataclass(frozen=True)
class Consensus:
    """Between rounds, overwrite variables of every trial with an agreement over the trials (TGIAs-RO's
    data-space aggregation of its temporal copies): `combine(name -> (R, ...), alive (R,) bool) -> name ->
    (R, ...)`; a trial that diverged is not alive and must not vote.

    The values are written in place, so an optimiser may carry its state across the jump (`reset=False`)
    or start afresh every round (`reset=True`; L-BFGS history carried over such a jump can blow up). With
    a reset, every trial starts the next round alive from the agreed point.
    """
    names: tuple[str, ...]
    combine: Callable[[dict[str, torch.Tensor], torch.Tensor], dict[str, torch.Tensor]]
    reset: bool = True


@dataclass(frozen=True)
class Schedule:
    blocks: tuple[Block, ...]
    rounds: int = 1
    consensus: Consensus | None = None
    """Called after every round (the last one included); None: the trials stay independent."""

    def __post_init__(self) -> None:
        if self.consensus is not None and self.consensus.reset and any(b.decay for b in self.blocks):
            raise ValueError("a consensus that resets optimiser state cannot keep a step decay")

    @property
    def steps(self) -> int:
        return self.rounds * sum(b.steps for b in self.blocks)

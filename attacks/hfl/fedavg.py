"""Replicating a FedAvg client's local training on dummy data: exactly where the server can, by linear
interpolation of the parameter path where it cannot (AWA, Section 3 and eqs. 19-21).

With E local epochs of B mini-batches (B = N / M for mini-batch size M), the client reshuffles every
epoch. The server can replay the whole update exactly when E = 1 (one shuffle: the dummy batch comes
out in the client's order) or B = 1 (full-batch steps: order does not matter). Otherwise it attacks
one epoch e of the interpolated path

    theta~_e = theta_t + (e / E) Delta theta,    Delta theta~_e = theta~_e - theta~_{e-1} = Delta theta / E

starting from theta~_{e-1} and matching Delta theta / E with B steps on a fixed dummy split.
Updates here follow the lab's sign, u = theta_0 - theta_E = -Delta theta.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

__all__ = ["REPLICATIONS", "Replication", "plan_replication", "interpolated_path", "epoch_problem", "Bound"]

REPLICATIONS = ("auto", "exact", "interpolate")
"""auto: exact when E = 1 or B = 1, interpolation otherwise (the paper); exact: refuse E > 1 with B > 1
(DLG as the paper runs it); interpolate: always attack one interpolated epoch (an ablation)."""


@dataclass(frozen=True)
class Replication:
    """What the server simulates: `epochs` epochs of mini-batches of `batch_size` from `start`-epoch's
    interpolated weights, matched against the update divided by `divisor`."""
    method: str                  # "exact" or "interpolation"
    epochs: int
    batch_size: int
    start_fraction: float        # theta_start = theta_0 - start_fraction * u
    divisor: int                 # the matched update is u / divisor


def plan_replication(local_epochs: int, n: int, local_batch_size: int, choice: str = "auto",
                     target_epoch: int = 1) -> Replication:
    """The dispatcher: exact replication when E = 1 or B = 1, interpolation of epoch `target_epoch` else."""
    if choice not in REPLICATIONS:
        raise ValueError(f"unknown replication {choice!r}; use {', '.join(REPLICATIONS)}")
    if not 1 <= target_epoch <= local_epochs:
        raise ValueError(f"target epoch {target_epoch} is not one of the client's {local_epochs} epochs")
    batches = -(-n // local_batch_size)
    exact_possible = local_epochs == 1 or batches == 1
    if choice == "exact" and not exact_possible:
        raise ValueError(f"no exact replication of {local_epochs} epochs x {batches} mini-batches (the client "
                         "reshuffles every epoch); use interpolation")
    if choice == "interpolate" or (choice == "auto" and not exact_possible):
        return Replication("interpolation", 1, local_batch_size, (target_epoch - 1) / local_epochs, local_epochs)
    return Replication("exact", local_epochs, local_batch_size, 0.0, 1)


def interpolated_path(params0: Mapping[str, torch.Tensor], update: Sequence[torch.Tensor],
                      epochs: int) -> list[dict[str, torch.Tensor]]:
    """Eq. (19): theta~_0 .. theta~_E, theta~_e = theta_0 - (e / E) u (so theta~_E = theta_0 - u = theta_E)."""
    return [{k: p - (e / epochs) * u for (k, p), u in zip(params0.items(), update)} for e in range(epochs + 1)]


def epoch_problem(params0: Mapping[str, torch.Tensor], update: Sequence[torch.Tensor], plan: Replication
                  ) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """(start weights, matched update) of the plan: theta~_{e-1} and u / E for interpolation (eq. 20);
    for exact replay the weights and the update themselves (no copy of the model)."""
    if plan.start_fraction == 0 and plan.divisor == 1:
        return dict(params0), list(update)
    start = {k: p - plan.start_fraction * u for (k, p), u in zip(params0.items(), update)}
    return start, [u / plan.divisor for u in update]


@dataclass(frozen=True)
class Bound:
    """A simulator with its context fixed (shared by every trial) and its output scaled.

    Lets trials differ only in what the target holds per trial (AWA's Q) without batching the model's
    weights under vmap, which would turn every convolution into a per-trial one.
    """
    simulator: Callable[[Mapping[str, Any], Mapping[str, Any]], list[torch.Tensor]]
    context: Mapping[str, Any]
    scale: float = 1.0

    def __call__(self, variables: Mapping[str, Any], context: Mapping[str, Any]) -> list[torch.Tensor]:
        out = self.simulator(variables, self.context)
        return out if self.scale == 1.0 else [t * self.scale for t in out]

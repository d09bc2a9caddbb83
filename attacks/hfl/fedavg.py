"""What the FedAvg attacks share (AWA and AGIC beside it): replicating a client's local training on dummy data,
the observation they need, and the evaluation-only error of the interpolation.

Replication: exactly where the server can, by linear interpolation of the parameter path where it cannot
(AWA, Section 3 and eqs. 19-21).

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
from typing import Any, Mapping, Sequence

import torch

from attacks.hfl.observations import check_requirements

__all__ = ["REPLICATIONS", "Replication", "plan_replication", "interpolated_path", "epoch_problem", "KnownLabelsFedAvg",
           "interpolation_errors", "upload_diagnostics"]

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


class KnownLabelsFedAvg:
    """What AGIC and AWA need of their FedAvg observation: the update, the local hyperparameters, the labels."""
    requires = ("update", "batch_size", "local_hyperparameters", "labels")

    def check(self, observation) -> None:
        check_requirements(self.name, self.requires, observation)


def _norm(tensors) -> float:
    return float(torch.sqrt(sum(t.double().square().sum() for t in tensors)))


def interpolation_errors(observation, epoch: int = 1) -> dict[str, float]:
    """||u/E - (theta_{e-1} - theta_e)|| / ||theta_{e-1} - theta_e|| and ||theta~_{e-1} - theta_{e-1}|| /
    ||theta_0 - theta_{e-1}|| (0 for e = 1) from the client's true per-epoch weights (evaluation only: the
    attack never sees them)."""
    path = [dict(observation.model.params)] + [dict(p) for p in observation.epoch_params]
    names, E = list(path[0]), observation.local_epochs
    true_step = [path[epoch - 1][k] - path[epoch][k] for k in names]
    plan = plan_replication(E, observation.batch_size, observation.local_batch_size, "interpolate", epoch)
    start, approx = epoch_problem(path[0], observation.update, plan)      # eqs. 19-20, as the attack uses them
    start_true = [path[epoch - 1][k] for k in names]
    start_approx = [start[k] for k in names]
    moved = _norm([path[0][k] - s for k, s in zip(names, start_true)])
    return {"epoch": epoch,
            "update_error": _norm([a - t for a, t in zip(approx, true_step)]) / max(_norm(true_step), 1e-30),
            "start_error": _norm([a - t for a, t in zip(start_approx, start_true)]) / moved if moved > 0 else 0.0}


def upload_diagnostics(observation, settings) -> dict[str, Any]:
    """The specs' `diagnostics` hook: metrics.json additions known before the attack runs (FedAvg over several
    epochs only)."""
    if getattr(observation, "epoch_params", None) is None or observation.local_epochs < 2:
        return {}
    return {"interpolation": interpolation_errors(observation, getattr(settings, "target_epoch", 1))}

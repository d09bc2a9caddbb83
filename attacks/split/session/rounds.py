"""The referee's monitor of a malicious server's session (FSHA's): the error of the server's reconstruction of
each received batch against the private batch it came from, ground truth the attack never sees (the paper's
Figure 5), with the server's losses, as interval means."""
from __future__ import annotations

import math
from typing import Callable

import torch

from attacks.metrics import image_mse
from vfl.fsha_victim import BatchStream, from_fsha_images

__all__ = ["LOG_FIELDS", "RoundLog"]

LOG_FIELDS = ("client_loss", "encoder_decoder_mse", "discriminator_loss", "reconstruction_mse",
              "reconstruction_mse01")
"""Logged per interval (means over the interval). MSEs without suffix are on FSHA's [-1, 1] scale
(as the paper's Figure 5), `...01` on [0, 1] after converting back (a quarter of the former). The
reconstruction errors compare the server's f~^-1(H) with the private batch H came from (ground truth,
computed on the victim side)."""


class RoundLog:
    """The experiment's monitor: the error of the server's reconstruction of each received batch
    against that batch, summed on the device with the server's losses and read once per interval.

    `replay`: `batches` is the referee's replay of the victim's batch order (the victim trains in another
    process, over TCP), drawn here once a round; otherwise it is the client's own stream, which the round drew."""

    def __init__(self, batches: BatchStream, every: int, total: int, device: torch.device,
                 log: Callable[[str], None], label: str, *, replay: bool = False):
        self.batches, self.every, self.total, self.log, self.label = batches, every, total, log, label
        self.replay = replay
        self._sum = torch.zeros(len(LOG_FIELDS), device=device)
        self._count = 0
        self.rows: list[dict[str, float]] = []

    def __call__(self, step: int, reconstruction: torch.Tensor, losses: torch.Tensor) -> bool:
        if self.replay:
            next(self.batches)
        x = self.batches.last                                   # the private batch of this round
        errors = torch.stack([image_mse(reconstruction, x).mean(),
                              image_mse(from_fsha_images(reconstruction), from_fsha_images(x)).mean()])
        self._sum += torch.cat([losses, errors])
        self._count += 1
        if step % self.every == 0 or step == self.total:
            return not _is_finite(self.flush(step))
        return False

    @property
    def pending(self) -> bool:
        return self._count > 0

    def flush(self, iteration: int) -> dict[str, float]:
        values = (self._sum / self._count).tolist()
        row = {"iteration": iteration, **dict(zip(LOG_FIELDS, values))}
        self.rows.append(row)
        self._sum.zero_()
        self._count = 0
        self.log(" ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        if not _is_finite(row):
            self.log(f"diverged (non-finite value) by iteration {iteration}; stopping")
        return row


def _is_finite(row: dict[str, float]) -> bool:
    return all(math.isfinite(v) for k, v in row.items() if k != "iteration")

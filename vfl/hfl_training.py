"""A small HFL trainer: global weights that have seen some training, for the attacks whose papers attack
a "pretrained" model (FedLeak's pretrained setting, `--pretrain-epochs`: the dataset's test split, which
the client's batch is not drawn from) or need gradients of a converged model (TGIAs-RO's invalid
gradients: the FL clients' own images, `attacks.hfl.trace.converged_model`).

The model trains centrally on the data it is given, with the lab's Adam and BatchNorm in training mode,
then returns to eval mode, as the attacks use it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vfl.data import ImageData
from vfl.runtime import adam, generator
from vfl.validate import check_int, check_number

__all__ = ["MAX_EPOCHS", "Pretraining", "pretrain"]

MAX_EPOCHS = 10_000
"""The most epochs `pretrain` takes (`--pretrain-epochs`; `--trained-steps`, whose full batch makes an epoch
one step)."""


@dataclass(frozen=True)
class Pretraining:
    """What `pretrain` did: the mean loss of every epoch and the accuracy on the training split after it."""
    epochs: int
    losses: tuple[float, ...]
    accuracy: float


def pretrain(model: nn.Module, data: ImageData, *, epochs: int = 2, lr: float = 1e-3, batch_size: int = 64,
             seed: int = 0) -> Pretraining:
    """Train `model` in place for `epochs` epochs of Adam on `data` (seeded order), leave it in eval mode."""
    check_int("epochs", epochs, low=0, high=MAX_EPOCHS)
    check_number("lr", lr, low=0, low_open=True)
    check_int("batch_size", batch_size, low=1)
    device = next(model.parameters()).device
    images, labels = data.images.to(device), data.labels.to(device)
    data = ImageData(data.name, data.split, images, labels, data.provenance)
    optimiser = adam(model.parameters(), lr)
    order = generator(seed)
    totals = torch.zeros(epochs, device=device)          # read back once, after the last epoch
    model.train()
    for epoch in range(epochs):
        for x, y in data.batches(batch_size, order):
            loss = F.cross_entropy(model(x), y)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            totals[epoch] += loss.detach() * len(y)
    losses = [total / len(data) for total in totals.tolist()]
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x).argmax(-1) == y).sum()) for x, y in data.batches(512, shuffle=False))
    return Pretraining(epochs, tuple(losses), correct / len(data))

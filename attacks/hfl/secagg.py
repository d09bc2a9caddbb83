"""Secure aggregation as the server sees it: only the sum of k clients' uploads, never one client's.

Each client computes its own upload (FedSGD gradient or FedAvg update, with its own defence noise) on its
own batch; the server receives u_1 + ... + u_k as one observation over all k batches (FedLeak, Sec. 7:
"the sum of k clients' updates is seen as one batch"). The observation records `clients = k`, so an attack
can rescale the sum to a mean over the k batches.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import torch

from attacks.hfl.observations import FedAvgObservation, FedSGDObservation
from vfl.errors import SplitlabError

__all__ = ["aggregate", "observe_clients"]

Upload = FedSGDObservation | FedAvgObservation


def aggregate(uploads: Sequence[Upload]) -> Upload:
    """The sum of the uploads as one observation over all their examples (same kind, model, defence)."""
    first = uploads[0]
    if any(u.kind != first.kind or u.defence != first.defence for u in uploads):
        raise SplitlabError("secure aggregation sums uploads of one kind under one defence")
    field = "gradient" if first.kind == "fedsgd" else "update"
    summed = tuple(torch.stack(parts).sum(0) for parts in zip(*(getattr(u, field) for u in uploads)))
    labels = None if first.labels is None else torch.cat([u.labels for u in uploads])
    # one client's per-epoch weights (evaluation only) do not describe a sum of clients' training
    path = {"epoch_params": None} if first.kind == "fedavg" and len(uploads) > 1 else {}
    return replace(first, **{field: summed}, batch_size=sum(u.batch_size for u in uploads), labels=labels,
                   clients=sum(u.clients for u in uploads), **path)


def observe_clients(observe: Callable[[torch.Tensor, torch.Tensor], Upload], x: torch.Tensor, y: torch.Tensor,
                    clients: int) -> Upload:
    """`clients` equal batches cut from (x, y) in order, each uploaded by `observe(x_i, y_i)`, then summed."""
    if clients < 1 or len(y) % clients:
        raise SplitlabError(f"{len(y)} images do not split into {clients} equal client batches")
    size = len(y) // clients
    uploads = [observe(x[i * size:(i + 1) * size], y[i * size:(i + 1) * size]) for i in range(clients)]
    return uploads[0] if clients == 1 else aggregate(uploads)

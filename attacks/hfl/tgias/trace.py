"""A FedSGD training trace as a server sees it, and the temporal gradients of one batch taken from it.

K clients each hold `local_batches` batches of the train split. Every round the server samples a
fraction of the clients; each sampled client uploads the gradient of its next local batch (a client
walks through its batches in an order reshuffled every epoch, so the same batch comes back), the
server averages the uploads (Eq. 1 with lambda_k = 1) and steps w <- w - server_lr * mean. Other
clients' batches therefore move w between two sightings of the target batch (client 0's first batch).
The server logs (round, w_t, g_t) of client 0; `observe_trace` keeps the first T sightings of the
target batch (TGIAs-RO App. C.3: "the first 10 iterations" of that batch), as a `RoundLog`.

Invalid temporal gradients (TGIAs-RO Sect. 3.2.3, Fig. 8) replace the last m of the T sightings:
- `trained`: the target batch's gradient at the weights of a model trained to convergence on the clients'
  data, target batch included (`converged_model`), logged with those weights. Prop. 1's invalid gradient:
  near zero, so it carries next to no information about the batch;
- `other-batch`: another batch's gradient at w_t, logged as if it were the target's (a misalignment);
- `noise`: Gaussian noise with each layer's norm of the true g_t.

`align` is the server's alignment of client 0's uploads (TGIAs-RO Sect. 3.4.2): group by the label
multiset read off each upload, split a group where the cosine similarity of consecutive members
drops below a threshold; `alignment_accuracy` scores it against the true batch ids.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from attacks.kit import (FedSGDObservation, ImageData, NoUploadDefence, RoundLog, SplitlabError, UploadDefence,
                         count_labels, observe_fedsgd, pretrain)

__all__ = ["INVALID_KINDS", "LOCAL_BATCHES", "Trace", "observe_trace", "client_data", "converged_model",
           "flat_gradient", "align", "alignment_accuracy", "rand_index"]

INVALID_KINDS = ("trained", "other-batch", "noise")
LOCAL_BATCHES = 3
"""Local batches per client in the trace."""


@dataclass(frozen=True, eq=False)
class Trace:
    """The attacker's log of the target batch and, for evaluation only, what the server could not know."""
    log: RoundLog
    """The T temporal uploads the attack gets (the last `invalid` of them invalid)."""
    client_log: tuple[FedSGDObservation, ...]
    """Every upload of client 0 up to the T-th sighting (what alignment works on)."""
    client_batches: tuple[int, ...]
    """The true local batch of each client_log upload (0 = the target batch); evaluation only."""
    invalid: int
    rounds: int
    """FL rounds simulated."""


def _client_indices(n: int, clients: int, local_batches: int, batch_size: int, index: int) -> list[list[torch.Tensor]]:
    """Client k's batch j is the next `batch_size` images of the train split after client 0's first batch,
    which starts at `index` (wrapping around the split)."""
    return [[torch.arange(index + (k * local_batches + j) * batch_size,
                          index + (k * local_batches + j + 1) * batch_size) % n
             for j in range(local_batches)] for k in range(clients)]


def _client_batches(data: ImageData, clients: int, local_batches: int, batch_size: int, index: int):
    return [[(data.images[idx], data.labels[idx]) for idx in mine]
            for mine in _client_indices(len(data), clients, local_batches, batch_size, index)]


def client_data(data: ImageData, *, clients: int, batch_size: int, index: int = 0,
                local_batches: int = LOCAL_BATCHES) -> ImageData:
    """Every image the trace's clients hold (client 0's target batch first)."""
    idx = torch.cat([i for mine in _client_indices(len(data), clients, local_batches, batch_size, index) for i in mine])
    return ImageData(data.name, data.split, data.images[idx], data.labels[idx], data.provenance)


def converged_model(model: nn.Module, data: ImageData, *, steps: int, seed: int = 0) -> tuple[nn.Module, float]:
    """A copy of `model` trained on `data` (the clients' images) with `steps` full-batch Adam steps (lr 1e-3):
    the global model once FL has converged on the clients' batches (TGIAs-RO Prop. 1). Returns it (eval
    mode) and the training loss of its last step (taken before that step's update)."""
    trained = copy.deepcopy(model)
    with torch.enable_grad():
        for p in trained.parameters():
            p.requires_grad_(True)
        done = pretrain(trained, data, epochs=steps, batch_size=len(data), seed=seed)
    return trained, done.losses[-1]


def _noise_like(gradient: Sequence[torch.Tensor], generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    noisy = []
    for g in gradient:
        z = torch.randn(g.shape, generator=generator, dtype=torch.float64).to(g)
        noisy.append(z * (g.norm() / z.norm().clamp_min(1e-30)))
    return tuple(noisy)


def observe_trace(model: nn.Module, data: ImageData, *, batch_size: int, temporal: int, index: int = 0,
                  clients: int = 4, sample_fraction: float = 1.0, server_lr: float = 0.1,
                  local_batches: int = LOCAL_BATCHES,
                  invalid: int = 0, invalid_kind: str = "other-batch", trained: nn.Module | None = None,
                  arch: str = "custom", defence: UploadDefence = NoUploadDefence(), seed: int = 0,
                  reveal_labels: bool = False, max_rounds: int = 100_000) -> Trace:
    """Run FedSGD from `model`'s weights until client 0 has uploaded its target batch `temporal` times.

    `trained` is the trained global model for `invalid_kind="trained"`. `seed` drives the client sampling,
    the local batch orders, the defence's noise and the invalid noise. Nothing of `model` is changed.
    """
    if not 0 <= invalid <= temporal:
        raise SplitlabError(f"--invalid {invalid} must be between 0 and --temporal {temporal}")
    if invalid and invalid_kind not in INVALID_KINDS:
        raise SplitlabError(f"unknown invalid kind {invalid_kind!r}; use {', '.join(INVALID_KINDS)}")
    if invalid and invalid_kind == "trained" and trained is None:
        raise SplitlabError("invalid kind 'trained' needs a trained model")
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    batches = [[(x.to(device, dtype), y.to(device)) for x, y in c]
               for c in _client_batches(data, clients, local_batches, batch_size, index)]
    generator = torch.Generator().manual_seed(seed)
    per_round = max(1, round(sample_fraction * clients))
    orders: list[list[int]] = [[] for _ in range(clients)]
    network = _eval_copy(model)
    client_log, client_batches, sightings, round_numbers = [], [], [], []
    rounds = 0
    while len(sightings) < temporal:
        if rounds >= max_rounds:
            raise SplitlabError(f"the target batch came back {len(sightings)} times in {max_rounds} rounds; "
                                f"raise --sample-fraction or lower --temporal")
        sampled = sorted(torch.randperm(clients, generator=generator)[:per_round].tolist())
        uploads = []
        for k in sampled:
            if not orders[k]:
                orders[k] = torch.randperm(local_batches, generator=generator).tolist()
            j = orders[k].pop(0)
            x, y = batches[k][j]
            obs = observe_fedsgd(network, x, y, arch=arch, defence=defence, generator=generator,
                                 reveal_labels=reveal_labels)
            uploads.append(obs.gradient)
            if k == 0:
                client_log.append(obs)
                client_batches.append(j)
                if j == 0:
                    sightings.append(obs)
                    round_numbers.append(rounds)
        with torch.no_grad():
            for i, p in enumerate(network.parameters()):
                p -= server_lr * sum(u[i] for u in uploads) / len(uploads)
        rounds += 1
    log = list(sightings)
    other = batches[0][1 % local_batches] if local_batches > 1 else batches[1 % clients][0]
    for t in range(temporal - invalid, temporal):
        log[t] = _invalid(log[t], invalid_kind, batches[0][0], other, trained, arch, defence, generator,
                          reveal_labels)
    return Trace(RoundLog(tuple(log), round_numbers=tuple(round_numbers)), tuple(client_log), tuple(client_batches),
                 invalid, rounds)


def _eval_copy(model: nn.Module) -> nn.Module:
    network = copy.deepcopy(model).eval()
    for p in network.parameters():
        p.requires_grad_(False)
    return network


def _invalid(valid: FedSGDObservation, kind: str, target, other, trained, arch, defence, generator,
             reveal_labels) -> FedSGDObservation:
    """An invalid stand-in for one temporal upload; it keeps the target's labels where the server knows them."""
    x, y = target
    if kind == "trained":
        obs = observe_fedsgd(trained, x, y, arch=arch, defence=defence, generator=generator,
                             reveal_labels=reveal_labels)
    elif kind == "other-batch":
        obs = observe_fedsgd(valid.model.network, other[0], other[1], arch=arch, defence=defence,
                             generator=generator)
    else:
        obs = FedSGDObservation(model=valid.model, gradient=_noise_like(valid.gradient, generator),
                                batch_size=valid.batch_size, defence=valid.defence)
    return FedSGDObservation(model=obs.model, gradient=obs.gradient, batch_size=obs.batch_size, defence=obs.defence,
                             labels=valid.labels)


def flat_gradient(obs: FedSGDObservation) -> torch.Tensor:
    """An upload's gradient as one float64 vector (for cosine similarities and norms)."""
    return torch.cat([g.flatten() for g in obs.gradient]).double()


def align(uploads: Sequence[FedSGDObservation], *, threshold: float = 0.5,
          labels: Callable[[FedSGDObservation], torch.Tensor] = count_labels) -> list[int]:
    """Cluster ids of the uploads, in order: an upload joins the cluster of the same label multiset whose
    latest member it is most cosine-similar to, if that similarity is >= `threshold` (gradients of one
    batch at nearby weights point the same way), else it opens a new cluster."""
    latest: list[tuple[tuple[int, ...], torch.Tensor]] = []       # (multiset, flat gradient of latest member)
    out = []
    for obs in uploads:
        multiset, g = tuple(sorted(labels(obs).tolist())), flat_gradient(obs)
        scores = [float(torch.nn.functional.cosine_similarity(g, h, 0)) if key == multiset else -2.0
                  for key, h in latest]
        best = max(range(len(scores)), key=scores.__getitem__, default=None)
        if best is None or scores[best] < threshold:
            latest.append((multiset, g))
            out.append(len(latest) - 1)
        else:
            latest[best] = (multiset, g)
            out.append(best)
    return out


def alignment_accuracy(clusters: Sequence[int], truth: Sequence[int]) -> float:
    """The paper's measure (Sect. 4.3: "the ratio of correctly clustered gradients"), read as the share of
    uploads that are correctly clustered: clusters are matched one-to-one to batches so as to keep the most
    uploads together (Hungarian assignment on the contingency table), and an upload is correct when its
    cluster is matched to its own batch. Merging two batches loses the smaller; splitting one loses the rest."""
    if not truth:
        return 1.0
    cluster_ids, batch_ids = sorted(set(clusters)), sorted(set(truth))
    table = np.zeros((len(cluster_ids), len(batch_ids)))
    for c, t in zip(clusters, truth):
        table[cluster_ids.index(c), batch_ids.index(t)] += 1
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum()) / len(truth)


def rand_index(clusters: Sequence[int], truth: Sequence[int]) -> float:
    """Rand index: the fraction of upload pairs that the clustering puts together exactly when they are
    the same batch (1.0 for a perfect alignment; 1.0 also for a single upload)."""
    pairs = [(i, j) for i in range(len(truth)) for j in range(i + 1, len(truth))]
    if not pairs:
        return 1.0
    agree = sum((clusters[i] == clusters[j]) == (truth[i] == truth[j]) for i, j in pairs)
    return agree / len(pairs)

"""Train through the lab's real split protocol and compare two trainings message by message.

Every invariance check is "run the protocol twice, once on (X, W) and once on the transformed pair,
and compare what crossed the cut". This module is that helper: `train` drives
`vfl.protocol.train_epoch` (the loop `splitlab train` uses) with a `Client` and an honest `Server` or
a `MaliciousServer`, records the transcript with tensors, and snapshots the client's parameters
after every step; `compare` measures the two runs' largest relative gaps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from theory_checks.adam import build_optimizer
from vfl.protocol import Client, MaliciousServer, Server, Transcript, train_epoch

Batches = Sequence[tuple[torch.Tensor, torch.Tensor]]
State = dict[str, torch.Tensor]


def relative_gap(reference: torch.Tensor, other: torch.Tensor) -> float:
    """max |reference - other| / max |reference| (a relative measure; 0/0 reads as 0)."""
    scale = float(reference.abs().max()) if reference.numel() else 0.0
    diff = float((reference - other).abs().max()) if reference.numel() else 0.0
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


@dataclass
class ProtocolRun:
    """What one protocol training left behind."""
    transcript: Transcript              # every H sent and G received, with tensors
    client_states: list[State]          # client parameters before step 0, then after each step
    losses: list[float]                 # the server's loss at each step (empty for a malicious server)
    server: Server | MaliciousServer

    def activations(self) -> list[torch.Tensor]:
        return [e.tensor for e in self.transcript.sent_by_client()]

    def cut_gradients(self) -> list[torch.Tensor]:
        return [e.tensor for e in self.transcript.received_by_client()]


def _snapshot(model: nn.Module) -> State:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def train(client_model: nn.Module, server: Server | MaliciousServer, batches: Batches, *,
          optimizer: str, lr: float, observe: Callable[[Client], None] | None = None) -> ProtocolRun:
    """Train `client_model` against `server` over `batches` with the protocol's one training loop.

    `observe(client)`, if given, is called after every step (to read the optimiser's state).
    """
    client = Client(client_model, build_optimizer(optimizer, client_model.parameters(), lr))
    transcript = Transcript(keep_tensors=True)
    states = [_snapshot(client_model)]
    losses: list[float] = []

    def after_step(_: int) -> None:
        states.append(_snapshot(client_model))
        if server.last_loss is not None:
            losses.append(float(server.last_loss))
        if observe is not None:
            observe(client)

    train_epoch(client, server, batches, torch.device("cpu"), transcript=transcript, on_step=after_step)
    return ProtocolRun(transcript, states, losses, server)


def honest_server(model: nn.Module, *, optimizer: str, lr: float,
                  loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy) -> Server:
    return Server(model, build_optimizer(optimizer, model.parameters(), lr), loss_fn)


def loss_only_server(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Server:
    """An honest server whose top model is the identity: it returns dL/dH of a fixed loss of H.

    For the checks whose objective is a function of the client's output alone (Example 1, the
    quadratic of Lemmas 4-6, the least-squares problem of Remark 2); it has nothing to train.
    """
    return Server(nn.Identity(), None, loss_fn)


def same_batches(data: torch.Tensor, labels: torch.Tensor, order: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The batches for one run: the same index order for both runs of a comparison."""
    return [(data[idx], labels[idx]) for idx in order]


def batch_order(n: int, batch_size: int, steps: int, gen: torch.Generator) -> list[torch.Tensor]:
    """`steps` minibatch index sets, reshuffled every pass over the n samples."""
    order: list[torch.Tensor] = []
    while len(order) < steps:
        perm = torch.randperm(n, generator=gen)
        order.extend(perm[i:i + batch_size] for i in range(0, n - batch_size + 1, batch_size))
    return order[:steps]


@dataclass(frozen=True)
class Comparison:
    """Largest relative gaps between two runs, over all steps."""
    activations: float                  # H_k vs H~_k (what the server sees)
    cut_gradients: float                # G_k vs G~_k
    client_parameters: float            # the mapped parameters of run a vs those of run b
    server_parameters: float            # final server weights (0 where the server has none)
    losses: float                       # the server's losses, step by step

    @property
    def worst(self) -> float:
        return max(self.activations, self.cut_gradients, self.client_parameters, self.server_parameters,
                   self.losses)

    def as_dict(self) -> dict[str, float]:
        return {"activation_gap": self.activations, "cut_gradient_gap": self.cut_gradients,
                "client_parameter_gap": self.client_parameters, "server_parameter_gap": self.server_parameters,
                "loss_gap": self.losses}


def _max_gap(references: Sequence[torch.Tensor], others: Sequence[torch.Tensor]) -> float:
    if len(references) != len(others):
        raise ValueError(f"runs of different length: {len(references)} vs {len(others)} messages")
    return max((relative_gap(r, o) for r, o in zip(references, others)), default=0.0)


def compare(a: ProtocolRun, b: ProtocolRun, map_client_state: Callable[[State], State]) -> Comparison:
    """Compare run `b` against run `a`; `map_client_state` says what b's parameters should be given a's
    (for Lemma 1, W -> U^T W)."""
    mapped = [map_client_state(s) for s in a.client_states]
    client_gap = max((max((relative_gap(m[k], s[k]) for k in m), default=0.0)
                      for m, s in zip(mapped, b.client_states)), default=0.0)
    server_gap = 0.0
    if isinstance(a.server, Server) and isinstance(b.server, Server):
        sa, sb = a.server.model.state_dict(), b.server.model.state_dict()
        server_gap = max((relative_gap(sa[k], sb[k]) for k in sa), default=0.0)
    losses = (_max_gap([torch.tensor(a.losses, dtype=torch.float64)], [torch.tensor(b.losses, dtype=torch.float64)])
              if a.losses else 0.0)
    return Comparison(_max_gap(a.activations(), b.activations()), _max_gap(a.cut_gradients(), b.cut_gradients()),
                      client_gap, server_gap, losses)

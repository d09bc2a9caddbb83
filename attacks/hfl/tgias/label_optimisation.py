"""Label optimisation on the last layer (TGIAs-RO Sect. 3.4.1), over one or several temporal gradients.

For the final linear layer z = W h + c under the mean cross-entropy over B examples,

    dL/dW = (1/B) sum_n (softmax(W h_n + c) - y_n) h_n^T,      dL/dc = (1/B) sum_n (softmax(W h_n + c) - y_n).

Given T uploads of the same batch at weights (W_t, c_t), find dummy features h_t = sigmoid(u_t) (B x M,
non-negative as after the Sigmoid/ReLU that feeds the last layer (iDLG's assumption); one set per t,
since the layers below move between rounds) and one set of label logits l (B x N) shared by all t, so
that with y = softmax(l) the formulas above match every observed (dL/dW_t, dL/dc_t) in squared L2
(each t's term divided by its observed squared norm, so late small gradients count as much as early
ones). L-BFGS from u, l ~ N(0, 1), several starts, the lowest loss kept; the labels are argmax l, a multiset
(slots are unordered).
"""
from __future__ import annotations

from typing import Sequence

import torch

from attacks.hfl.observations import FedSGDObservation, check_requirements

__all__ = ["optimise_labels"]


def _last_layer(obs: FedSGDObservation) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    check_requirements("label optimisation", ("gradient", "final_linear"), obs)
    weight = obs.model.final_linear
    bias = weight[: -len("weight")] + "bias"
    params, grads = obs.model.params, obs.named()
    return params[weight], params.get(bias), grads[weight], grads.get(bias)


def _norm2(t: torch.Tensor) -> torch.Tensor:
    return t.square().sum().clamp_min(1e-30)


def _one_start(layers, batch: int, classes: int, features: int, generator: torch.Generator, steps: int,
               max_iter: int) -> tuple[float, torch.Tensor]:
    device = layers[0][0].device              # drawn on the CPU (same start on every device), used beside w
    u = torch.randn(len(layers), batch, features, generator=generator, dtype=torch.float64).to(device)
    logits = torch.randn(batch, classes, generator=generator, dtype=torch.float64).to(device)
    u.requires_grad_(True)
    logits.requires_grad_(True)

    def loss() -> torch.Tensor:
        y, h = torch.softmax(logits, -1), torch.sigmoid(u)
        total = 0.0
        for t, (w, c, gw, gc, nw, nc) in enumerate(layers):
            residual = torch.softmax(h[t] @ w.T + (c if c is not None else 0.0), -1) - y      # (B, N)
            total = total + (residual.T @ h[t] / batch - gw).square().sum() / nw
            if gc is not None:
                total = total + (residual.mean(0) - gc).square().sum() / nc
        return total

    optimiser = torch.optim.LBFGS([u, logits], lr=1.0, max_iter=max_iter, history_size=100)

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        value = loss()
        value.backward()
        return value

    for _ in range(steps):
        optimiser.step(closure)
    with torch.no_grad():
        return float(loss()), logits.detach().argmax(-1).sort().values


def optimise_labels(uploads: Sequence[FedSGDObservation], *, steps: int = 10, starts: int = 8, seed: int = 0,
                    max_iter: int = 20) -> torch.Tensor:
    """The batch's labels, shape (B,), from the last-layer gradients of its uploads: the answer of the
    start (of `starts`) with the lowest loss."""
    layers = [tuple(t.double() if t is not None else None for t in _last_layer(obs)) for obs in uploads]
    # each layer's gradient norms normalise its terms: constants, computed once, not at every evaluation
    layers = [(w, c, gw, gc, _norm2(gw), None if gc is None else _norm2(gc)) for w, c, gw, gc in layers]
    classes, features = layers[0][0].shape
    generator = torch.Generator().manual_seed(seed)
    runs = [_one_start(layers, uploads[0].batch_size, classes, features, generator, steps, max_iter)
            for _ in range(starts)]
    return min(runs, key=lambda r: r[0])[1].to(uploads[0].model.device)

"""Label optimisation on the last layer (TGIAs-RO Sect. 3.4.1), over one or several temporal gradients.

For the final linear layer z = W h + c under the mean cross-entropy over B examples,

    dL/dW = (1/B) sum_n (softmax(W h_n + c) - y_n) h_n^T,      dL/dc = (1/B) sum_n (softmax(W h_n + c) - y_n).

Given T uploads of the same batch at weights (W_t, c_t), find dummy features h_t = 2 s_t sigmoid(u_t)
(B x M, non-negative as after the Sigmoid/ReLU that feeds the last layer (iDLG's assumption); one set per
t, since the layers below move between rounds) and one set of label logits l (B x N) shared by all t, so
that with y = softmax(l) the formulas above match every observed (dL/dW_t, dL/dc_t) in squared L2
(each t's term divided by its observed squared norm, so late small gradients count as much as early
ones). L-BFGS from u, l ~ N(0, 1), several starts, the lowest loss kept; the labels are argmax l, a multiset
(slots are unordered).

The scale s_t. The paper (Sect. 3.4.1) draws the dummy features from N(0, 1), on the scale of its models'
features. The fit has a valley along which the feature scale trades against the label residual p - y: with
dummy features k times larger than the real ones, the weight gradient is matched by a residual k times
smaller, i.e. labels y close to the model's own prediction p, whose argmax is the model's favourite class in
every slot. A ReLU ConvNet at initialisation has features about 0.015 on average, 30 times below sigmoid(N(0,
1)): unscaled, the optimisation stopped in that valley (10 batches of 8 distinct labels: 0.21 label accuracy,
6 of them one class in all 8 slots). s_t is the root mean square of the feature the gradient itself reveals,
dL/dc_t^T dL/dW_t / ||dL/dc_t||^2 (exact for one sample, the features' mean scale for a batch), so the
dummies start at the scale of the features they stand for, as the paper's do, whatever the model.
"""
from __future__ import annotations

from typing import Sequence

import torch

from attacks.kit import FedSGDObservation, check_requirements

__all__ = ["optimise_labels", "feature_scale", "LABEL_FEATURES"]

LABEL_FEATURES = "gradient-scaled"
"""How the dummy features are scaled (recorded as `extras.label_features` beside the labels it finds)."""


def _last_layer(obs: FedSGDObservation) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    check_requirements("label optimisation", ("gradient", "final_linear"), obs)
    weight = obs.model.final_linear
    bias = weight[: -len("weight")] + "bias"
    params, grads = obs.model.params, obs.named()
    return params[weight], params.get(bias), grads[weight], grads.get(bias)


def _norm2(t: torch.Tensor) -> torch.Tensor:
    return t.square().sum().clamp_min(1e-30)


def feature_scale(weight_grad: torch.Tensor, bias_grad: torch.Tensor | None) -> torch.Tensor:
    """The root mean square of the last layer's input as its gradient reveals it: the least-squares h with
    dL/dW = dL/dc h^T, exact for one sample (iDLG, R-GAP). Without a bias nothing reveals it: 0.5, the scale
    of sigmoid(N(0, 1))."""
    if bias_grad is None:
        return torch.tensor(0.5, dtype=weight_grad.dtype, device=weight_grad.device)
    revealed = bias_grad @ weight_grad / bias_grad.square().sum().clamp_min(1e-30)
    return revealed.square().mean().sqrt().clamp_min(1e-12)


def _one_start(layers, batch: int, classes: int, features: int, generator: torch.Generator, steps: int,
               max_iter: int) -> tuple[float, torch.Tensor]:
    device = layers[0][0].device              # drawn on the CPU (same start on every device), used beside w
    scale = torch.stack([feature_scale(gw, gc) for _, _, gw, gc, _, _ in layers]).view(-1, 1, 1)
    u = torch.randn(len(layers), batch, features, generator=generator, dtype=torch.float64).to(device)
    logits = torch.randn(batch, classes, generator=generator, dtype=torch.float64).to(device)
    u.requires_grad_(True)
    logits.requires_grad_(True)

    def loss() -> torch.Tensor:
        y, h = torch.softmax(logits, -1), 2 * scale * torch.sigmoid(u)
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

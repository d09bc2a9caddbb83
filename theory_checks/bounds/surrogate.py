"""The unrolled surrogate of an attack and its Lipschitz constant L_R (paper §4.2, Fig. 2, App. C.1.1).

One solver iteration is one layer: an H-layer network of affine maps and Clip(0, 1),

    N(z) = Clip(M_H ... Clip(M_1 z + b_1) ... + b_H),       layer h fitted to the iterate x'_{c_h}

with c_h = round(h I / H) (the paper's H = 20 layers for I iterations: every (I/H)-th iterate is a layer's target), so the output is x'_I.
Fitting is greedy layer by layer (the paper cites Bengio et al. 2006), each layer by least squares with
an explicit ridge:  min_{M, b} (1/n) sum_j ||M a_j + b - x'_{c_h, j}||^2 + ridge ||M||_F^2  (ridge 0: the
minimum-norm least-squares solution). `feed` chooses layer h's input a: the fitted layer h-1's output
("fitted", greedy stacking, default) or the true iterate x'_{c_{h-1}} ("true").

Input z (the paper's (w_t, x'_0) alone cannot identify x): "w,x0" = (w_t, x'_0) as in the paper, or "w,g,x0" = (w_t, g_{w_t}(x, y), x'_0); with
(w, x'_0) alone a network fitted over many samples cannot know which x to return. Lipschitz constants
(AutoLip, Lemma 1): `full` = prod_h ||M_h|| over the whole M_1 (the paper's number); `w` = the constant in
w alone, x'_0 held fixed and g = g_w(x, y) of Lipschitz constant L_g (the Hessian bound):
||M_1^(w)|| prod_{h>=2} ||M_h|| for (w, x'_0), (||M_1^(w)|| + L_g ||M_1^(g)||) prod_{h>=2} ||M_h|| for (w, g, x'_0).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from theory_checks.bounds.lipschitz import Node, autolip
from vfl.errors import SplitlabError

INPUTS = ("w,x0", "w,g,x0")
FEEDS = ("fitted", "true")


def checkpoints(steps: int, layers: int) -> tuple[int, ...]:
    """c_h = round(h I / H), h = 1..H: the iterates the layers are fitted to (c_H = I)."""
    if not 1 <= layers <= steps:
        raise SplitlabError(f"--layers must be between 1 and the attack's {steps} steps, got {layers}")
    return tuple(int(round(h * steps / layers)) for h in range(1, layers + 1))


def ridge_fit(a: torch.Tensor, y: torch.Tensor, ridge: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, b) minimising (1/n) ||a M^T + b - y||^2 + ridge ||M||_F^2 (b unpenalised)."""
    a_mean, y_mean = a.mean(0), y.mean(0)
    ac, yc = a - a_mean, y - y_mean
    if ridge == 0.0:
        m = torch.linalg.lstsq(ac, yc, driver="gelsd").solution.T
    else:
        n = a.shape[0]
        gram = ac.T @ ac / n + ridge * torch.eye(a.shape[1], dtype=a.dtype)
        m = torch.linalg.solve(gram, ac.T @ yc / n).T
    return m, y_mean - m @ a_mean


@dataclass(frozen=True)
class Surrogate:
    weights: tuple[torch.Tensor, ...]
    biases: tuple[torch.Tensor, ...]
    blocks: tuple[tuple[str, int], ...]
    """The input's parts in order, (name, size): w, [g,] x0."""

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        for m, b in zip(self.weights, self.biases):
            z = (z @ m.T + b).clamp(0.0, 1.0)
        return z

    def lipschitz(self, *, L_g: float = 0.0, method: str = "svd") -> dict[str, float]:
        """{'full': AutoLip with the whole input as the variable, 'w': AutoLip in w alone}."""
        names = [name for name, _ in self.blocks]
        sizes = dict(self.blocks)
        edges, start = {}, 0
        for name, size in self.blocks:
            edges[name] = (start, start + size)
            start += size
        rest = [Node(f"layer{h}", (f"layer{h - 1}",), affine=lambda a, m=m: m @ a)
                for h, m in enumerate(self.weights[1:], 2)]
        first = self.weights[0]
        whole = [Node("layer1", ("input",), affine=lambda a: first @ a)] + rest
        full = autolip(whole, {"input": 1.0}, {"input": start}, method=method)[f"layer{len(self.weights)}"]
        split = Node("layer1", tuple(names),
                     affine=lambda *parts: sum(first[:, slice(*edges[n])] @ v for n, v in zip(names, parts)))
        graph = ([Node("g", ("w",), bounds=(L_g,))] if "g" in sizes else []) + [split] + rest
        inputs = {"w": 1.0, "x0": 0.0}
        in_w = autolip(graph, inputs, sizes, method=method)[f"layer{len(self.weights)}"]
        return {"full": full, "w": in_w}


def fit(z0: torch.Tensor, targets: torch.Tensor, blocks: tuple[tuple[str, int], ...], *, ridge: float,
        feed: str = "fitted") -> Surrogate:
    """Greedy layer-wise fit: z0 (n, q) inputs, targets (H, n, d) the iterates at the checkpoints."""
    if feed not in FEEDS:
        raise SplitlabError(f"unknown feed {feed!r}; choose one of: {', '.join(FEEDS)}")
    weights, biases, a = [], [], z0
    for h in range(targets.shape[0]):
        m, b = ridge_fit(a, targets[h], ridge)
        weights.append(m)
        biases.append(b)
        a = (a @ m.T + b).clamp(0.0, 1.0) if feed == "fitted" else targets[h]
    return Surrogate(tuple(weights), tuple(biases), blocks)


def surrogate_input(kind: str, w: torch.Tensor, g: torch.Tensor, x0: torch.Tensor
                    ) -> tuple[torch.Tensor, tuple[tuple[str, int], ...]]:
    """z = (w, x'_0) or (w, g, x'_0) rows for trials (P, M, R): w (P, p), g (P, M, p), x0 (M, R, d)."""
    if kind not in INPUTS:
        raise SplitlabError(f"unknown surrogate input {kind!r}; choose one of: {', '.join(INPUTS)}")
    P, M, R = w.shape[0], x0.shape[0], x0.shape[1]
    parts = {"w": w[:, None, None].expand(P, M, R, -1), "g": g[:, :, None].expand(P, M, R, -1),
             "x0": x0[None].expand(P, M, R, -1)}
    names = kind.split(",")
    return torch.cat([parts[n] for n in names], -1).flatten(0, 2), tuple((n, parts[n].shape[-1]) for n in names)

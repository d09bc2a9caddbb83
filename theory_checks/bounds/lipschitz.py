"""Lipschitz constants: the power method (Alg. 3), spectral norms, and AutoLip (Alg. 2, Lemma 1).

AutoLip (Virmaux & Scaman 2018; paper §4.2, with the sum over each node's predecessors i = 0..h-1 and L_0 = 1): over a computation graph
phi_0 = input, phi_h = g_h(predecessors),

    L_0 = 1 (0 for constant inputs),    L_h = sum over predecessors i of  max_z ||d_i g_h(z)||_2 * L_i

(the paper's sum over i = 1..h has L_h on both sides; the sum runs over the predecessors). Here a node is
g_h = rho(A_h(phi_i, ...)) with A_h affine in each predecessor and rho an activation of known Lipschitz
constant (Clip(0, 1) and ReLU: 1), so max_z ||d_i g_h|| <= Lip(rho) ||d_i A_h||_2 and ||d_i A_h|| is the
spectral norm of a constant Jacobian, found by autodiff. Lemma 1: on a feed-forward chain this is
prod_h ||M_h||_2. A node may instead carry given bounds on its partial derivatives (a non-affine map
such as w -> g_w(x, y), whose Lipschitz constant is known analytically).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from vfl.errors import SplitlabError
from vfl.runtime import generator

NORM_METHODS = ("svd", "power")


def power_iteration(f: Callable[[torch.Tensor], torch.Tensor], dim: int, *, iters: int = 500, tol: float = 1e-13,
                    seed: int = 0, dtype: torch.dtype = torch.float64) -> float:
    """Alg. 3, the autograd power method for an affine f: R^dim -> R^m:
    v <- grad_v 1/2 ||f(v) - f(0)||^2 (= M^T M v), v <- v / ||v||; returns ||f(v) - f(0)|| = ||M v||.
    Stops after `iters` iterations or when the estimate changes by less than `tol` (relative). It converges
    to sigma_max from below (a finite power method under-estimates it), hence the SVD cross-check."""
    zero = torch.zeros(dim, dtype=dtype)
    f0 = f(zero).detach()
    v = torch.randn(dim, generator=generator(seed), dtype=dtype)
    v = v / v.norm()
    estimate = 0.0
    for _ in range(iters):
        with torch.enable_grad():
            probe = v.detach().requires_grad_(True)
            u = torch.autograd.grad(0.5 * (f(probe) - f0).square().sum(), probe)[0]
        norm = float(u.norm())
        if norm == 0.0:
            return 0.0
        v = u / norm
        new = float((f(v) - f0).norm())
        if abs(new - estimate) <= tol * new:
            return new
        estimate = new
    return estimate


def spectral_norm(matrix: torch.Tensor, method: str = "svd", **power) -> float:
    """||M||_2: the largest singular value (exact) or the power method on v -> M v."""
    if method not in NORM_METHODS:
        raise SplitlabError(f"unknown norm method {method!r}; choose one of: {', '.join(NORM_METHODS)}")
    if matrix.numel() == 0:
        return 0.0
    if method == "svd":
        return float(torch.linalg.matrix_norm(matrix, ord=2))
    return power_iteration(lambda v: matrix @ v, matrix.shape[1], dtype=matrix.dtype, **power)


@dataclass(frozen=True)
class Node:
    """phi = rho(affine(*[phi_i for i in inputs])) with Lip(rho) = `activation`; or, with `bounds`, a node
    whose partial derivatives are bounded by the given numbers (one per input)."""
    name: str
    inputs: tuple[str, ...]
    affine: Callable[..., torch.Tensor] | None = None
    bounds: tuple[float, ...] | None = None
    activation: float = 1.0

    def __post_init__(self) -> None:
        if (self.affine is None) == (self.bounds is None):
            raise ValueError(f"node {self.name!r} needs exactly one of affine or bounds")
        if self.bounds is not None and len(self.bounds) != len(self.inputs):
            raise ValueError(f"node {self.name!r}: {len(self.bounds)} bounds for {len(self.inputs)} inputs")


def partial_norms(node: Node, dims: Mapping[str, int], method: str = "svd") -> tuple[float, ...]:
    """||d_i g|| for each predecessor i: the spectral norm of the affine map's Jacobian in input i (at 0;
    an affine map's Jacobian is the same everywhere), times the activation's Lipschitz constant."""
    if node.bounds is not None:
        return tuple(node.activation * b for b in node.bounds)
    zeros = [torch.zeros(dims[i], dtype=torch.float64) for i in node.inputs]
    norms = []
    for k in range(len(node.inputs)):
        def along(v, k=k):
            return node.affine(*[v if j == k else z for j, z in enumerate(zeros)])
        jacobian = torch.autograd.functional.jacobian(along, zeros[k])
        norms.append(node.activation * spectral_norm(jacobian, method))
    return tuple(norms)


def autolip(nodes: Sequence[Node], inputs: Mapping[str, float], dims: Mapping[str, int], *,
            method: str = "svd") -> dict[str, float]:
    """Alg. 2 over `nodes` in topological order; `inputs` maps each graph input to its L_0 (1 for the
    variable, 0 for a constant); `dims` gives the size of every input and of every `bounds` node (an
    affine node's size is read off its output). Returns L for every node."""
    lipschitz = dict(inputs)
    dims = dict(dims)
    for node in nodes:
        missing = [i for i in node.inputs if i not in lipschitz]
        if missing:
            raise ValueError(f"node {node.name!r} reads {missing} before they are computed")
        norms = partial_norms(node, dims, method)
        if node.affine is not None:
            dims[node.name] = node.affine(*[torch.zeros(dims[i], dtype=torch.float64) for i in node.inputs]).numel()
        lipschitz[node.name] = sum(n * lipschitz[i] for n, i in zip(norms, node.inputs))
    return lipschitz


def chain(matrices: Sequence[torch.Tensor], *, activation: float = 1.0, prefix: str = "layer") -> list[Node]:
    """A feed-forward chain x -> rho(M_1 x + b_1) -> ... (Definition 1) as nodes reading 'input'."""
    nodes, previous = [], "input"
    for h, m in enumerate(matrices, 1):
        nodes.append(Node(f"{prefix}{h}", (previous,), affine=lambda a, m=m: m @ a, activation=activation))
        previous = f"{prefix}{h}"
    return nodes

"""The matrices U the lemmas are about, and a fixed (non-trainable) layer that applies one.

Every builder takes the sizes, a `torch.Generator` and a dtype, so a check can swap the kind of U
by name: an orthogonal U must leave the protocol unchanged, a `gaussian` (not orthogonal) U is the
deliberately broken variant that must not.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from vfl.errors import SplitlabError


def orthogonal(rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A Haar-random matrix with orthonormal rows (rows <= cols): square U has U U^T = U^T U = I.

    QR of a Gaussian matrix with the signs of R's diagonal moved into Q (Haar-distributed, as the JAST paper's Lemma 1 assumes).
    """
    if rows > cols:
        raise ValueError(f"orthonormal rows need rows <= cols, got {rows}x{cols}")
    a = torch.randn(cols, rows, generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(a)                      # q: cols x rows, orthonormal columns
    q = q * torch.sign(torch.diagonal(r))
    return q.T.contiguous().to(dtype)


def permutation(rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A random permutation matrix (orthogonal, and Adam is equivariant to it)."""
    _square(rows, cols, "permutation")
    return torch.eye(rows, dtype=dtype)[torch.randperm(rows, generator=gen)]


def sign_flip(rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A random diagonal matrix of +-1 (orthogonal, and Adam is equivariant to it)."""
    _square(rows, cols, "sign-flip")
    signs = torch.randint(0, 2, (rows,), generator=gen).to(dtype) * 2 - 1
    return torch.diag(signs)


def gaussian(rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A dense Gaussian matrix scaled like an orthogonal one, but not orthogonal: the broken variant."""
    return (torch.randn(rows, cols, generator=gen, dtype=torch.float64) / cols ** 0.5).to(dtype)


def identity(rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """U = I: orthogonal, but it hides nothing (Corollary 1's degenerate case)."""
    _square(rows, cols, "identity")
    return torch.eye(rows, dtype=dtype)


def _square(rows: int, cols: int, kind: str) -> None:
    if rows != cols:
        raise ValueError(f"a {kind} matrix is square, got {rows}x{cols}")


TRANSFORMS: dict[str, Callable[[int, int, torch.Generator, torch.dtype], torch.Tensor]] = {
    "orthogonal": orthogonal,
    "permutation": permutation,
    "sign-flip": sign_flip,
    "identity": identity,
    "gaussian": gaussian,
}


def make_transform(kind: str, rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """U of the named kind, `rows x cols`."""
    if kind not in TRANSFORMS:
        raise SplitlabError(f"unknown transform {kind!r}; choose one of: {', '.join(TRANSFORMS)}")
    return TRANSFORMS[kind](rows, cols, gen, dtype)


def orthogonality_error(u: torch.Tensor) -> float:
    """max |U U^T - I| (rows orthonormal); 0 for an orthogonal or semi-orthogonal U."""
    eye = torch.eye(u.shape[0], dtype=u.dtype)
    return float((u @ u.T - eye).abs().max())


class FixedTransform(nn.Module):
    """x -> x U with U a buffer, not a parameter: the client's non-trainable orthogonal layer."""

    def __init__(self, u: torch.Tensor):
        super().__init__()
        self.register_buffer("u", u.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.u

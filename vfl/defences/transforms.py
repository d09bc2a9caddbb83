"""Secret orthogonal transforms of the feature party's input (JAST, Semenov et al., arXiv 2412.11689, Lemmas 1-3).

A secret, fixed orthogonal matrix U applied to the flattened input, x -> xU. A dense first layer absorbs it
exactly (W -> U^T W), so accuracy is unchanged and an attacker that knows only the architecture can at best
recover xU; a convolution cannot absorb a dense U, so for CNN clients the transform scrambles the pixel layout
the convolution relies on.

- `orthogonal`: dense U (d x d) from the QR decomposition of a Gaussian matrix, signs fixed so the draw is
  Haar-distributed; the input keeps its shape.
- `semi-orthogonal`: U (d x d') with d' >= d and orthonormal rows (U U^T = I_d); the client then takes d'
  features, so only clients with a flat dense input (mlp, small-mlp) can use it.
- `patch-orthogonal`: one U (p*p*C square) applied to every non-overlapping p x p patch, which the Mixer's patch
  embedding absorbs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from vfl.defences.base import ClientDefence, seed_option
from vfl.defences.spec import DefenceSettings, DefenceSpec, Where
from vfl.errors import SplitlabError
from vfl.options import integer, option

__all__ = ["random_orthogonal", "OrthogonalTransform", "SemiOrthogonalTransform", "PatchOrthogonalTransform",
           "ORTHOGONAL", "SEMI_ORTHOGONAL", "PATCH_ORTHOGONAL", "DEFAULT_PATCH", "MAX_MATRIX_BYTES"]

JAST = "Semenov et al., Just a Simple Transformation is Enough for Data Protection in Vertical Federated Learning " \
       "(arXiv 2412.11689)"

MAX_MATRIX_BYTES = 256 * 2**20
"""semi-orthogonal's secret matrix is d x dim float64 (and QR costs d^2 * dim); dim is bounded by this."""

DEFAULT_PATCH = 4
"""The Mixer's patch size (4 x 4 on CIFAR-10)."""


def random_orthogonal(rows: int, cols: int | None = None, seed: int = 0) -> torch.Tensor:
    """A Haar-random matrix with orthonormal rows (rows <= cols) or columns, in float64.

    QR of a Gaussian matrix, with the signs of R's diagonal moved into Q so the law is uniform.
    """
    cols = rows if cols is None else cols
    g = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(max(rows, cols), min(rows, cols), generator=g, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    q = q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, torch.ones(()))
    return q if rows >= cols else q.T


class _SecretMatrix(ClientDefence):
    """A defence that multiplies by a fixed secret `matrix` (float64, as drawn)."""

    matrix: torch.Tensor
    secret_transform = True
    _converted: tuple[tuple[torch.device, torch.dtype], torch.Tensor] | None = None

    def matrix_like(self, x: torch.Tensor) -> torch.Tensor:
        """The matrix on x's device and dtype, converted once rather than at every batch."""
        key = (x.device, x.dtype)
        if self._converted is None or self._converted[0] != key:
            self._converted = (key, self.matrix.to(device=x.device, dtype=x.dtype))
        return self._converted[1]


class OrthogonalTransform(_SecretMatrix):
    """x -> flatten(x) U, reshaped back; U is d x d orthogonal (square) and kept secret by the client."""

    name = "orthogonal"

    def __init__(self, input_shape: tuple[int, ...], seed: int = 0):
        self.shape = tuple(input_shape)
        self.matrix = random_orthogonal(math.prod(self.shape), seed=seed)

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return (x.flatten(1) @ self.matrix_like(x)).view(x.shape)


class SemiOrthogonalTransform(_SecretMatrix):
    """x -> flatten(x) U with U d x d' (d' >= d, U U^T = I_d): the client sees d' features."""

    name = "semi-orthogonal"

    def __init__(self, input_shape: tuple[int, ...], dim: int, seed: int = 0):
        dim = SEMI_ORTHOGONAL.checked("dim", dim)
        _fits_semi_orthogonal(dim, tuple(input_shape))
        self.dim = dim
        self.matrix = random_orthogonal(math.prod(input_shape), dim, seed=seed)

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x.flatten(1) @ self.matrix_like(x)

    def input_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (self.dim,)


class PatchOrthogonalTransform(_SecretMatrix):
    """The same orthogonal U (p*p*C square) applied to every non-overlapping p x p patch of an image."""

    name = "patch-orthogonal"

    def __init__(self, input_shape: tuple[int, ...], patch: int = DEFAULT_PATCH, seed: int = 0):
        patch = PATCH_ORTHOGONAL.checked("patch", patch)
        _fits_patch(patch, tuple(input_shape))
        self.patch = patch
        self.matrix = random_orthogonal(input_shape[0] * patch * patch, seed=seed)

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        n, c, h, w = x.shape
        p = self.patch
        patches = x.view(n, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(n, h // p, w // p, c * p * p)
        mixed = patches @ self.matrix_like(x)
        return mixed.view(n, h // p, w // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(n, c, h, w)


def _fits_semi_orthogonal(dim: int, shape: tuple[int, ...]) -> None:
    size = math.prod(shape)
    if dim < size:
        raise SplitlabError(f"semi-orthogonal dim={dim} must be at least the input size {size}")
    if size * dim * 8 > MAX_MATRIX_BYTES:
        raise SplitlabError(f"semi-orthogonal dim={dim} needs a {size} x {dim} float64 matrix of "
                            f"{size * dim * 8 / 2**20:.0f} MiB; use dim <= {MAX_MATRIX_BYTES // (8 * size)}")


def _fits_patch(patch: int, shape: tuple[int, ...]) -> None:
    if len(shape) != 3:
        raise SplitlabError("patch-orthogonal needs image inputs (C, H, W)")
    if shape[1] % patch or shape[2] % patch:
        raise SplitlabError(f"patch-orthogonal patch={patch} must divide the image size {shape[1]}x{shape[2]}")


@dataclass(frozen=True, kw_only=True)
class OrthogonalSettings(DefenceSettings):
    seed: int = seed_option("the secret matrix")


@dataclass(frozen=True, kw_only=True)
class SemiOrthogonalSettings(DefenceSettings):
    dim: int = option(help="Columns d' of U (d x d', d' >= the input size d): the features the client takes.",
                      check=integer(low=1, high=MAX_MATRIX_BYTES // 8))
    seed: int = seed_option("the secret matrix")


@dataclass(frozen=True, kw_only=True)
class PatchSettings(DefenceSettings):
    patch: int = option(DEFAULT_PATCH, "Side p of the square patches (it must divide the image's sides).",
                        integer(low=1, high=4096))
    seed: int = seed_option("the secret matrix")


def _where_shape(where: Where) -> tuple[int, ...]:
    if where.input_shape is None:
        raise SplitlabError("an input transform is built for a known input shape")
    return tuple(where.input_shape)


ORTHOGONAL = DefenceSpec(
    name="orthogonal", point="input", title="a secret dense orthogonal transform of the flattened input (x -> xU)",
    paper=JAST, settings=OrthogonalSettings, example="orthogonal:seed=3",
    build=lambda s, where: OrthogonalTransform(_where_shape(where), s.seed))

SEMI_ORTHOGONAL = DefenceSpec(
    name="semi-orthogonal", point="input",
    title="a secret semi-orthogonal map to d' >= d features (U U^T = I), for flat-input bottom models",
    paper=JAST, settings=SemiOrthogonalSettings, example="semi-orthogonal:dim=1024", needs=("flat-input",),
    fits=lambda s, where: where.input_shape is None or _fits_semi_orthogonal(s.dim, tuple(where.input_shape)),
    reshapes=lambda s, shape: (s.dim,),
    build=lambda s, where: SemiOrthogonalTransform(_where_shape(where), s.dim, s.seed))

PATCH_ORTHOGONAL = DefenceSpec(
    name="patch-orthogonal", point="input",
    title="one secret orthogonal transform of every non-overlapping p x p patch (absorbed by a patch embedding)",
    paper=JAST, settings=PatchSettings, example="patch-orthogonal:patch=4", needs=("image-input",),
    fits=lambda s, where: where.input_shape is None or _fits_patch(s.patch, tuple(where.input_shape)),
    build=lambda s, where: PatchOrthogonalTransform(_where_shape(where), s.patch, s.seed))

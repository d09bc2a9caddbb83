"""Pixel metrics on (N, C, H, W) batches: MSE, PSNR, SSIM, min-max normalisation, one-to-one matching.

Every metric returns one value per image, shape (N,). PSNR and SSIM clamp to [0,1] first, because
attacks optimise unconstrained pixels and a value outside the displayable range is not a better or
worse leak; plain MSE leaves the scale to the caller.
"""
from __future__ import annotations

import numpy as np
import torch

from vfl.errors import SplitlabError

PSNR_CAP_DB = 100.0
"""PSNR reported for identical images (MSE 0) instead of +inf, so means and JSON stay finite.
100 dB is an MSE of 1e-10, far below any visible difference."""


def check_pair(a: torch.Tensor, b: torch.Tensor, *, images: bool) -> None:
    """Refuse mismatched shapes early, with a message that names them."""
    if a.shape != b.shape:
        raise SplitlabError(f"shapes differ: reconstruction {tuple(a.shape)} vs target {tuple(b.shape)}")
    if images and a.dim() != 4:
        raise SplitlabError(f"expected images shaped (N, C, H, W), got {tuple(a.shape)}")


def _per_example_mean(x: torch.Tensor) -> torch.Tensor:
    """Mean over all non-batch dimensions, in float32 so half-precision inputs do not lose digits."""
    return x.float().flatten(1).mean(dim=1)


def image_mse(x_rec: torch.Tensor, x_true: torch.Tensor) -> torch.Tensor:
    """Per-image mean squared error, shape (N,). No clamping: callers decide the scale."""
    check_pair(x_rec, x_true, images=False)
    return _per_example_mean((x_rec.float() - x_true.float()) ** 2)


def activation_mse(h_rec: torch.Tensor, h_true: torch.Tensor) -> torch.Tensor:
    """Per-example MSE over all non-batch dims, shape (N,): how well a cut-layer activation was fitted."""
    check_pair(h_rec, h_true, images=False)
    return _per_example_mean((h_rec.float() - h_true.float()) ** 2)


def minmax_normalise(x: torch.Tensor) -> torch.Tensor:
    """Per-image min-max to [0,1] over all non-batch dims (the JAST paper's step before its "MSE X").

    A constant image has no range to stretch and maps to all zeros rather than NaN.
    """
    flat = x.float().flatten(1)
    low = flat.min(dim=1, keepdim=True).values
    span = flat.max(dim=1, keepdim=True).values - low
    scaled = (flat - low) / span.clamp_min(torch.finfo(flat.dtype).tiny)
    return torch.where(span > 0, scaled, torch.zeros_like(flat)).view_as(x)


def psnr(
    x_rec: torch.Tensor, x_true: torch.Tensor, *, data_range: float = 1.0, max_db: float | None = PSNR_CAP_DB
) -> torch.Tensor:
    """Per-image PSNR in dB, shape (N,), after clamping both inputs to [0, data_range].

    Identical images have infinite PSNR; it is capped at `max_db` (100 dB) so that means, standard
    deviations and JSON stay finite. Pass `max_db=None` to get +inf instead.
    """
    check_pair(x_rec, x_true, images=True)
    mse = image_mse(x_rec.clamp(0.0, data_range), x_true.clamp(0.0, data_range))
    db = 10.0 * torch.log10(data_range**2 / mse)  # mse 0 -> +inf
    return db if max_db is None else db.clamp(max=max_db)


def best_match_psnr(x_rec: torch.Tensor, x_true: torch.Tensor, *, max_db: float | None = PSNR_CAP_DB) -> torch.Tensor:
    """Per target, the PSNR of its most similar reconstruction, shape (N_true,): FedLeak's scoring ("for each
    image, we find the most similar reconstructed image"), where two targets may pick the same reconstruction.
    Each pair is scored by `psnr` itself, so this is never below the one-to-one (Hungarian) pairing's
    per-image PSNR, which gives each reconstruction to one target only."""
    if x_rec.dim() != 4 or x_rec.shape[1:] != x_true.shape[1:]:
        raise SplitlabError(f"cannot match {tuple(x_rec.shape)} against {tuple(x_true.shape)}")
    return torch.stack([psnr(x_rec, target.expand_as(x_rec), max_db=max_db).max() for target in x_true])


def ssim(x_rec: torch.Tensor, x_true: torch.Tensor, *, gaussian_weights: bool = False) -> torch.Tensor:
    """Per-image SSIM, shape (N,), with scikit-image on [0,1]-clamped inputs (data_range 1).

    Defaults are scikit-image's (7x7 uniform window, sample covariance), which fit 28x28 images.
    `gaussian_weights=True` uses Wang et al.'s 11x11 Gaussian window (sigma 1.5) instead. RGB images
    are scored per channel and averaged (channel_axis).
    """
    check_pair(x_rec, x_true, images=True)
    if min(x_rec.shape[-2:]) < 7:
        raise SplitlabError(f"SSIM needs images of at least 7x7, got {tuple(x_rec.shape[-2:])}")
    options = {"gaussian_weights": True, "sigma": 1.5, "use_sample_covariance": False} if gaussian_weights else {}
    channel_axis = -1 if x_rec.shape[1] > 1 else None
    from skimage.metrics import structural_similarity     # scikit-image (and scipy) load when SSIM is scored

    values = [
        structural_similarity(r, t, data_range=1.0, channel_axis=channel_axis, **options)
        for r, t in zip(_numpy_images(x_rec), _numpy_images(x_true))
    ]
    return torch.tensor(values, dtype=torch.float32, device=x_rec.device)


def ssim_global(x_rec: torch.Tensor, x_true: torch.Tensor, *, data_range: float = 1.0) -> torch.Tensor:
    """Per-image SSIM from the whole image's statistics, shape (N,): the formula as the AWA paper writes it,
    (2 mu_x mu_y + c1)(2 sigma_xy + c2) / ((mu_x^2 + mu_y^2 + c1)(sigma_x^2 + sigma_y^2 + c2)), with c1 =
    (0.01 H)^2, c2 = (0.03 H)^2, H the data range, means and (population) moments over every pixel and
    channel, on [0,1]-clamped inputs. No sliding window: one value per image pair, which forgives local
    noise that the windowed `ssim` (scikit-image, 7x7) penalises."""
    check_pair(x_rec, x_true, images=True)
    a, b = x_rec.detach().clamp(0, 1).flatten(1).double(), x_true.detach().clamp(0, 1).flatten(1).double()
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    mu_a, mu_b = a.mean(1), b.mean(1)
    var_a, var_b = a.var(1, correction=0), b.var(1, correction=0)
    cov = ((a - mu_a[:, None]) * (b - mu_b[:, None])).mean(1)
    value = (2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return value.float()


def _numpy_images(x: torch.Tensor) -> np.ndarray:
    """[0,1]-clamped float64 CPU copy laid out as skimage wants: (N, H, W, C), or (N, H, W) for grayscale."""
    x = x.detach().clamp(0, 1).double().cpu()
    return x[:, 0].numpy() if x.shape[1] == 1 else x.permute(0, 2, 3, 1).numpy()


def match_pairs(x_rec: torch.Tensor, x_true: torch.Tensor, *, cost: str = "mse") -> torch.Tensor:
    """One-to-one matching: a LongTensor `perm` such that `x_rec[perm][j]` is paired with `x_true[j]`.

    Gradient inversion returns a batch in arbitrary order, so scoring must first pair each
    reconstruction with its target; the Hungarian assignment minimises the total per-pair MSE.
    Works on any shape (images or activations). With more reconstructions than targets, the best
    subset is chosen and `perm` has len(x_true) entries.
    """
    if cost != "mse":
        raise SplitlabError(f"unknown matching cost {cost!r}; use 'mse'")
    if x_rec.shape[1:] != x_true.shape[1:]:
        raise SplitlabError(f"cannot match {tuple(x_rec.shape)} against {tuple(x_true.shape)}")
    if len(x_rec) < len(x_true):
        raise SplitlabError(f"cannot match {len(x_rec)} reconstructions one-to-one to {len(x_true)} targets")
    a, b = x_rec.detach().flatten(1).double(), x_true.detach().flatten(1).double()
    pair_mse = torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist") ** 2 / a.shape[1]
    from scipy.optimize import linear_sum_assignment      # scipy loads when a batch is matched

    rows, cols = linear_sum_assignment(pair_mse.cpu().numpy())
    perm = np.empty(len(x_true), dtype=np.int64)
    perm[cols] = rows
    return torch.from_numpy(perm).to(x_rec.device)

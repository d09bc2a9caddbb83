"""Perceptual metrics on [0,1] images: LPIPS and FID, with pretrained backbones read from local files.

Both are built from a local weight file (`attacks.metrics.weights`) and never download; a loader returns
`Unavailable(reason)` when the file is absent, or raises `SplitlabError` with `require=True`.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attacks.metrics.pixel import check_pair
from attacks.metrics.weights import FID_WEIGHTS_FILE, LPIPS_BACKBONES, Unavailable, local_weights, unavailable
from vfl.errors import SplitlabError


def _to_rgb(x: torch.Tensor) -> torch.Tensor:
    """Repeat a grayscale channel three times: LPIPS and Inception backbones take RGB."""
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


# --------------------------------------------------------------------------- LPIPS


@dataclass(eq=False)
class LpipsMetric:
    """LPIPS with a locally loaded backbone; call it on [0,1] images to get per-image distances (N,).

    `min_size`: images with a side shorter than this are bilinearly upsampled first, because
    AlexNet's pooling needs at least 31 pixels (MNIST's 28x28 becomes 32x32; CIFAR's 32x32 is scored
    at its own size, as most papers do).
    """

    model: torch.nn.Module
    net: str
    weights: Path
    min_size: int = 32

    def __call__(self, x_rec: torch.Tensor, x_true: torch.Tensor) -> torch.Tensor:
        check_pair(x_rec, x_true, images=True)
        self.model.to(x_rec.device)
        with torch.no_grad():
            a, b = (self._prepare(x) for x in (x_rec, x_true))
            return self.model(a, b).flatten().float()

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        """Clamp to [0,1], make RGB, upsample if too small, then scale to LPIPS's [-1,1]."""
        x = _to_rgb(x.detach().float().clamp(0, 1))
        h, w = x.shape[-2:]
        if min(h, w) < self.min_size:
            size = (max(h, self.min_size), max(w, self.min_size))
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
        return 2 * x - 1


def load_lpips(
    net: str = "alex",
    backbone_weights: Path | None = None,
    hub_dir: Path | None = None,
    *,
    require: bool = False,
) -> LpipsMetric | Unavailable:
    """Build LPIPS without any download, or say why not.

    The `lpips` package ships its linear-layer weights; its backbone normally downloads through
    torchvision. Here the backbone starts random (`pnet_rand=True`) and is filled from
    `backbone_weights` or torchvision's file in the torch hub cache, mapping `features.{i}.*` onto
    LPIPS's `slice{k}.{i}.*`.
    """
    if net not in LPIPS_BACKBONES:
        raise SplitlabError(f"unknown LPIPS net {net!r}; choose one of {', '.join(LPIPS_BACKBONES)}")
    display, filename = LPIPS_BACKBONES[net]
    path, state = local_weights("LPIPS", f"{display} weights", filename, backbone_weights, hub_dir, net,
                                "--lpips-weights", require)
    if isinstance(state, Unavailable):
        return state
    from lpips import LPIPS               # lpips (and torchvision) load only when the metric is built

    with warnings.catch_warnings():  # lpips passes torchvision's deprecated `pretrained=False`
        warnings.simplefilter("ignore", UserWarning)
        model = LPIPS(pretrained=True, net=net, pnet_rand=True, verbose=False)
    backbone = model.net.state_dict()
    mapped = {}
    for key, tensor in backbone.items():
        source = "features." + key.split(".", 1)[1]  # slice{k}.{i}.weight -> features.{i}.weight
        if source not in state or state[source].shape != tensor.shape:
            return unavailable(f"LPIPS: {path} is not torchvision {display} weights (bad or missing {source})", require)
        mapped[key] = state[source]
    model.net.load_state_dict(mapped)
    return LpipsMetric(model=model.eval(), net=net, weights=path)


# --------------------------------------------------------------------------- FID


def frechet_distance(feats_a: np.ndarray, feats_b: np.ndarray) -> float:
    """Frechet distance between Gaussians fitted to two feature sets (rows are samples).

    The same quantity as `pytorch_fid.fid_score.calculate_frechet_distance` on (mean, covariance),
    computed without a 2048x2048 `sqrtm` (17-75 s on a 2-core CPU, and numerically shaky for the
    rank-deficient covariances of small sets): with covariances S_a = L_a L_a^T and S_b = L_b L_b^T,
    Tr sqrt(S_a S_b) is the sum of singular values of L_a^T L_b. Tiny negative round-off is clipped to 0.
    """
    a, b = np.asarray(feats_a, dtype=np.float64), np.asarray(feats_b, dtype=np.float64)
    if a.ndim != 2 or a.shape[1:] != b.shape[1:]:
        raise SplitlabError(f"feature sets must be (N, D) with equal D, got {a.shape} and {b.shape}")
    if min(len(a), len(b)) < 2:
        raise SplitlabError("FID needs at least 2 images per set to estimate a covariance")
    factor_a, factor_b = _covariance_factor(a), _covariance_factor(b)
    mean_term = float(np.sum((a.mean(axis=0) - b.mean(axis=0)) ** 2))
    trace_sqrt = float(np.linalg.svd(factor_a.T @ factor_b, compute_uv=False).sum())
    distance = mean_term + float(np.sum(factor_a**2)) + float(np.sum(factor_b**2)) - 2.0 * trace_sqrt
    return max(distance, 0.0)


def _covariance_factor(x: np.ndarray) -> np.ndarray:
    """L with L @ L.T equal to the sample covariance (ddof 1), with min(N, D) columns to stay cheap."""
    n, d = x.shape
    centred = (x - x.mean(axis=0)) / math.sqrt(n - 1)
    if n <= d:
        return centred.T
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred)
    return eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))


@dataclass(eq=False)
class FidMetric:
    """FID on 2048-d Inception pool features of [0,1] images (grayscale repeated to RGB, resized to 299).

    With few images (the JAST paper compares 10 against 10) the covariances have rank below 10 out of
    2048, so the value is dominated by sampling noise: compare such numbers only at equal set sizes.
    """

    model: torch.nn.Module
    weights: Path
    batch_size: int = 50

    def features(self, x: torch.Tensor) -> np.ndarray:
        """Pool features (N, 2048) as float64 on CPU, computed in batches to bound memory at 299x299."""
        if x.dim() != 4:
            raise SplitlabError(f"expected images shaped (N, C, H, W), got {tuple(x.shape)}")
        self.model.to(x.device)
        with torch.no_grad():
            chunks = [
                self.model(_to_rgb(part.detach().float().clamp(0, 1))).flatten(1).double().cpu()
                for part in x.split(self.batch_size)
            ]
        return torch.cat(chunks).numpy()

    def __call__(self, real: torch.Tensor, fake: torch.Tensor) -> float:
        return frechet_distance(self.features(real), self.features(fake))


class _InceptionPool(torch.nn.Module):
    """What pytorch-fid's `InceptionV3(output_blocks=[3])` computes: resize to 299x299 (bilinear), scale
    [0,1] to [-1,1], then the FID Inception up to its 2048-d average pool, shape (N, 2048, 1, 1)."""

    def __init__(self, layers: torch.nn.Sequential):
        super().__init__()
        self.layers = layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        return self.layers(2 * x - 1)


def _fid_inception(state: dict[str, torch.Tensor]) -> _InceptionPool:
    """pytorch-fid's FID Inception with `state` loaded, assembled as `pytorch_fid.inception.fid_inception_v3`
    does but without its last step, `load_state_dict_from_url`, which downloads when the hub cache lacks
    the file: torchvision's Inception v3 built without weights (`weights=None`, no init since every
    tensor is loaded), pytorch-fid's FID blocks swapped in, and the state dict loaded strictly (a
    missing, unexpected or mis-shaped key raises RuntimeError)."""
    from pytorch_fid import inception as fid_inception      # loaded only when FID is built
    from torchvision.models import inception_v3

    net = inception_v3(weights=None, aux_logits=False, num_classes=1008, init_weights=False)
    net.Mixed_5b = fid_inception.FIDInceptionA(192, pool_features=32)
    net.Mixed_5c = fid_inception.FIDInceptionA(256, pool_features=64)
    net.Mixed_5d = fid_inception.FIDInceptionA(288, pool_features=64)
    net.Mixed_6b = fid_inception.FIDInceptionC(768, channels_7x7=128)
    net.Mixed_6c = fid_inception.FIDInceptionC(768, channels_7x7=160)
    net.Mixed_6d = fid_inception.FIDInceptionC(768, channels_7x7=160)
    net.Mixed_6e = fid_inception.FIDInceptionC(768, channels_7x7=192)
    net.Mixed_7b = fid_inception.FIDInceptionE_1(1280)
    net.Mixed_7c = fid_inception.FIDInceptionE_2(2048)
    net.load_state_dict(state)  # the classifier (fc) is loaded too, so a file for another network fails here
    layers = torch.nn.Sequential(
        net.Conv2d_1a_3x3, net.Conv2d_2a_3x3, net.Conv2d_2b_3x3, net.maxpool1,
        net.Conv2d_3b_1x1, net.Conv2d_4a_3x3, net.maxpool2,
        net.Mixed_5b, net.Mixed_5c, net.Mixed_5d, net.Mixed_6a, net.Mixed_6b, net.Mixed_6c, net.Mixed_6d, net.Mixed_6e,
        net.Mixed_7a, net.Mixed_7b, net.Mixed_7c, net.avgpool,
    )
    return _InceptionPool(layers).requires_grad_(False).eval()


def load_fid(
    weights: Path | None = None, hub_dir: Path | None = None, *, require: bool = False
) -> FidMetric | Unavailable:
    """Build pytorch-fid's Inception from a local file, or say why not; never downloads.

    The file is read first (`weights`, else the torch hub cache) and loaded into the network that
    `_fid_inception` assembles, so pytorch-fid's downloading loader is never called.
    """
    path, state = local_weights("FID", "pytorch-fid's Inception weights", FID_WEIGHTS_FILE, weights, hub_dir, "fid",
                                "--fid-weights", require)
    if isinstance(state, Unavailable):
        return state
    try:
        model = _fid_inception(state)
    except RuntimeError as err:  # load_state_dict: missing, unexpected or mis-shaped keys
        return unavailable(f"FID: {path} does not fit pytorch-fid's Inception ({str(err).splitlines()[0]})", require)
    return FidMetric(model=model, weights=path)

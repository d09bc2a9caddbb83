"""Image-reconstruction metrics on the [0,1] pixel scale, for (N, C, H, W) batches (C = 1 or 3).

Conventions (DESIGN.md sections 5-6):

- One reporting scale: images are compared in [0,1] after undoing any normalisation. Scoring clamps
  reconstructions to [0,1] before plain MSE, PSNR and SSIM, because attacks optimise unconstrained
  pixels and a value outside the displayable range is not a better or worse leak.
- Reconstructions come back in arbitrary order in gradient inversion, so batches can be matched
  one-to-one (Hungarian assignment on per-pair MSE) before scoring.
- LPIPS and FID need pretrained backbones. They are read from the torch hub cache or a given path
  and never downloaded; when absent the loader returns `Unavailable(reason)` (the caller writes
  `null` and the reason into metrics.json) or, with `require=True`, raises `SplitlabError`.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from lpips import LPIPS
from pytorch_fid import inception as fid_inception
from scipy.optimize import linear_sum_assignment
from skimage.metrics import structural_similarity

from vfl.errors import SplitlabError

PSNR_CAP_DB = 100.0
"""PSNR reported for identical images (MSE 0) instead of +inf, so means and JSON stay finite.
100 dB is an MSE of 1e-10, far below any visible difference."""

LPIPS_BACKBONES = {
    # LPIPS net name -> (display name, torchvision checkpoint file that torch hub would cache)
    "alex": ("AlexNet", "alexnet-owt-7be5be79.pth"),
    "vgg": ("VGG16", "vgg16-397923af.pth"),
    "squeeze": ("SqueezeNet 1.1", "squeezenet1_1-b8a52dc0.pth"),
}
FID_WEIGHTS_FILE = "pt_inception-2015-12-05-6726825d.pth"
"""pytorch-fid's port of the TensorFlow FID Inception, as cached by `load_state_dict_from_url`."""


# --------------------------------------------------------------------------- availability


@dataclass(frozen=True)
class Unavailable:
    """A metric that cannot be computed here; `reason` is one line naming the fix."""

    reason: str


def _unavailable(reason: str, require: bool) -> Unavailable:
    """Return the reason as a value, or raise it when the caller asked for the metric to be required."""
    if require:
        raise SplitlabError(reason)
    return Unavailable(reason)


def _hub_checkpoint(filename: str, hub_dir: Path | None) -> Path:
    """Where torch hub caches `filename` (`<hub_dir>/checkpoints/`), hub_dir defaulting to torch's."""
    return Path(hub_dir if hub_dir is not None else torch.hub.get_dir()) / "checkpoints" / filename


def _read_state_dict(path: Path) -> dict[str, torch.Tensor] | str:
    """Load a tensor-only state dict on CPU, or return a one-line reason why it cannot be read."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # corrupt, truncated, or not a plain tensor checkpoint
        first_line = (str(err).strip().splitlines() or [""])[0]
        return f"cannot read {path}: {type(err).__name__}: {first_line}"
    if not isinstance(state, dict):
        return f"{path} holds a {type(state).__name__}, not a state dict"
    return state


# --------------------------------------------------------------------------- checks and helpers


def _check_pair(a: torch.Tensor, b: torch.Tensor, *, images: bool) -> None:
    """Refuse mismatched shapes early, with a message that names them."""
    if a.shape != b.shape:
        raise SplitlabError(f"shapes differ: reconstruction {tuple(a.shape)} vs target {tuple(b.shape)}")
    if images and a.dim() != 4:
        raise SplitlabError(f"expected images shaped (N, C, H, W), got {tuple(a.shape)}")


def _per_example_mean(x: torch.Tensor) -> torch.Tensor:
    """Mean over all non-batch dimensions, in float32 so half-precision inputs do not lose digits."""
    return x.float().flatten(1).mean(dim=1)


def _to_rgb(x: torch.Tensor) -> torch.Tensor:
    """Repeat a grayscale channel three times: LPIPS and Inception backbones take RGB."""
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


# --------------------------------------------------------------------------- pixel metrics


def image_mse(x_rec: torch.Tensor, x_true: torch.Tensor) -> torch.Tensor:
    """Per-image mean squared error, shape (N,). No clamping: callers decide the scale."""
    _check_pair(x_rec, x_true, images=False)
    return _per_example_mean((x_rec.float() - x_true.float()) ** 2)


def activation_mse(h_rec: torch.Tensor, h_true: torch.Tensor) -> torch.Tensor:
    """Per-example MSE over all non-batch dims, shape (N,): how well a cut-layer activation was fitted."""
    _check_pair(h_rec, h_true, images=False)
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
    _check_pair(x_rec, x_true, images=True)
    mse = image_mse(x_rec.clamp(0.0, data_range), x_true.clamp(0.0, data_range))
    db = 10.0 * torch.log10(data_range**2 / mse)  # mse 0 -> +inf
    return db if max_db is None else db.clamp(max=max_db)


def ssim(x_rec: torch.Tensor, x_true: torch.Tensor, *, gaussian_weights: bool = False) -> torch.Tensor:
    """Per-image SSIM, shape (N,), with scikit-image on [0,1]-clamped inputs (data_range 1).

    Defaults are scikit-image's (7x7 uniform window, sample covariance), which fit 28x28 images.
    `gaussian_weights=True` uses Wang et al.'s 11x11 Gaussian window (sigma 1.5) instead. RGB images
    are scored per channel and averaged (channel_axis).
    """
    _check_pair(x_rec, x_true, images=True)
    if min(x_rec.shape[-2:]) < 7:
        raise SplitlabError(f"SSIM needs images of at least 7x7, got {tuple(x_rec.shape[-2:])}")
    options = {"gaussian_weights": True, "sigma": 1.5, "use_sample_covariance": False} if gaussian_weights else {}
    channel_axis = -1 if x_rec.shape[1] > 1 else None
    values = [
        structural_similarity(r, t, data_range=1.0, channel_axis=channel_axis, **options)
        for r, t in zip(_numpy_images(x_rec), _numpy_images(x_true))
    ]
    return torch.tensor(values, dtype=torch.float32, device=x_rec.device)


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
    rows, cols = linear_sum_assignment(pair_mse.cpu().numpy())
    perm = np.empty(len(x_true), dtype=np.int64)
    perm[cols] = rows
    return torch.from_numpy(perm).to(x_rec.device)


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
        _check_pair(x_rec, x_true, images=True)
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


def _local_weights(metric: str, what: str, filename: str, given: Path | None, hub_dir: Path | None, name: str,
                   option: str, require: bool) -> tuple[Path, dict | Unavailable]:
    """A metric's weight file read from `given` or the torch hub cache, or why it cannot be (naming the
    command that fetches it and the option that points at it)."""
    path = Path(given) if given is not None else _hub_checkpoint(filename, hub_dir)
    if not path.is_file():
        return path, _unavailable(f"{metric} needs {what} ({filename}) at {path}; run `splitlab weights --download "
                                  f"{name}`, put them there or pass {option}", require)
    state = _read_state_dict(path)
    return path, _unavailable(f"{metric}: {state}", require) if isinstance(state, str) else state


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
    path, state = _local_weights("LPIPS", f"{display} weights", filename, backbone_weights, hub_dir, net,
                                 "--lpips-weights", require)
    if isinstance(state, Unavailable):
        return state
    with warnings.catch_warnings():  # lpips passes torchvision's deprecated `pretrained=False`
        warnings.simplefilter("ignore", UserWarning)
        model = LPIPS(pretrained=True, net=net, pnet_rand=True, verbose=False)
    backbone = model.net.state_dict()
    mapped = {}
    for key, tensor in backbone.items():
        source = "features." + key.split(".", 1)[1]  # slice{k}.{i}.weight -> features.{i}.weight
        if source not in state or state[source].shape != tensor.shape:
            return _unavailable(f"LPIPS: {path} is not torchvision {display} weights (bad or missing {source})", require)
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
                self.model(_to_rgb(part.detach().float().clamp(0, 1)))[0].flatten(1).double().cpu()
                for part in x.split(self.batch_size)
            ]
        return torch.cat(chunks).numpy()

    def __call__(self, real: torch.Tensor, fake: torch.Tensor) -> float:
        return frechet_distance(self.features(real), self.features(fake))


def load_fid(
    weights: Path | None = None, hub_dir: Path | None = None, *, require: bool = False
) -> FidMetric | Unavailable:
    """Build pytorch-fid's Inception from a local file, or say why not; never downloads.

    pytorch-fid fetches its weights with `load_state_dict_from_url`, which downloads when the hub
    cache lacks the file. The file is checked first, and that loader is patched only while the model
    is built, to hand over the already-read state dict.
    """
    path, state = _local_weights("FID", "pytorch-fid's Inception weights", FID_WEIGHTS_FILE, weights, hub_dir, "fid",
                                 "--fid-weights", require)
    if isinstance(state, Unavailable):
        return state
    try:
        with mock.patch.object(fid_inception, "load_state_dict_from_url", lambda *args, **kwargs: state):
            model = fid_inception.InceptionV3([fid_inception.InceptionV3.BLOCK_INDEX_BY_DIM[2048]])
    except RuntimeError as err:  # load_state_dict: missing, unexpected or mis-shaped keys
        return _unavailable(f"FID: {path} does not fit pytorch-fid's Inception ({str(err).splitlines()[0]})", require)
    return FidMetric(model=model.eval(), weights=path)


# --------------------------------------------------------------------------- scoring


def score_reconstruction(
    x_rec: torch.Tensor,
    x_true: torch.Tensor,
    *,
    match: bool = False,
    lpips: LpipsMetric | Unavailable | None = None,
    fid: FidMetric | Unavailable | None = None,
) -> dict:
    """Score reconstructions against targets with the lab's shared keys, as plain floats for JSON.

    Reconstructions are clamped to [0,1] first (targets must already be in [0,1]). With `match`,
    they are paired one-to-one to the targets (Hungarian, per-pair MSE) before scoring. `psnr` is the
    mean of per-image PSNRs (capped at 100 dB), `psnr_std` the population std. `image_mse_minmax`
    min-max-normalises each reconstruction (not the target), as the JAST paper does. Every metric
    left `None` has its reason under `unavailable`.
    """
    low, high = float(x_true.min()), float(x_true.max())
    if low < -1e-6 or high > 1 + 1e-6:
        raise SplitlabError(f"targets must be in [0,1] (undo normalisation first), got [{low:.3g}, {high:.3g}]")
    raw = x_rec.detach()
    perm = match_pairs(raw.clamp(0, 1), x_true) if match else None
    if perm is not None:
        raw = raw[perm]
    _check_pair(raw, x_true, images=True)
    rec = raw.clamp(0, 1)
    per_image = {
        "image_mse": image_mse(rec, x_true),
        "image_mse_minmax": image_mse(minmax_normalise(raw), x_true),
        "psnr": psnr(rec, x_true),
        "ssim": ssim(rec, x_true),
    }
    unavailable: dict[str, str] = {}
    lpips_values = _optional_metric("lpips", lpips, unavailable, lambda m: m(rec, x_true))
    if len(x_true) < 2 and isinstance(fid, FidMetric):
        fid = Unavailable("FID needs at least 2 images per set to estimate a covariance")
    fid_value = _optional_metric("fid", fid, unavailable, lambda m: m(x_true, rec))
    return {
        "n_images": len(x_true),
        "image_mse": float(per_image["image_mse"].mean()),
        "image_mse_minmax": float(per_image["image_mse_minmax"].mean()),
        "psnr": float(per_image["psnr"].mean()),
        "psnr_max": float(per_image["psnr"].max()),
        "psnr_std": float(per_image["psnr"].std(correction=0)),
        "ssim": float(per_image["ssim"].mean()),
        "lpips": None if lpips_values is None else float(lpips_values.mean()),
        "fid": fid_value,
        "matched": match,
        "perm": None if perm is None else perm.tolist(),
        "per_image": {
            **{name: values.tolist() for name, values in per_image.items()},
            "lpips": None if lpips_values is None else lpips_values.tolist(),
        },
        "unavailable": unavailable,
    }


def _optional_metric(
    name: str,
    metric: LpipsMetric | FidMetric | Unavailable | None,
    unavailable: dict[str, str],
    compute: Callable,
):
    """Run an optional metric, or record why it has no value (not requested, or unavailable)."""
    if metric is None:
        unavailable[name] = "not requested"
        return None
    if isinstance(metric, Unavailable):
        unavailable[name] = metric.reason
        return None
    return compute(metric)


# --------------------------------------------------------------------------- one scoring path for every attack

IMAGE_KEYS = ("image_mse", "image_mse_minmax", "psnr", "psnr_max", "psnr_std", "ssim", "lpips", "fid")
BASELINE_KEYS = ("image_mse", "psnr", "ssim")

METRICS_SCHEMA = {
    # key -> meaning; every attack's metrics.json has these keys (null with a reason under `unavailable`)
    "attack": "attack name (unsplit, fsha, dlg, idlg, invgrad)",
    "preset": "the dotted preset the settings started from",
    "n_targets": "number of private images the attack reconstructs",
    "image_mse": "MSE on [0,1] after clamping the reconstruction, per image, then mean over kept targets",
    "image_mse_minmax": "MSE after min-max normalising each reconstruction (the JAST paper's 'MSE X')",
    "psnr": "mean per-image PSNR in dB on [0,1] (capped at 100 dB)",
    "psnr_max": "best per-image PSNR",
    "psnr_std": "population std of per-image PSNR",
    "ssim": "mean per-image SSIM (scikit-image, 7x7 window) on [0,1]",
    "lpips": "mean LPIPS (AlexNet) or null when its weights are not here",
    "fid": "FID between targets and reconstructions or null (weights absent, or fewer than 2 images)",
    "label_accuracy": "multiset accuracy of the labels the attack inferred; null when it infers none",
    "baselines": "the same image scores for trivial answers on the same targets: zero image, each target's "
                 "mean as a constant image, the attack's initial guess",
    "n_trials": "engine trials (restarts, or one per target)",
    "per_target": "whether trial t reconstructs target t (UnSplit, FSHA) or trials are restarts (HFL)",
    "best_trial": "restart attacks: the lowest-loss trial that did not diverge; null otherwise",
    "diverged_trials": "indices of trials stopped by a non-finite loss (never scored)",
    "per_trial": "per trial: loss, diverged, and its image scores where it reconstructs something on its own",
    "per_image": "per target: the image scores of the answer",
    "matched": "whether the answer was paired one-to-one with the targets (Hungarian, per-pair MSE) first",
    "steps": "optimisation steps (or protocol rounds) the attack ran",
    "seconds": "wall time of the attack (device work included)",
    "seconds_per_step": "seconds / steps",
    "trials_mode": "batched, sequential, or the attack's own loop",
    "unavailable": "metric -> why it has no value",
    "extras": "attack-specific quantities under names that say what they are",
}
"""The schema of every attack's metrics.json (also the README's table; tests check commands against it)."""


def _image_scores(x: torch.Tensor, x_true: torch.Tensor) -> dict[str, float]:
    rec = x.clamp(0, 1)
    return {"image_mse": float(image_mse(rec, x_true).mean()), "psnr": float(psnr(rec, x_true).mean()),
            "ssim": float(ssim(rec, x_true).mean())}


def baselines(x_true: torch.Tensor, initial: torch.Tensor | None = None) -> dict[str, dict[str, float] | None]:
    """Scores of trivial answers on the same targets: the floor every attack's score is read against."""
    flat_mean = x_true.flatten(1).mean(1).view(-1, *[1] * (x_true.dim() - 1))
    return {"zero": _image_scores(torch.zeros_like(x_true), x_true),
            "mean": _image_scores(flat_mean.expand_as(x_true), x_true),
            "initial": None if initial is None else _image_scores(initial.float(), x_true)}


def score(reconstruction, x_true: torch.Tensor, y_true: torch.Tensor | None = None, *,
          lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None) -> dict:
    """metrics.json for any attack's `attacks.result.Reconstruction` against the private targets.

    The answer (the best restart, or each target's own trial) is scored on [0,1] with
    `score_reconstruction`; a restart attack's answer is matched one-to-one to a batch of more than one
    image first. Diverged targets are left out and listed; when nothing is left, the image metrics are
    null with the reason. Every restart is scored too (`per_trial`). Label accuracy where the attack
    infers labels. Baselines on the same targets beside the scores.
    """
    rec = reconstruction
    x_true = x_true.detach().float().cpu()
    answer = rec.images.detach().float().cpu()
    kept = rec.kept
    match = not rec.per_target and len(x_true) > 1
    diverged = [int(i) for i in torch.nonzero(rec.diverged.cpu()).flatten()]
    metrics: dict = {"attack": rec.attack, "preset": rec.preset, "n_targets": len(x_true), "n_trials": rec.n_trials,
                     "per_target": rec.per_target, "best_trial": rec.best_trial, "diverged_trials": diverged,
                     "steps": rec.steps, "seconds": rec.seconds, "seconds_per_step": rec.seconds / max(rec.steps, 1),
                     "trials_mode": rec.mode, "label_rule": rec.label_rule}
    initial = rec.initial_images
    metrics["baselines"] = baselines(x_true[kept], None if initial is None else initial.detach().cpu()[kept]) \
        if bool(kept.any()) else None
    per_trial = []
    for t in range(rec.n_trials):
        entry = {"trial": t, "loss": float(rec.loss[t]), "diverged": t in diverged}
        if not rec.per_target and t not in diverged:
            s = score_reconstruction(rec.trials[t].detach().float().cpu(), x_true, match=match)
            entry.update({k: s[k] for k in ("image_mse", "psnr", "ssim")})
            if rec.labels is not None and y_true is not None:
                entry["label_accuracy"] = label_accuracy(rec.labels[t], y_true)
        per_trial.append(entry)
    metrics["per_trial"] = per_trial
    if not bool(kept.any()):
        reason = "every trial diverged"
        metrics.update({k: None for k in IMAGE_KEYS})
        metrics.update({"label_accuracy": None, "matched": match, "perm": None, "per_image": None,
                        "unavailable": {k: reason for k in IMAGE_KEYS + ("label_accuracy",)}})
    else:
        s = score_reconstruction(answer[kept], x_true[kept], match=match, lpips=lpips, fid=fid)
        metrics.update({k: s[k] for k in IMAGE_KEYS})
        labels = rec.answer_labels
        accuracy = None
        if labels is not None and y_true is not None:
            accuracy = label_accuracy(labels.cpu()[kept], y_true.cpu()[kept])
        else:
            s["unavailable"]["label_accuracy"] = "the attack infers no labels"
        metrics.update({"label_accuracy": accuracy, "matched": match, "perm": s["perm"], "per_image": s["per_image"],
                        "unavailable": s["unavailable"]})
        if labels is not None:
            metrics["labels_predicted"] = labels.cpu()[kept].tolist()
        if y_true is not None:
            metrics["labels_true"] = y_true.cpu()[kept].tolist()
    metrics["extras"] = dict(rec.extras)
    return metrics


def label_accuracy(predicted: torch.Tensor, true: torch.Tensor) -> float:
    """Multiset accuracy: |predicted ∩ true| / B, counting repeated labels (order does not matter)."""
    predicted, true = predicted.detach().cpu().long().flatten(), true.detach().cpu().long().flatten()
    if len(true) == 0:
        return float("nan")
    classes = int(max(predicted.max(), true.max())) + 1
    overlap = torch.minimum(torch.bincount(predicted, minlength=classes), torch.bincount(true, minlength=classes))
    return float(overlap.sum()) / len(true)

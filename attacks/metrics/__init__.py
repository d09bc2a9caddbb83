"""Image-reconstruction metrics on the [0,1] pixel scale, for (N, C, H, W) batches (C = 1 or 3).

One module per concern:

- `weights`: where the pretrained weights of LPIPS and FID are looked for (the torch hub cache or a
  given path) and read; never downloaded.
- `pixel`: MSE, PSNR, SSIM, min-max normalisation and one-to-one (Hungarian) matching.
- `perceptual`: LPIPS and FID, built from those local weights.
- `schema`: the keys of every attack's metrics.json and what each means.
- `scoring`: `score`, the one scoring path from an attack's `Reconstruction` to metrics.json.

The names below are the ones the rest of the lab imports from `attacks.metrics`.
"""
from attacks.metrics.perceptual import FidMetric, LpipsMetric, frechet_distance, load_fid, load_lpips
from attacks.metrics.pixel import (
    PSNR_CAP_DB,
    activation_mse,
    best_match_psnr,
    image_mse,
    match_pairs,
    minmax_normalise,
    psnr,
    ssim,
    ssim_global,
)
from attacks.metrics.schema import BASELINE_KEYS, FEATURE_SCHEMA, IMAGE_KEYS, METRICS_SCHEMA
from attacks.metrics.scoring import (baselines, categorical_accuracy, feature_mse, label_accuracy, score,
                                     score_reconstruction)
from attacks.metrics.weights import FID_WEIGHTS_FILE, LPIPS_BACKBONES, Unavailable, hub_checkpoint

_hub_checkpoint = hub_checkpoint  # the name `splitlab weights` (attacks.weights_cli) imports

__all__ = [
    "BASELINE_KEYS", "FEATURE_SCHEMA", "FID_WEIGHTS_FILE", "IMAGE_KEYS", "LPIPS_BACKBONES", "METRICS_SCHEMA", "PSNR_CAP_DB",
    "FidMetric", "LpipsMetric", "Unavailable", "activation_mse", "baselines", "best_match_psnr", "categorical_accuracy",
    "feature_mse", "frechet_distance",
    "hub_checkpoint", "image_mse", "label_accuracy", "load_fid", "load_lpips", "match_pairs",
    "minmax_normalise", "psnr", "score", "score_reconstruction", "ssim", "ssim_global",
]

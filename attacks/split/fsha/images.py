"""FSHA's image scale ([-1, 1], 3x32x32) and back to the dataset's, and an endless batch stream of one split.

The victim's side of it (`to_fsha_images`, `from_fsha_images`, `BatchStream`) lives with the honest client in
`vfl.fsha_victim`, which a client process builds too (the referee scores in [0, 1] with it); the way back to the
dataset's shape is the attack's and the evaluation's."""
from __future__ import annotations

import torch
from torch.nn import functional as F

from attacks.kit import BatchStream, from_fsha_images, to_fsha_images

__all__ = ["to_fsha_images", "from_fsha_images", "to_dataset_images", "BatchStream"]


def to_dataset_images(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """FSHA images (N, 3, 32, 32) on [-1, 1] -> the dataset's own scale and shape: [0, 1], the channel
    mean when the dataset is grey, bilinearly resized to its (H, W). Undoes `to_fsha_images` up to the
    resampling; not clamped (scoring clamps)."""
    channels, height, width = shape
    x = from_fsha_images(x)
    if channels == 1:
        x = x.mean(dim=1, keepdim=True)
    if tuple(x.shape[-2:]) != (height, width):
        x = F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False)
    return x

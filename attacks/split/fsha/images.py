"""FSHA's image scale ([-1, 1], 3x32x32) and back to the dataset's, and an endless batch stream of one split."""
from __future__ import annotations

from typing import Iterator

import torch
from torch.nn import functional as F

from vfl.errors import SplitlabError
from vfl.models.fsha import INPUT_SHAPE

__all__ = ["to_fsha_images", "from_fsha_images", "to_dataset_images", "BatchStream"]


def to_fsha_images(x: torch.Tensor) -> torch.Tensor:
    """[0,1] images (N, 1 or 3, H, W) -> FSHA's inputs (N, 3, 32, 32) in [-1, 1].

    Grey images are resized bilinearly to 32x32 (half-pixel centres, as TF's `tf.image.resize`) and
    tiled to three channels; values are scaled by 2x - 1 and clipped to [-1, 1], as the FSHA data
    pipeline does with x / 127.5 - 1.
    """
    if tuple(x.shape[-2:]) != INPUT_SHAPE[1:]:
        x = F.interpolate(x, size=INPUT_SHAPE[1:], mode="bilinear", align_corners=False)
    if x.shape[1] == 1:
        x = x.expand(-1, INPUT_SHAPE[0], -1, -1)
    return (x * 2 - 1).clamp(-1, 1)


def from_fsha_images(x: torch.Tensor) -> torch.Tensor:
    """FSHA's [-1, 1] scale back to the lab's [0, 1] reporting scale (still 3x32x32)."""
    return (x + 1) / 2


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


class BatchStream:
    """Endless batches of one split on the device: reshuffled every pass, the last partial batch
    dropped (the FSHA pipeline's `batch(drop_remainder=True).repeat()`), converted by `to_fsha_images`.
    `last` is the batch handed out most recently."""

    def __init__(self, images: torch.Tensor, batch_size: int, order: torch.Generator, device: torch.device):
        if len(images) < batch_size:
            raise SplitlabError(f"a split has {len(images)} images, fewer than --batch-size {batch_size}")
        self.images = images.to(device)
        self.batch_size = batch_size
        self.order = order
        self._order = torch.empty(0, dtype=torch.long, device=device)
        self._position = 0
        self.last: torch.Tensor | None = None

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        if self._position + self.batch_size > len(self._order):
            self._order = torch.randperm(len(self.images), generator=self.order).to(self.images.device)
            self._position = 0
        index = self._order[self._position:self._position + self.batch_size]
        self._position += self.batch_size
        self.last = to_fsha_images(self.images[index])
        return self.last

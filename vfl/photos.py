"""`photos`: colour photographs and faces that ship inside scikit-image, as 3x32x32 images (no download).

The horizontal-FL papers attack colour photographs (CIFAR-10, ImageNet); the lab's other embedded set is
grey digits. This set cuts every sample photograph of scikit-image that is a natural colour photograph
into tiles: the image is resized (bilinear, anti-aliased) so its short side is 128 pixels and tiled into
non-overlapping 32x32 crops, row by row from the top left, the last partial column dropped. The faces are
the 100 face images of scikit-image's LFW subset (25x25 grey), resized to 32x32 and repeated over three
channels. Each source is one class; every class splits 80/20 into train and test by a fixed permutation.

| class | source (scikit-image) | licence as scikit-image states it | tiles |
|---|---|---|---|
| astronaut | `astronaut()`: Eileen Collins, NASA | public domain | 16 |
| cat | `chelsea()`: Stefan van der Walt | CC0 | 24 |
| coffee | `coffee()`: Rachel Michetti | CC0 | 24 |
| rocket | `rocket()`: SpaceX | public domain | 24 |
| galaxies | `hubble_deep_field()`: NASA | public domain | 16 |
| tissue | `immunohistochemistry()` | no known copyright restrictions | 16 |
| retina | `retina()`: Häggström | CC0 | 16 |
| motorcycle | `stereo_motorcycle()`, both views: Middlebury 2014 stereo | research benchmark | 40 |
| face | `lfw_subset()`, its 100 faces: Labeled Faces in the Wild | research benchmark | 100 |
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

__all__ = ["CLASSES", "load_photos", "PROVENANCE", "DRAWN"]

SIDE, TILE = 128, 32
CLASSES = ("astronaut", "cat", "coffee", "rocket", "galaxies", "tissue", "retina", "motorcycle", "face")
PROVENANCE = ("photos: 276 images, 3x32x32, tiles of scikit-image's sample photographs and its LFW faces "
              "(vfl/photos.py lists sources and licences); 80/20 train/test per class, fixed seed-0 permutation")
DRAWN = PROVENANCE.replace("fixed seed-0 permutation", "drawn from seed {seed}")


def _tiles(image) -> torch.Tensor:
    """(H, W, 3) uint8 -> (n, 3, 32, 32) in [0, 1]: resized to a 128-pixel short side, tiled row by row."""
    x = torch.from_numpy(image[..., :3].copy()).permute(2, 0, 1)[None].double() / 255
    h, w = x.shape[-2:]
    scale = SIDE / min(h, w)
    x = F.interpolate(x, size=(round(h * scale), round(w * scale)), mode="bilinear", antialias=True,
                      align_corners=False)[0].clamp(0, 1)
    rows, cols = x.shape[1] // TILE, x.shape[2] // TILE
    return torch.stack([x[:, r * TILE:(r + 1) * TILE, c * TILE:(c + 1) * TILE]
                        for r in range(rows) for c in range(cols)]).float()


def _faces() -> torch.Tensor:
    from skimage import data

    faces = torch.from_numpy(data.lfw_subset()[:100]).double()[:, None]          # 25x25 grey in [0, 1]
    faces = F.interpolate(faces, size=(TILE, TILE), mode="bilinear", antialias=True, align_corners=False)
    return faces.clamp(0, 1).expand(-1, 3, -1, -1).float().contiguous()


@functools.cache
def _sources() -> tuple[torch.Tensor, ...]:
    """Every class's images, in the class order."""
    from skimage import data

    left, right, _ = data.stereo_motorcycle()
    sources = [_tiles(data.astronaut()), _tiles(data.chelsea()), _tiles(data.coffee()), _tiles(data.rocket()),
               _tiles(data.hubble_deep_field()), _tiles(data.immunohistochemistry()), _tiles(data.retina()),
               torch.cat([_tiles(left), _tiles(right)]), _faces()]
    return tuple(sources)


def _arrays(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All images and labels, and a boolean test mask: the last fifth of each class's permutation drawn from `seed`
    (seed 0: the fixed split)."""
    sources = _sources()
    images = torch.cat(sources)
    labels = torch.cat([torch.full((len(s),), k, dtype=torch.long) for k, s in enumerate(sources)])
    test = torch.zeros(len(labels), dtype=torch.bool)
    order = torch.Generator().manual_seed(seed)
    start = 0
    for s in sources:                                   # the last fifth of each class's permutation is test
        perm = torch.randperm(len(s), generator=order) + start
        test[perm[len(s) - len(s) // 5:]] = True
        start += len(s)
    return images, labels, test


def load_photos(split: str, root=None, seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One split; `seed` None is the fixed split (the same as seed 0)."""
    images, labels, test = _arrays(0 if seed is None else seed)
    mask = test if split == "test" else ~test
    return images[mask], labels[mask]

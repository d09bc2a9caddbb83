"""Readers of the tabular sets that are downloaded (`splitlab datasets --download NAME`, or `--from PATH|URL`), in
their own file formats, and their `TabularSource`s. Each reader takes the file's text and returns (features
float64, labels int64), or raises a one-line `SplitlabError` naming the row that breaks the format.

- `criteo`: the Criteo Display Advertising Challenge (Kaggle, 2014) sample `dac_sample.txt` (100,000 rows of the
  competition's train.txt; any number of rows in this format is taken, e.g. a cut of train.txt given
  with --from, and the provenance records the count): tab-separated, no header, the click label, 13 integer counts, 26 hashed
  categories (8 hex digits), any field but the label possibly empty. The counts become sign(x) log(1 + |x|)
  (0 where missing) and are standardised on the training split; each category becomes log(1 + how often its value
  occurs in the training split) (0 where missing or unseen there): 39 features of fixed width without the
  millions of one-hot columns the raw categories would need.
- `german-credit`: the Statlog German Credit data (Hofmann, UCI, 1994; 1,000 applicants, 30% bad risks):
  `german.data`, space-separated, 20 attributes and the class (1 good, 2 bad); 13 categorical attributes coded
  A11..A202, one-hot over the codes the data set's documentation lists (56), and 7 numerical ones standardised:
  63 features.
"""
from __future__ import annotations

import numpy as np

from vfl.errors import SplitlabError
from vfl.tabular import TabularSource

CRITEO_COUNTS, CRITEO_CATEGORIES = 13, 26


def read_criteo(source: TabularSource, text: str, where: str, fix: str) -> tuple[np.ndarray, np.ndarray]:
    """Criteo's tab-separated rows: label, 13 integers, 26 hex categories (empty: missing)."""
    rows = text.splitlines()
    features = np.zeros((len(rows), CRITEO_COUNTS + CRITEO_CATEGORIES))
    labels = np.zeros(len(rows), dtype=np.int64)
    codes: list[dict[str, int]] = [{} for _ in range(CRITEO_CATEGORIES)]
    for i, row in enumerate(rows):
        fields = row.split("\t")
        if len(fields) != 1 + CRITEO_COUNTS + CRITEO_CATEGORIES:
            raise SplitlabError(f"{where} is not Criteo's format: row {i + 1} has {len(fields)} tab-separated fields, "
                                f"not 40; {fix}")
        if fields[0] not in ("0", "1"):
            raise SplitlabError(f"{where} is corrupt: row {i + 1}'s label {fields[0][:20]!r} is not 0 or 1; {fix}")
        labels[i] = int(fields[0])
        try:
            counts = [float(int(v)) if v else 0.0 for v in fields[1:1 + CRITEO_COUNTS]]
        except ValueError:
            raise SplitlabError(f"{where} is corrupt: row {i + 1} has a count that is not an integer; {fix}") from None
        features[i, :CRITEO_COUNTS] = np.sign(counts) * np.log1p(np.abs(counts))
        for j, value in enumerate(fields[1 + CRITEO_COUNTS:]):
            features[i, CRITEO_COUNTS + j] = codes[j].setdefault(value, len(codes[j])) if value else -1
    return features, labels


GERMAN_CATEGORIES = {        # attribute (1-based) -> its codes, as the data set's documentation lists them
    1: 4, 3: 5, 4: 11, 6: 5, 7: 5, 9: 5, 10: 3, 12: 4, 14: 3, 15: 3, 17: 4, 19: 2, 20: 2,
}
GERMAN_NUMERICAL = (2, 5, 8, 11, 13, 16, 18)


def _german_codes(attribute: int) -> list[str]:
    """A11..A14, A30..A34, A40..A410, A61..A65, ...: attributes 3 and 4 count from 0, the others from 1."""
    first = 0 if attribute in (3, 4) else 1
    return [f"A{attribute}{k}" for k in range(first, first + GERMAN_CATEGORIES[attribute])]


def read_german(source: TabularSource, text: str, where: str, fix: str) -> tuple[np.ndarray, np.ndarray]:
    """german.data: 20 space-separated attributes and the class; numerical attributes first, then the one-hot
    codes attribute by attribute."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    numbers, one_hot, labels = [], [], []
    for i, fields in enumerate(rows):
        if len(fields) != 21:
            raise SplitlabError(f"{where} is not german.data's format: row {i + 1} has {len(fields)} fields, not 21; "
                                f"{fix}")
        if fields[20] not in ("1", "2"):
            raise SplitlabError(f"{where} is corrupt: row {i + 1}'s class {fields[20][:20]!r} is not 1 or 2; {fix}")
        try:
            numbers.append([float(fields[a - 1]) for a in GERMAN_NUMERICAL])
        except ValueError:
            raise SplitlabError(f"{where} is corrupt: row {i + 1} has a numerical attribute that is not a number; "
                                f"{fix}") from None
        row = []
        for attribute in GERMAN_CATEGORIES:
            codes = _german_codes(attribute)
            if fields[attribute - 1] not in codes:
                raise SplitlabError(f"{where} is corrupt: row {i + 1}'s attribute {attribute} is "
                                    f"{fields[attribute - 1][:20]!r}, not one of {codes[0]}..{codes[-1]}; {fix}")
            row += [float(fields[attribute - 1] == code) for code in codes]
        one_hot.append(row)
        labels.append(int(fields[20]) - 1)             # 0 good, 1 bad
    if not rows:
        raise SplitlabError(f"{where} is empty; {fix}")
    return np.concatenate([np.array(numbers), np.array(one_hot)], axis=1), np.array(labels, dtype=np.int64)


CRITEO = TabularSource(
    package=None, distribution="", resource=("dac_sample.txt",), rows=None,
    features=CRITEO_COUNTS + CRITEO_CATEGORIES, classes=("no click", "click"), test_fraction=0.2, name="criteo",
    citation="Criteo Display Advertising Challenge (Kaggle, 2014), the 100,000-row sample dac_sample.txt Criteo "
             "released with it; counts as sign(x) log(1+|x|), categories as log(1 + their count in the training split)",
    licence="Criteo's terms for the challenge data (research use)", parse=read_criteo,
    url="http://labs.criteo.com/wp-content/uploads/2015/04/dac_sample.tar.gz", counted=CRITEO_CATEGORIES)

GERMAN_CREDIT = TabularSource(
    package=None, distribution="", resource=("german.data",), rows=1_000,
    features=len(GERMAN_NUMERICAL) + sum(GERMAN_CATEGORIES.values()), classes=("good", "bad"), test_fraction=0.2,
    name="german-credit",
    citation="Statlog (German Credit Data), Hofmann, UCI Machine Learning Repository (1994); 7 numerical attributes "
             "standardised, 13 categorical ones one-hot over their documented codes",
    licence="CC BY 4.0 (UCI)", parse=read_german, numerical=len(GERMAN_NUMERICAL),
    url="https://archive.ics.uci.edu/ml/machine-learning-databases/statlog/german/german.data")

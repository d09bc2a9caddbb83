"""The arithmetic behind the ledger's verdicts: intervals, the metric's own units, the trivial baselines and
the images behind a measurement. Pure Python (scipy's t quantile only), so `splitlab claims` needs no torch.

- `interval`: a mean and its two-sided 95% t-interval; `welch` for two unpaired groups; `share_interval` the
  exact (Clopper-Pearson) interval of a share of yes/no cells.
- `Scale`: how a metric is compared with the paper's number: a band in its own units (1 dB of PSNR, 1
  accuracy point, a factor 2 in MSE), and whether it is read on a log scale (ratios, not differences).
- `trivial`: the best of the trivial answers the cells record under `baselines.{zero,mean,initial,majority}`
  (the all-zero image, the per-target mean image, the attack's initial guess; for label inference, the
  majority class for every sample, leak AUC 0.5); no attack that does no better than these has
  reconstructed (or inferred) anything.
- `images_behind`: how many distinct images the selected cells attacked (the `images` column, or for
  results written before it, the batch from `index` on, the same on every seed); `images_fixed`: whether
  their seeds all attacked the same images (an interval over such seeds says nothing about other images).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scipy.special import betaincinv, stdtrit

__all__ = ["interval", "beats_trivial", "welch", "yes_count", "share_interval", "Scale", "DB", "POINTS", "FACTOR", "SSIM", "SHARE", "FLAG", "PLAIN",
           "value_of", "trivial", "BASELINES", "images_behind", "images_fixed"]

LEVEL = 0.95
BASELINES = ("zero", "mean", "initial", "majority", "unpoisoned")
"""The trivial answers an attack's metrics.json scores under `baselines` (docs/metrics.md): the first three for
an image attack (`mean`: each feature's training mean for a feature-inference attack), `majority` for a
label-inference attack, `unpoisoned` for a backdoor (the same victim trained without it, on the same queries)."""
BASELINE_WORDS = {"zero": "the all-zero image", "mean": "the mean image (features: the training mean)",
                  "initial": "the attack's initial guess", "majority": "the majority class for every sample",
                  "unpoisoned": "the same model trained unpoisoned"}


def interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """Mean and a two-sided t-interval (the mean itself at both ends for fewer than two values)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = float(stdtrit(len(values) - 1, 0.5 + level / 2)) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def beats_trivial(values: Sequence[float], trivial: Sequence[float], higher: bool = True,
                  two_sided: bool = False) -> bool:
    """Whether an attack's per-seed values are above their own trivial baselines beyond the seeds' spread: the 95%
    t-interval of the paired gaps excludes 0 on the attacker's side (either side where it may flip its rule)."""
    gaps = [(v - t) if higher else (t - v) for v, t in zip(values, trivial)]
    if len(gaps) < 2:
        return False
    _, low, high = interval(gaps)
    return low > 0 or (two_sided and high < 0)


def welch(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """mean(a) - mean(b) with Welch's t-interval (unpaired groups); no interval with fewer than two each."""
    mean = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:
        return mean, mean, mean
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return mean, mean, mean
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(stdtrit(dof, 0.5 + level / 2)) * math.sqrt(va + vb)
    return mean, mean - half, mean + half


def yes_count(values: Sequence[float]) -> int:
    """How many of these yes/no values say yes (1). A value that is neither 1 nor 0 is refused: it is not a yes or
    a no, and rounding it to one would give an exact interval to a share that is not one."""
    odd = [v for v in values if v not in (0.0, 1.0)]
    if odd:
        raise ValueError(f"a yes/no metric holds {odd[0]!r}, not 0 or 1")
    return sum(v == 1.0 for v in values)


def share_interval(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a share k / n: a t-interval on 0/1 values can leave [0, 1]."""
    alpha = 1 - level
    low = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, alpha / 2))
    high = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - alpha / 2))
    return low, high


@dataclass(frozen=True)
class Scale:
    """How a metric is compared with the paper's number.

    `band`: how far from the paper's number (or gap) still counts as meeting it, in the metric's own units;
    on a log scale a factor (2: within a factor 2). `margin`: how close to a trivial baseline counts as "at"
    it. `unit` is printed after the numbers."""
    name: str
    unit: str
    band: float
    margin: float
    log: bool = False
    bounds: tuple[float, float] | None = None
    """Where the metric lives (an accuracy or a share in [0, 1], SSIM in [-1, 1]): a t-interval of its mean over a
    few cells can reach past them, and is cut to them, its mean kept. The bounds are the scale's, so a metric read
    on it must live there too: a difference of two shares, which can be negative, belongs on another scale."""
    binary: bool = False
    """Each cell's value is a yes or a no (1 or 0, a switch): the mean is the share of cells that say yes and its
    interval the exact binomial one (`share_interval`), not a t-interval on the 0/1 values."""

    def within(self, low: float, high: float, values: Sequence[float]) -> tuple[float, float]:
        """An interval of the mean of `values` (on the axis) cut to the metric's bounds; left as it is where a value
        lies outside them (the metric is then not in this scale's units, a percentage say)."""
        if self.bounds is None or self.log or not all(self.bounds[0] <= v <= self.bounds[1] for v in values):
            return low, high
        return max(low, self.bounds[0]), min(high, self.bounds[1])

    def to_axis(self, value: float) -> float:
        """The value where differences are taken: log10 on a log scale."""
        return math.log10(value) if self.log else value

    def from_axis(self, value: float) -> float:
        return 10 ** value if self.log else value

    @property
    def axis_band(self) -> float:
        return math.log10(self.band) if self.log else self.band

    def words(self) -> str:
        return f"a factor {self.band:g}" if self.log else f"{self.band:g}{self.unit}"

    def difference(self, value: float) -> str:
        """A difference on the axis in words: a signed number, or a factor on a log scale."""
        return f"x{10 ** value:.3g}" if self.log else f"{value:+.3g}{self.unit}"


DB = Scale("PSNR", " dB", band=1.0, margin=0.1)
POINTS = Scale("accuracy", "", band=0.01, margin=0.01, bounds=(0.0, 1.0))
"""Accuracy as a fraction: the band is one accuracy point."""
FACTOR = Scale("MSE", "", band=2.0, margin=1.02, log=True)
"""Errors compared as ratios: within a factor 2 of the paper's; within 2% of a baseline is at it."""
SSIM = Scale("SSIM", "", band=0.05, margin=0.01, bounds=(-1.0, 1.0))
SHARE = Scale("share", "", band=0.05, margin=0.01, bounds=(0.0, 1.0))
"""Label and alignment accuracies, leak AUCs: five points."""
FLAG = Scale("share of cells", "", band=0.05, margin=0.01, bounds=(0.0, 1.0), binary=True)
"""A yes/no per cell (SplitGuard flagged the run): the share of cells that say yes, five points."""
PLAIN = Scale("value", "", band=0.0, margin=0.0)
"""A quantity with no paper number to meet (only a direction)."""


def value_of(row: Mapping[str, Any], metric: str) -> float | None:
    """A metric as a number: results.csv writes switches as True/False, read as 1 and 0."""
    raw = row.get(metric)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return float(raw.strip().lower() == "true")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def trivial(rows: Sequence[Mapping[str, Any]], metric: str, higher_is_better: bool):
    """(the best trivial answer's mean on `metric`, its name) over the cells, or None where the cells record no
    baseline for the metric (theory checks, accuracies, bounds)."""
    best = None
    for name in BASELINES:
        found = [v for v in (value_of(r, f"baselines.{name}.{metric}") for r in rows) if v is not None]
        if not found:
            continue
        mean = statistics.fmean(found)
        if best is None or (mean > best[0] if higher_is_better else mean < best[0]):
            best = (mean, BASELINE_WORDS[name])
    return best


def at_or_below(value: float, baseline: float, scale: Scale, higher_is_better: bool) -> bool:
    """The value is no better than the baseline (within the scale's margin)."""
    if scale.log:
        return value >= baseline / scale.margin if not higher_is_better else value <= baseline * scale.margin
    return value <= baseline + scale.margin if higher_is_better else value >= baseline - scale.margin


def images_behind(rows: Sequence[Mapping[str, Any]]) -> str:
    """How many distinct images the cells attacked, in words ("" when the cells are not image attacks)."""
    rows = [r for r in rows if r.get("batch_size") not in (None, "")]
    if not rows:
        return ""
    seeds = {str(r.get("seed")) for r in rows}
    if any(r.get("images") not in (None, "") for r in rows):
        drawn = {int(i) for r in rows for i in str(r.get("images") or "").split()}
        batches = {str(r.get("images")) for r in rows}
        if len(seeds) == 1 and len(batches) > 1:            # batches chosen by index, paired by it, not by seed
            return f"{len(drawn)} images ({len(batches)} batches by index, one seed each)"
        per_seed = {str(r.get("seed")): str(r.get("images")) for r in rows}
        varied = len(set(per_seed.values())) > 1
        return (f"{len(drawn)} distinct images over {len(seeds)} seed{'s' * (len(seeds) > 1)}" if varied
                else f"the same {len(drawn)} images on every seed")
    batch = max(int(float(r["batch_size"])) for r in rows)
    starts = {str(r.get("index")) for r in rows if r.get("index") not in (None, "")}
    if len(starts) > 1:
        return f"{batch * len(starts)} images ({len(starts)} batches of {batch} by index, one seed each)"
    return f"the same {batch} images on every seed (results written before seeds drew the images)"


def images_fixed(rows: Sequence[Mapping[str, Any]]) -> bool:
    """The cells attack images and have two or more seeds, and every seed attacked the same images (the
    `images` column, or for results written before it, the `index` the batch starts at)."""
    rows = [r for r in rows if r.get("batch_size") not in (None, "")]
    per_seed: dict[str, set] = {}
    for r in rows:
        drawn = r.get("images") if r.get("images") not in (None, "") else f"index {r.get('index')}"
        per_seed.setdefault(str(r.get("seed")), set()).add(str(drawn))
    return len(per_seed) >= 2 and len({frozenset(v) for v in per_seed.values()}) == 1

"""docs/results.md against the shipped results: every number printed under a shipped grid's name is in that
grid's file (a cell's value, a setting's mean or std over seeds, a paired difference between two settings, a
verdict's interval), a number the ledger quotes from a paper, or a setting of the grid; every other table of
measured numbers names the commit it came from.

The page is read in blocks: each starts at a heading or at a line opening with a bold label, and its label
is its first paragraph. A block whose label names a shipped grid (`shipped \\`NAME\\``, `--paper NAME`, or
\\`NAME\\` in its first parenthesis) and does not call itself an earlier run is checked number by number,
except its paragraphs that do ("an earlier run, commit 0123abc"); any other block with a table or a "±" of
measured numbers must name the commit it came from.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from splitlab.claims import LEDGER, judge
from splitlab.claims.results import RESULTS, read_csv
from splitlab.claims.stats import interval
from splitlab.sweep_file import parse_sweep, shipped

DOC = Path(__file__).resolve().parent.parent / "docs" / "results.md"
NUMBER = re.compile(r"(?<![\w.])[+\u2212-]?\d+\.\d+(?:e[+\u2212-]?\d+)?")
COMMIT = re.compile(r"commits? [0-9a-f]{7,40}")
EARLIER = re.compile(r"\bearlier\b[^.]*?\bcommits? [0-9a-f]{7,40}", re.S)
COLUMNS = re.compile(r"^(task_auc|defence_report\.splitguard_\w+|feature_mse|baselines\.(mean|initial)\.feature_mse|"
                     r"baselines\.majority\.label_accuracy|baselines\.unpoisoned\.(backdoor_success|accuracy)|"
                     r"backdoor_success|clean_model_(accuracy|success)|baselines\.(zero|mean)\.image_mse|psnr|ssim|psnr_best_match|ssim_global|image_mse|image_mse_minmax|label_accuracy|leak_auc|accuracy|activation_mse|"
                     r"seconds_per_step|alignment_accuracy|interpolation\.update_error|extras\.f|bo_scores\.\w+|extras\.training_interval_mse_pm1_final|"
                     r"baselines\.(zero|mean)\.psnr|matched_by_check\..*|matched|total|all_mean_below_bound|"
                     r"idlg_below_dlg_by_bound|attacks\.\w+\.(fit_mse|fit_mse_heldout|paper_fit_mse|L_R|bound_T|mean_error_T)|"
                     r"trajectory\.(psnr|ssim)\.\d+|extras\.bo\.f_per_trial\.\d+)$")
"""The columns whose values the page prints (a cell's other numbers would make almost any number admissible)."""
COMPARED = ("psnr", "ssim", "image_mse_minmax", "image_mse", "label_accuracy", "leak_auc", "accuracy", "activation_mse",
            "seconds_per_step")
"""The metrics whose paired differences between two settings of a grid the page may print."""


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """(label: the first paragraph, the block's lines) for every heading or bold-labelled paragraph."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("#") or line.startswith("**") or not found:
            found.append([])
        found[-1].append(line)
    return [("\n".join(lines).split("\n\n")[0], lines) for lines in found]


def paragraphs(lines: list[str]) -> list[str]:
    return "\n".join(lines).split("\n\n")


def grids_named(label: str) -> set[str]:
    names = set(shipped())
    head = label.split("):")[0].split(").")[0]
    found = set(re.findall(r"shipped `([a-z0-9-]+)`", label)) | set(re.findall(r"--paper ([a-z0-9-]+)", head))
    found |= set(re.findall(r"`([a-z0-9-]+)`", head))
    return found & names


def _numbers(line: str) -> list[str]:
    return NUMBER.findall(re.sub(r"`[^`]*`", "", line))


def _value(token: str) -> float:
    return float(token.replace("\u2212", "-"))


def _tolerance(token: str) -> float:
    mantissa, _, exponent = token.lstrip("+-\u2212").partition("e")
    digits = len(mantissa.split(".")[1])
    return 0.5 * 10 ** (-digits) * 10 ** (int(exponent.replace("\u2212", "-")) if exponent else 0) + 1e-12


def _floats(row: dict) -> dict[str, float]:
    out = {}
    for key, raw in row.items():
        try:
            out[key] = float(raw)
        except (TypeError, ValueError):
            continue
    return out


def admissible(grid: str) -> list[float]:
    """Every number the page may print under this grid's name."""
    rows = [r for r in read_csv(RESULTS / f"{grid}.csv") if r.get("status") == "ok"]
    sweep = parse_sweep(shipped()[grid], grid, f"{grid}.toml")
    with_seed = set(sweep.zipped) if "seed" in sweep.zipped else set()      # a key zipped with the seed is one
    swept = [k for k in sweep.swept_keys if k != "seed" and k not in with_seed]
    values: list[float] = []
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        values += [v for k, v in _floats(row).items() if COLUMNS.match(k)]
        groups.setdefault(tuple(row.get(k) for k in swept), []).append(row)
    for members in groups.values():
        for key in {k for r in members for k in _floats(r) if COLUMNS.match(k)}:
            found = [_floats(r)[key] for r in members if key in _floats(r)]
            values.append(statistics.fmean(found))
            if len(found) > 1:
                values.append(statistics.stdev(found))
    reported = set(parse_sweep(shipped()[grid], grid, f"{grid}.toml").report.get("metrics", [])) & set(COMPARED)
    for first in groups.values():
        for second in groups.values():
            for metric in reported:
                a = {r.get("seed"): _floats(r).get(metric) for r in first}
                b = {r.get("seed"): _floats(r).get(metric) for r in second}
                diffs = [a[k] - b[k] for k in a if k in b and a[k] is not None and b[k] is not None]
                values += diffs
                if len(diffs) > 1:
                    values += [*interval(diffs), statistics.stdev(diffs)]
    for claim in LEDGER:
        if claim.measure is not None and claim.measure.sweep == grid:
            verdict = judge(claim)
            values += [v for v in verdict.values.values() if isinstance(v, float)]
            values += [_value(t) for t in _numbers(verdict.lab)]
    values += [_value(t) for t in _numbers(shipped()[grid])]
    values += PAPERS
    return values + [100 * v for v in values]


PAPERS = [_value(t) for c in LEDGER for t in _numbers(" ".join([c.paper_numbers, c.claim, c.reduced]))]
PAPERS += [abs(getattr(c.measure.rule, attr)) for c in LEDGER if c.measure is not None
           for attr in ("gap", "value", "margin") if isinstance(getattr(c.measure.rule, attr, None), float)]
"""The papers' numbers as the ledger quotes them, and the gaps it derives from them."""


def _checked_blocks():
    out = []
    for label, lines in blocks(DOC.read_text()):
        on_file = sorted(g for g in grids_named(label) if (RESULTS / f"{g}.csv").is_file())
        if on_file and not EARLIER.search(label):
            out.append(pytest.param(lines, on_file, id=label[2:50]))
    return out


def unlisted(lines: list[str], grids: list[str]) -> list[str]:
    """The numbers of these lines (outside paragraphs labelled as earlier runs) that the grids' files lack."""
    allowed = [v for g in grids for v in admissible(g)]
    missing = []
    for paragraph in paragraphs(lines):
        if EARLIER.search(paragraph):
            continue
        for token in _numbers(paragraph):
            value, tolerance = _value(token), _tolerance(token)
            if not any(abs(abs(value) - abs(a)) <= tolerance for a in allowed):
                missing.append(token)
    return missing


def test_the_page_has_blocks_under_every_shipped_grid_it_prints():
    checked = {g for p in _checked_blocks() for g in p.values[1]}
    assert {"fedleak-baselines", "awa-cases", "tgias-temporal", "tgias-labels", "bounds-surrogate"} <= checked


@pytest.mark.slow
@pytest.mark.parametrize("lines, grids", _checked_blocks())
def test_every_number_under_a_shipped_grid_is_in_its_file(lines, grids):
    missing = unlisted(lines, grids)
    assert not missing, f"{lines[0][:80]}: not in {grids}: {missing}"


def test_every_other_table_of_measured_numbers_names_its_commit():
    unlabelled = []
    for label, lines in blocks(DOC.read_text()):
        measured = any(line.startswith("|") and _numbers(line) for line in lines) or any(
            re.search(r"± *\d", line) for line in lines)
        if not measured or label.startswith("**The paper's") or label.startswith("#"):
            continue
        grids = grids_named(label)
        if COMMIT.search(label) or any((RESULTS / f"{g}.csv").is_file() for g in grids):
            continue
        unlabelled.append(label[:80])
    assert not unlabelled, unlabelled


def test_the_checker_finds_a_wrong_number():
    """The sigmoid LeNet's label accuracies printed under the shipped ReLU-LeNet grid's name."""
    label = "**Label accuracy** (shipped `tgias-labels`, seeds 0-4):"
    assert grids_named(label) == {"tgias-labels"}
    wrong = [label, "b = 4 0.95 ± 0.11 (1, 1, 1, 1, 0.75), b = 8 0.95 ± 0.07"]
    assert unlisted(wrong, ["tgias-labels"])[0] == "0.95"
    right = [label, "b = 4 0.75 ± 0.00, b = 8 0.725 ± 0.10 (0.625, 0.75, 0.625, 0.875, 0.75)"]
    assert unlisted(right, ["tgias-labels"]) == []
    assert unlisted(["", "", "(an earlier run, commit b00fd62) gave 0.95"], ["tgias-labels"]) == []

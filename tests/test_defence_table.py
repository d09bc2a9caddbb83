"""The defence table (splitlab.defence_table) over the shipped results: every defence of the catalogue has a row or
an explicit reason it has none, the field-defences rows come from seeds that each drew their own split, and a row
whose undefended attack is no better than its trivial baseline says so."""
from __future__ import annotations

import pytest

from splitlab.claims.stats import beats_trivial
from splitlab.defence_table import GRIDS, NOT_MEASURED, NOTHING, IMAGE_BASELINES, _arms, _flag, _numbers, table
from vfl.defences import registry


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


@pytest.fixture(scope="module")
def text() -> str:
    """The table over the shipped results (it reads every shipped grid and matrix: built once for the module)."""
    return table()


def test_every_defence_of_the_catalogue_has_a_row_or_a_reason(text):
    rows = _rows(text)
    missing = [name for name in registry.BUILTIN
               if not any(row.startswith(f"| `{name}`") or row.startswith(f"| `{name}:") for row in rows)
               and not (name in NOT_MEASURED and f"- `{name}` against {NOT_MEASURED[name][0]}: " in text)]
    assert not missing, f"catalogued defences with neither a row nor a reason: {missing}"


def test_a_reason_is_given_only_for_a_defence_with_no_row(text):
    rows = _rows(text)
    assert not [n for n in NOT_MEASURED if any(r.startswith((f"| `{n}`", f"| `{n}:")) for r in rows)]
    assert all(len(why) > 40 for _, why in NOT_MEASURED.values())


def test_the_field_defences_rows_vary_the_data_over_at_least_three_seeds(text):
    field_rows = [line for line in text.split("\n\n")[1].splitlines()[2:]]
    assert len(field_rows) >= len(GRIDS)
    for row in field_rows:
        seeds = row.split(" | ")[6]
        assert seeds.endswith("(its own draw)") and int(seeds.split()[0]) >= 3, row
        assert "--data-draw seed" in row, row


@pytest.mark.parametrize("values, trivial, higher, two_sided, beats", [
    ([0.96, 0.93, 0.98], [0.5, 0.5, 0.5], True, True, True),        # a leak AUC well above chance
    ([0.40, 0.54, 0.42], [0.5, 0.5, 0.5], True, True, False),       # around chance either way
    ([0.30, 0.32, 0.31], [0.5, 0.5, 0.5], True, True, True),        # below chance: a flipped rule leaks as much
    ([0.30, 0.32, 0.31], [0.5, 0.5, 0.5], True, False, False),      # ... unless the metric cannot be flipped
    ([0.198, 0.199, 0.196], [0.091, 0.10, 0.093], False, False, False),   # an MSE above the mean image's
    ([0.06, 0.055, 0.064], [0.091, 0.10, 0.093], False, False, True),
    ([0.16, 0.33, 0.28], [0.12, 0.30, 0.19], True, False, False),   # above on every seed, within the spread
    ([1.0], [0.5], True, False, False),                             # one seed is no interval
])
def test_beats_trivial_needs_the_paired_gap_clear_of_zero(values, trivial, higher, two_sided, beats):
    assert beats_trivial(values, trivial, higher, two_sided) is beats


def test_a_row_whose_undefended_attack_is_not_above_trivial_says_so(text):
    nopeek = [r for r in _rows(text) if r.startswith("| `nopeek:")]
    assert nopeek and all("measures nothing" in r for r in nopeek)      # UnSplit on the SmallMLP: worse than the mean
    labels = [r for r in _rows(text) if r.startswith("| `label-rr:")]
    assert labels and not any("measures nothing" in r for r in labels)


def test_a_row_names_the_metrics_its_undefended_attack_does_not_clearly_beat():
    assert _flag([], 2) == ""
    assert _flag(["MSE", "SSIM"], 2) == NOTHING
    partial = _flag(["SSIM"], 2)
    assert "in SSIM" in partial and "measures nothing" not in partial


def test_a_rows_trivial_baselines_are_read_once_a_seed_from_the_undefended_arm(text):
    # the baselines of a seed's draw are the same in both arms; pooling the arms would count each draw twice
    grid = next(g for g in GRIDS if g.baselines == IMAGE_BASELINES)     # the mean image differs by draw
    arms = _arms(grid)
    none = arms["none"]
    defended = next(rows for arm, rows in arms.items() if arm != "none")
    once = _numbers(none, grid.baselines)
    assert once in text
    assert _numbers(none + defended, grid.baselines) != once


def test_a_rows_command_uses_the_options_as_the_command_now_spells_them(text):
    # the shipped FSHA grids were run as `--level 1`; the command documents (and the table prints) `--cut-layer`
    fsha = [r for r in _rows(text) if "splitlab attack fsha" in r]
    assert fsha and all("--level" not in r and "--cut-layer 1 " in r for r in fsha)

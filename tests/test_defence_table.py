"""The defence table (splitlab.defence_table) over the shipped grids: every defence of the catalogue has a row or
the command that would measure it, and the field-defences rows come from seeds that each drew their own split."""
from __future__ import annotations

from splitlab.defence_table import GRIDS, table
from vfl.defences import registry


def test_every_defence_of_the_catalogue_is_in_the_table():
    text = table()
    missing = [name for name in registry.BUILTIN if f"`{name}" not in text]
    assert not missing, missing


def test_the_field_defences_rows_vary_the_data_over_at_least_three_seeds():
    field_rows = [line for line in table().split("\n\n")[1].splitlines()[2:]]
    assert len(field_rows) >= len(GRIDS)
    for row in field_rows:
        seeds = row.split(" | ")[6]
        assert seeds.endswith("(its own draw)") and int(seeds.split()[0]) >= 3, row
        assert "--data-draw seed" in row, row

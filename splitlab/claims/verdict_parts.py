"""The pieces every rule of `splitlab.claims.rules` words its verdict with: whether a guard found an arm failed,
the values a verdict records, the paper's gap and the least change that meets it, and the one-sample rules' read
of their cells."""
from __future__ import annotations

from typing import Optional

from splitlab.claims.cells import Guard, Rows, Verdict, level, shown
from splitlab.claims.stats import Scale

AT_TRIVIAL = "at a trivial baseline"
"""The verdict where the arm a claim needs working does no better than a trivial answer: the lab's attack does not
work in this setting, which says nothing about the paper (`model.MEANINGS`)."""


def columns_of(column) -> tuple[str, ...]:
    return column if isinstance(column, tuple) else (column,)


def arm_failed(found: Optional[Guard]) -> bool:
    return found is not None and found.failed


def with_guards(values: dict, found: Optional[Guard], other: Optional[Guard] = None) -> dict:
    extra = {} if other is None else {"reference_claimed": other.claimed, "reference_trivial": other.trivial}
    return {**values, **(found.values() if found is not None else {}), **extra}


def no_arm_text(label: str, found: Guard, other_label: str = "", other: Optional[Guard] = None) -> str:
    """No arm the claim reads beats the trivial baselines: the lab's attack does not work here."""
    text = found.text(label) + ("" if other is None else "; " + other.text(other_label))
    return "no arm beats the trivial baseline: " + text


def missing_text(name: str) -> str:
    return (f"the cells record no trivial baseline for {name}, so whether any side works cannot be told and "
            "nothing is reproduced")


def gap_target(gap: Optional[float], scale: Scale) -> Optional[float]:
    """The least change (on the scale's axis) that meets the paper's `gap` within the scale's band."""
    return None if gap is None else abs(scale.to_axis(gap)) - scale.axis_band


def over_cells(rule, rows: Rows):
    """(the selected cells, the metric's mean, low and high on the scale's axis, their count, the lab's words)
    for the one-sample rules (Level, Fails), or the verdict where no cell holds the metric."""
    chosen = rule.select.rows(rows)
    found = level(chosen, rule.metric, rule.scale)
    if found is None:
        return Verdict("not attempted", "no results", "the sweep has no cells for this setting")
    mean, low, high, n = found
    return chosen, mean, low, high, n, f"{rule.select.label}: {shown(rule.scale, mean, low, high)} over {n} cells"


def paper_words(gap: Optional[float], scale: Scale) -> str:
    if gap is None:
        return "the paper's claim"
    return f"the paper's {'x' if scale.log else ''}{gap:{'g' if scale.log else '+g'}}{scale.unit}"

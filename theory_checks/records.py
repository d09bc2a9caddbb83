"""The result record every check returns, and the tolerances it is judged against."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

Verdict = Literal["holds", "breaks"]

TOLERANCES: dict[torch.dtype, float] = {torch.float64: 1e-10, torch.float32: 1e-5}
"""Largest relative deviation still read as "equal" (float64 round-off over the checks' few hundred operations)."""

DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}


def tolerance_for(dtype: torch.dtype) -> float:
    return TOLERANCES[dtype]


@dataclass(frozen=True)
class CheckResult:
    """One executed claim.

    `measured` is a deviation: the claim holds when `measured <= tolerance` (for an inequality,
    `measured` is the largest normalised excess LHS - RHS, so a negative value is slack). The check
    states beforehand whether the claim should hold or break (`expected`); `matched` says whether
    the run agreed. `details` carries the secondary numbers and any finding in words.
    """
    name: str
    claim: str
    measured: float
    tolerance: float
    expected: Verdict
    observed: Verdict
    matched: bool
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def judge(cls, name: str, claim: str, measured: float, tolerance: float, expected: Verdict,
              details: dict[str, Any] | None = None, holds: bool | None = None) -> "CheckResult":
        """Build the record. `holds` defaults to `measured <= tolerance`; a check whose claim has a
        second condition (stated in its `details`) passes the combined answer explicitly."""
        if expected not in ("holds", "breaks"):
            raise ValueError(f"expected must be 'holds' or 'breaks', not {expected!r}")
        measured = float(measured)
        if holds is None:
            holds = measured <= tolerance       # NaN compares False: a NaN never "holds"
        observed: Verdict = "holds" if holds else "breaks"
        return cls(name, claim, measured, float(tolerance), expected, observed, observed == expected,
                   dict(details or {}))

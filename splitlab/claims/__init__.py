"""The ledger of the papers' headline claims, each with the lab's measurement and a computed verdict.

    from splitlab.claims import LEDGER, PAPERS, scoreboard
    for claim, verdict in scoreboard(): ...

One module per paper holds its claims (`CLAIMS`), the deviations that belong to its claims rather than to one
attack (`DEVIATIONS`) and the paper's values of its `*.paper` presets (`PAPER_PRESETS`, checked against the
registry by the tests). Verdicts are computed from the results shipped in `splitlab/results/` (`results.py`;
an earlier run's kept values where a sweep has none), or from a fresh run of the sweeps behind a claim
(`splitlab claims --run`). What each verdict means: `model.MEANINGS`.
"""
from __future__ import annotations

from typing import Iterator

from splitlab.claims import (awa, bounds, fedleak, ghazi, jast, label_inference, label_leakage, liu_bli, mid_claims,
                             nopeek_claims, splitguard_claims, tgias, unsplit_labels, vfl_benchmarks, vflair, yang_tpsl)
from splitlab.claims.model import Claim, Verdict
from splitlab.claims.results import earlier, rows

__all__ = ["PAPERS", "MODULES", "LEDGER", "PAPER_PRESETS", "scoreboard", "claims_for", "judge"]

MODULES = {m.PAPER: m for m in (jast, fedleak, awa, tgias, bounds, label_leakage, label_inference, unsplit_labels,
                                vflair, vfl_benchmarks, liu_bli, ghazi, yang_tpsl, mid_claims, nopeek_claims,
                                splitguard_claims)}
"""paper key -> its module (CLAIMS, PAPER_PRESETS, ATTACKS)."""
PAPERS = {key: m.CITATION for key, m in MODULES.items()}
"""paper key -> citation."""
LEDGER: tuple[Claim, ...] = tuple(c for m in MODULES.values() for c in m.CLAIMS)
PAPER_PRESETS = {name: values for m in MODULES.values() for name, values in m.PAPER_PRESETS.items()}
"""`*.paper` preset -> the paper's values of its settings fields."""


def claims_for(selector: str | None) -> list[Claim]:
    """Every claim, the claims of a paper (`fedleak`), or one claim by id; a one-line error otherwise."""
    from vfl.errors import SplitlabError

    if selector is None:
        return list(LEDGER)
    chosen = [c for c in LEDGER if c.paper == selector or c.id == selector]
    if not chosen:
        raise SplitlabError(f"no claim or paper {selector!r}; papers: {', '.join(PAPERS)} (claim ids: "
                            "`splitlab claims --json`)")
    return chosen


def judge(claim: Claim, results=None) -> Verdict:
    """The claim's verdict from these results (`results(sweep) -> rows or None`; default: the shipped ones,
    else an earlier run's kept values, named in the verdict)."""
    if claim.measure is None:
        return claim.judge(None)
    if results is not None:
        return claim.judge(results(claim.measure.sweep))
    shipped = rows(claim.measure.sweep)
    kept = earlier(claim.measure.sweep) if shipped is None else None
    return claim.judge(shipped) if kept is None else claim.judge(kept.rows, kept.source)


def scoreboard(selector: str | None = None, results=None) -> Iterator[tuple[Claim, Verdict]]:
    for claim in claims_for(selector):
        yield claim, judge(claim, results)

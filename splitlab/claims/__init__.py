"""The ledger of the papers' headline claims, each with the lab's measurement and a computed verdict.

    from splitlab.claims import LEDGER, PAPERS, scoreboard
    for claim, verdict in scoreboard(): ...

One module per paper holds its claims (`CLAIMS`) and the paper's values of its `*.paper` presets
(`PAPER_PRESETS`, checked against the registry by the tests). Verdicts are computed from the results shipped in
`splitlab/results/` (`results.py`), or from a fresh run of the sweeps behind a claim (`splitlab claims --run`).
"""
from __future__ import annotations

from typing import Iterator

from splitlab.claims import awa, bounds, fedleak, jast, label_inference, label_leakage, tgias, unsplit_labels
from splitlab.claims.model import Claim, Verdict
from splitlab.claims.results import rows

__all__ = ["PAPERS", "MODULES", "LEDGER", "PAPER_PRESETS", "scoreboard", "claims_for", "judge"]

MODULES = {m.PAPER: m for m in (jast, fedleak, awa, tgias, bounds, label_leakage, label_inference, unsplit_labels)}
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


def judge(claim: Claim, results=rows) -> Verdict:
    """The claim's verdict from these results (`results(sweep) -> rows or None`; default: the shipped ones)."""
    return claim.judge(None if claim.measure is None else results(claim.measure.sweep))


def scoreboard(selector: str | None = None, results=rows) -> Iterator[tuple[Claim, Verdict]]:
    for claim in claims_for(selector):
        yield claim, judge(claim, results)

"""docs/claims.md, written from the ledger, the shipped results and the declared deviations (through
`python -m splitlab.docs`, so a stale page fails the tests)."""
from __future__ import annotations

from splitlab.claims import LEDGER, MODULES, PAPERS, scoreboard
from splitlab.claims.cli import count, summary_line
from splitlab.claims.deviations import declared
from splitlab.claims.model import CHECKS, MEANINGS, VERDICTS
from splitlab.claims.results import earlier, provenance
from splitlab.claims.rules import RULES

__all__ = ["claims_page", "scoreboard_lines"]

INTRO = """\
# Claims

Every headline claim of the papers (a table, figure or theorem a reader would cite), the paper's own
numbers beside the lab's, and a verdict computed from the results shipped in `splitlab/results/`. A claim is
an **experiment** (the lab reruns what the paper ran, usually smaller) or an **exact check** (a theorem's step,
or the lab's own formula, checked in float64); the two are counted apart. What each verdict means, as the code
applies it (`splitlab/claims/model.py`):
"""

RULES_TEXT = """\
Comparisons are judged on paired seeds (the mean difference and its 95% t-interval; errors and times as
ratios), trends on their ends paired the same way, levels on their mean's interval, yes/no properties (and
levels of a yes/no per cell) on the share of cells with its exact interval. No measurement at or below a trivial baseline (the all-zero image, the
mean image, the attack's initial guess; for label inference, the majority class for every sample: `baselines`
in each cell's metrics.json) makes a claim reproduced;
where the arm a claim needs working does no better, the verdict is "at a trivial baseline", and where the cells
record none for a metric that has them, or the interval cannot tell, it is inconclusive. Both arms of a
comparison and both ends of a trend must work: a gap to a failed arm (an ablation that destroys the attack) is
partly at most, the direction holding, except where the failing arm is a defence's, which is its claim. A reduced
setting turns a contradiction of the paper's size alone into partly, for every rule, and never softens a
contradiction of its direction; a result met only at an easier setting than the paper's (a smaller batch, random
instead of pretrained weights, an easier case) is partly. Each claim says how many distinct images stand behind
its numbers; a claim about attacks on images read from seeds that never varied the images is inconclusive. Where
a sweep has no shipped results, an earlier run's kept values (`splitlab/results/earlier/`, with the commit they
come from) are used and named. `splitlab claims` prints this page's tables;
`splitlab claims --run ID|PAPER` runs the sweeps behind a claim again and judges it on the new results;
`splitlab claims --deviations` lists how the lab departs from each paper.
"""


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _provenance_row(sweep: str) -> list:
    meta = provenance(sweep)
    if meta is None:
        kept = earlier(sweep)
        if kept is not None:
            return [f"`{sweep}`", "earlier run, not shipped", kept.meta["commit"], "-", "-", kept.meta["what"]]
        return [f"`{sweep}`", "not shipped", "-", "-", "-", "-"]
    gits = meta.get("git") or {}
    commit = ", ".join((g.get("commit") or "-")[:10] + (" (dirty)" if g.get("dirty") else "")
                       for g in (gits if isinstance(gits, list) else [gits]))     # a list: cells from several commits
    threads = ", ".join(map(str, meta.get("torch_threads") or [])) or "-"
    return [f"`{sweep}`", meta["cells"], commit, threads, meta.get("cell_seconds", "-"), meta.get("shipped", "-")]


def scoreboard_lines(judged: list, link: str = "#", grouped: bool = False) -> list[str]:
    """The verdicts counted per paper (experiments by verdict, exact checks apart; a table) and in all; `grouped`:
    the papers of one `README_GROUP` (the field's defence papers) summed into one row, for the README."""
    counts = count(judged)
    rows, groups = [], {}
    for paper in PAPERS:
        experiments, checks = counts[paper]["experiments"], counts[paper]["exact checks"]
        row = [f"[{paper}]({link}{paper})", *[experiments[v] for v in VERDICTS],
               f"{checks['holds']} of {sum(checks.values())}", sum(experiments.values()) + sum(checks.values())]
        group = getattr(MODULES[paper], "README_GROUP", None) if grouped else None
        if group is None:
            rows.append(row)
        elif group not in groups:
            groups[group] = [f"{group}: [{paper}]({link}{paper})", *row[1:]]
            rows.append(groups[group])
        else:
            summed = groups[group]
            summed[0] += f", [{paper}]({link}{paper})"
            summed[1:-2] = [a + b for a, b in zip(summed[1:-2], row[1:-2])]
            held, of = (int(v) for v in summed[-2].split(" of "))
            summed[-2] = f"{held + checks['holds']} of {of + sum(checks.values())}"
            summed[-1] += row[-1]
    lines = _table(["paper", *VERDICTS, "exact checks (hold)", "total"], rows)
    assert sum(r[-1] for r in rows) == len(LEDGER)
    return lines + ["", summary_line(counts) + "."]


def claims_page() -> str:
    judged = list(scoreboard())
    lines = ["<!-- generated by `python -m splitlab.docs` from the claims ledger and the shipped results -->", "",
             INTRO]
    lines += [f"- **{v}**: {MEANINGS[v]};" for v in VERDICTS]
    lines += [f"- exact checks: **{v}**, {MEANINGS[v]};" for v in CHECKS]
    lines[-1] = lines[-1][:-1] + "."
    lines += ["", RULES_TEXT, "The rules, one per shape of claim (`splitlab/claims/rules.py`, `one_sample.py`):", ""]
    lines += [f"- `{r.__name__}`: {r.summary};" for r in RULES]
    lines[-1] = lines[-1][:-1] + "."
    lines += ["", "## By paper", ""]
    lines += scoreboard_lines(judged) + [""]
    for paper, module in MODULES.items():
        lines += [f"## {paper}", "", PAPERS[paper], ""]
        rows = []
        for claim, verdict in judged:
            if claim.paper != paper:
                continue
            how = f"`{claim.measure.sweep}`: {claim.measure.how}" if claim.measure else "-"
            setting = f" Lab setting: {claim.reduced}." if claim.reduced else ""
            images = f" Images: {verdict.images}." if verdict.images else ""
            kind = " (exact check)" if claim.exact else ""
            rows.append([f"`{claim.id}` ({claim.where})", claim.claim, claim.paper_numbers, how + setting,
                         verdict.lab + images,
                         f"**{verdict.verdict}**{kind}" + (f": {verdict.reason}" if verdict.reason else "")])
        lines += _table(["claim", "what the paper says", "paper's numbers", "lab's measurement", "lab's numbers",
                         "verdict"], rows)
        shipped = sorted({c.measure.sweep for c in module.CLAIMS if c.measure is not None})
        lines += ["", "Results behind these verdicts:", ""]
        lines += _table(["sweep", "cells", "commit", "torch threads", "cell seconds (sum)", "shipped"],
                        [_provenance_row(s) for s in shipped])
        found = declared(paper)
        lines += ["", "Declared deviations (model, setting, metric, protocol):", ""]
        lines += _table(["where", "what", "paper", "lab", "why", "presets"],
                        [[src, d.what, d.paper, d.lab, d.why, ", ".join(d.presets) or "all"] for src, d in found]) \
            if found else ["None declared."]
        lines.append("")
    return "\n".join(lines)

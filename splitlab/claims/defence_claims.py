"""What the claims of the field's defence papers share: each defence at its paper's strongest setting against the
attack it was made against, beside the same cells without it, on the field-defences-* grids (CPU sizes on mnist5k,
every seed its own train/test draw).

The defence papers' own numbers could not be sourced (their texts are not in the lab's paper store, and a search of
public pages returned only their abstracts); each claim says so where it would quote them, and the lab's attacks and data differ from the papers', which each claim
names: its verdict is `measured, not comparable` where the attack or the task differs in kind, partly where only
the size does."""
from __future__ import annotations

from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import Beats
from splitlab.claims.stats import SHARE

__all__ = ["LABELS_GRID", "NO_NUMBERS", "LABEL_TASK", "label_leak_claim"]

LABELS_GRID = "field-defences-labels"
NO_NUMBERS = ("the paper's own numbers could not be sourced to quote (its text is not in the lab's paper store; a "
              "search of public pages returned its abstract only)")
LABEL_TASK = ("Li et al.'s norm scoring on binary mnist5k (digit 0, 10%, against the rest), the SmallMLP cut after its "
              "first layer, one epoch, seeds 0-2, each its own stratified train/test draw")


def label_leak_claim(claim_id: str, paper: str, where: str, claim: str, paper_setting: str, send_back: str,
                     not_comparable: str) -> Claim:
    """The defence at `send_back` lowers the norm attack's leak AUC against the same cells without it."""
    return Claim(
        claim_id, paper, where, claim, f"{paper_setting}; {NO_NUMBERS}",
        Measure(LABELS_GRID, Beats(a=Select({"send-back": "none"}, "no defence"),
                                   b=Select({"send-back": send_back}, send_back), metric="leak_auc", scale=SHARE,
                                   defended_b=True),
                f"paired leak AUC difference over seeds 0-2, no defence minus {send_back} ({LABEL_TASK}); the AUC "
                "is not folded at 0.5, so an AUC below it, which leaks as much read the other way, counts as "
                "protection here: each row's leak AUC, task accuracy and task AUC (the cost) are in "
                f"splitlab/results/{LABELS_GRID}.csv"),
        not_comparable=not_comparable)

"""Claims of Ghazi, Golowich, Kumar, Manurangsi, Zhang, *Deep Learning with Label Differential Privacy* (NeurIPS
2021): training on labels released by randomised response (with a prior, in stages) is epsilon-label-DP and keeps
much of the task's accuracy. The lab runs the plain randomised response (the paper's RR baseline) as `label-rr`."""
from splitlab.claims.defence_claims import label_leak_claim

PAPER = "ghazi"
ATTACKS = ("label-norm",)
DEFENCES = ("label-rr",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Ghazi, Golowich, Kumar, Manurangsi, Zhang. Deep Learning with Label Differential Privacy. NeurIPS 2021 "
            "(arXiv 2102.06062).")

CLAIMS = [
    label_leak_claim(
        "ghazi.rr.label-dp-protects", PAPER, "Sec. 3-4 (RR, RR-with-prior)",
        "Randomised response on the labels at epsilon 1 bounds what any later message tells of a label: a label "
        "attack on the cut gradients learns less.",
        "CIFAR-10 at epsilon 1, 2, 4, 8 with LP-1ST and LP-2ST; the paper reports task accuracy under the "
        "guarantee, not an attack's leak", "label-rr:epsilon=1",
        "the paper's claim is a guarantee and the accuracy kept under it (CIFAR-10, RR-with-prior in stages); the "
        "lab measures plain one-stage RR against an attack the paper does not run"),
]

PAPER_PRESETS: dict = {}

"""Claims of Yang, Sun, Yao, Xie, Wang, *Differentially Private Label Protection in Split Learning* (arXiv
2203.02073): perturbing the cut gradient with per-class gradients weighted by Laplace noise is label-DP and defends
against gradient-based label inference. The lab runs it as VFLAIR does (`grad-perturb`)."""
from splitlab.claims.defence_claims import label_leak_claim

PAPER = "yang"
ATTACKS = ("label-norm",)
DEFENCES = ("grad-perturb",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Yang, Sun, Yao, Xie, Wang. Differentially Private Label Protection in Split Learning. arXiv "
            "2203.02073 (2022).")

CLAIMS = [
    label_leak_claim(
        "yang.grad-perturb.lowers-label-leak", PAPER, "Sec. 5 (attacks on the protected gradients)",
        "The gradient perturbation at a small epsilon (0.01) stops norm and direction label attacks on the cut "
        "gradients.", "Criteo and Avazu click-through data, the norm and direction attacks of Li et al.",
        "grad-perturb:epsilon=0.01",
        "the paper runs TPSL on click-through data; the lab runs VFLAIR's GradPerturb on binary mnist5k, where at "
        "epsilon 0.01 the split model falls to about the majority class's accuracy (0.9): the leak falls with the "
        "task"),
]

PAPER_PRESETS: dict = {}

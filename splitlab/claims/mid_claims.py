"""Claims of Zou, Liu, Zhang, Wang, Zhang, *Mutual Information Regularization for Vertical Federated Learning*
(arXiv 2301.01142): a variational information bottleneck at the label party (MID) defends against label inference
at a tunable cost in task accuracy."""
from splitlab.claims.defence_claims import label_leak_claim

PAPER = "zou"
ATTACKS = ("label-norm",)
DEFENCES = ("mid",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Zou, Liu, Zhang, Wang, Zhang. Mutual Information Regularization for Vertical Federated Learning. arXiv "
            "2301.01142 (2023).")

CLAIMS = [
    label_leak_claim(
        "zou.mid.lowers-label-leak", PAPER, "experiments (label inference attacks)",
        "MID at its strongest lambda (1e4) lowers label inference from what the label party sends back.",
        "MNIST, CIFAR-10/100, NUS-WIDE with VFLAIR's label attacks, lambda 1e-4 to 1e4", "mid:lam=10000",
        "the paper's attacks and data are VFLAIR's; the lab runs norm scoring on binary mnist5k, where at lambda "
        "1e4 the split model predicts the majority class (task accuracy 0.9, the majority's share) and the leak AUC "
        "falls below 0.5"),
]

PAPER_PRESETS: dict = {}

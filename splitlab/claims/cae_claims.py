"""Claims of Liu, Zou, Kang et al., *Batch Label Inference and Replacement Attacks in Black-Boxed Vertical Federated
Learning* (arXiv 2112.05409): the confusional autoencoder (CAE) and its discrete form with DiscreteSGD (DCAE) defend
against batch label inference while the main task keeps its accuracy."""
from splitlab.claims.defence_claims import label_leak_claim

PAPER = "liu"
ATTACKS = ("label-norm",)
DEFENCES = ("cae", "dcae")
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Liu, Zou, Kang, Liu, He, Yi, Yang. Batch Label Inference and Replacement Attacks in Black-Boxed "
            "Vertical Federated Learning. arXiv 2112.05409 (2021).")

_NOT_COMPARABLE = ("the paper's attack is its batch label inference on multiclass data (MNIST, CIFAR, NUS-WIDE); the "
                   "lab runs norm scoring on a binary task, where the autoencoder's confusion is a two-class map")
CLAIMS = [
    label_leak_claim(
        "liu.cae.lowers-label-leak", PAPER, "Sec. 6 (CAE)",
        "CAE at VFLAIR's strongest lambda (1) lowers label inference from the gradients the label party sends back.",
        "MNIST, CIFAR-10/100 and NUS-WIDE, the paper's batch label inference attack", "cae:lam=1", _NOT_COMPARABLE),
    label_leak_claim(
        "liu.dcae.lowers-label-leak", PAPER, "Sec. 6 (DCAE)",
        "DCAE (CAE plus DiscreteSGD) at lambda 1 lowers label inference from the gradients the label party sends "
        "back.", "as CAE's, with DiscreteSGD's bins", "dcae:lam=1", _NOT_COMPARABLE),
]

PAPER_PRESETS: dict = {}

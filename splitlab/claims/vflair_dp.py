"""Claims of the VFLAIR benchmark (Zou et al., *VFLAIR: A Research Library and Benchmark for Vertical Federated
Learning*, ICLR 2024) for its GaussianDP defence (`clipped-noise`): clipped Gaussian noise on the gradient the active
party sends back lowers label inference at a cost in main-task accuracy."""
from splitlab.claims.defence_claims import label_leak_claim

PAPER = "vflair"
ATTACKS = ("label-norm",)
DEFENCES = ("clipped-noise",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Zou, Gu, Liu et al. VFLAIR: A Research Library and Benchmark for Vertical Federated Learning. ICLR 2024 "
            "(arXiv 2310.09827), its GaussianDP defence.")

CLAIMS = [
    label_leak_claim(
        "vflair.gaussian-dp.lowers-label-leak", PAPER, "benchmark results (defence against label inference)",
        "GaussianDP at its strongest benchmarked strength (0.1) lowers label inference from the cut gradients.",
        "MNIST, CIFAR-10 and others, strengths 1e-4 to 1e-1, VFLAIR's own attacks (direct and norm-based label "
        "inference among them)", "clipped-noise:scale=0.1",
        "VFLAIR ranks defences by its own attack suite and data; the lab runs one of them (norm scoring) on binary "
        "mnist5k"),
]

PAPER_PRESETS: dict = {}

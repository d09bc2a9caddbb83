"""Claims of Zou et al., *VFLAIR: A Research Library and Benchmark for Vertical Federated Learning* (arXiv 2310.09827).

VFLAIR benchmarks attacks and defences on two VFL architectures: splitVFL, where the label party holds a trainable
top model on the parties' cut outputs, and aggVFL, where it only aggregates the parties' class scores. The lab's
label victim runs both on the same network and seed: `--top model` (the label party holds the tabular MLP's two
dense layers after cut 6) and `--top none` (the feature party holds the whole MLP and sends class scores), so the
two differ only in where the cut lies and what gradient the feature party receives.
"""
from splitlab.claims.defence_claims import label_leak_claim
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import Beats
from splitlab.claims.stats import SHARE

PAPER = "vflair"
ATTACKS = ("label-norm", "label-direction")
DEFENCES = ("clipped-noise",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
CITATION = ("Zou, Gu, He, Takahashi, Liu, Zhang. VFLAIR: A Research Library and Benchmark for Vertical Federated "
            "Learning. arXiv 2310.09827 (2023).")

REDUCED = ("one feature party and the label party on the lab's embedded tabular sets (here adult, 24% positive), "
           "the tabular MLP, one epoch of batch 256, seeds 0-2 each with its own split; the paper: its own datasets, "
           "models and attack suite (its numbers for this comparison are not sourced here)")


def _split_resists(attack: str) -> Claim:
    return Claim(
        f"vflair.benchmark.split-resists-{attack}", PAPER, "benchmark results (splitVFL vs aggVFL)",
        f"splitVFL resists label inference better than aggVFL: {attack} scoring leaks less through a top model.",
        "the benchmark's finding that splitVFL generally makes the system more robust to attacks than aggVFL (its "
        "numbers for this attack and data not sourced here)",
        Measure(f"tabular-{attack}", Beats(a=Select({"dataset": "adult", "top": "model"}, "splitVFL (top model)"),
                                           b=Select({"dataset": "adult", "top": "none"}, "aggVFL (top none)"),
                                           metric="leak_auc", higher_is_better=False, scale=SHARE,
                                           guard="leak_auc", guard_side="b"),
                "paired leak AUC difference over seeds 0-2 on adult, splitVFL minus aggVFL"),
        reduced=REDUCED)


CLAIMS: list[Claim] = [
    _split_resists("norm"), _split_resists("direction"),
    label_leak_claim(
        "vflair.gaussian-dp.lowers-label-leak", PAPER, "benchmark results (defence against label inference)",
        "GaussianDP at its strongest benchmarked strength (0.1) lowers label inference from the cut gradients.",
        "MNIST, CIFAR-10 and others, strengths 1e-4 to 1e-1, VFLAIR's own attacks (direct and norm-based label "
        "inference among them)", "clipped-noise:scale=0.1",
        "VFLAIR ranks defences by its own attack suite and data; the lab runs one of them (norm scoring) on binary "
        "mnist5k, where at scale 0.1 the split model predicts the majority class (task accuracy 0.9, the majority's "
        "share): the leak falls with the task"),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset."""

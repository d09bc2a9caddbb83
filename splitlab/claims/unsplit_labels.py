"""Claims of Erdogan, Kupcu, Cicek, *UnSplit* (WPES 2022) on label inference (Sec. 5): when the label party keeps
only the output layer (the U-shaped split), the party before it infers the labels by matching the gradients it
receives against a clone of that layer, label by label. The lab runs the CNN split before its output layer on
mnist5k's ten digits, two epochs, seeds 0-2.
"""
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast
from splitlab.claims.stats import SHARE

PAPER = "unsplit"
ATTACKS = ("label-unsplit",)
DEVIATIONS = ()
"""The attack declares its own deviations (what is matched, the labelled samples, the clone's training)."""
CITATION = ("Erdogan, Kupcu, Cicek. UnSplit: Data-Oblivious Model Inversion, Model Stealing, and Label Inference "
            "Attacks Against Split Learning. WPES 2022 (arXiv 2108.09033).")

CLAIMS: list[Claim] = [
    Claim("unsplit.sec5.perfect-labels", PAPER, "Sec. 5, abstract",
          "If the client keeps only the output layer to protect its labels, the server infers them perfectly.",
          "the abstract: 'the honest-but-curious server can infer the labels with perfect accuracy'",
          Measure("label-unsplit", AtLeast(Select({}, "seeds 0-2"), "label_accuracy", 1.0, SHARE),
                  "label accuracy over every round of two epochs, mean over seeds 0-2"),
          reduced="mnist5k and the lab's CNN for the paper's MNIST, Fashion-MNIST and CIFAR-10 networks; the lab's "
                  "attacker matches the cut gradient it receives, not the output layer's weight gradient"),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset: `label-unsplit.original` holds no number of the paper's."""

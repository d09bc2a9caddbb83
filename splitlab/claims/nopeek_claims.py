"""Claims of Vepakomma, Singh, Gupta, Raskar, *NoPeek: Information leakage reduction to share activations in
distributed deep learning* (ICDM Workshops 2020): minimising the distance correlation between the raw inputs and the
activations sent makes the inputs harder to reconstruct from them, at a small cost in accuracy."""
from splitlab.claims.defence_claims import NO_NUMBERS
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import Beats
from splitlab.claims.stats import FACTOR

PAPER = "vepakomma"
ATTACKS = ("unsplit",)
DEFENCES = ("nopeek",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Vepakomma, Singh, Gupta, Raskar. NoPeek: Information leakage reduction to share activations in "
            "distributed deep learning. ICDM Workshops 2020 (arXiv 2008.09161).")

CLAIMS = [
    Claim("vepakomma.nopeek.harder-to-reconstruct", PAPER, "Sec. 4 (reconstruction attacks)",
          "With NoPeek the inputs reconstructed from the activations are worse than without it.",
          f"a decoder trained on the activations, image data; {NO_NUMBERS}",
          Measure("field-defences-nopeek", Beats(a=Select({"defence": "none"}, "no defence"),
                                                 b=Select({"defence": "nopeek:alpha=3"}, "nopeek alpha 3"),
                                                 metric="image_mse", higher_is_better=False, scale=FACTOR,
                                                 defended_b=True),
                  "paired UnSplit image MSE over seeds 0-2 (each its own train/test draw of mnist5k), SmallMLP at cut 1, "
                  "one epoch, unsplit.quick"),
          not_comparable="the paper's attacker trains a decoder on leaked input-activation pairs; the lab's is "
                         "UnSplit, which inverts a clone of the client without any pair"),
]

PAPER_PRESETS: dict = {}

"""Claims of Erdogan, Kupcu, Cicek, *SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split
Learning* (WPES 2022): a client that sends fake batches and scores the gradients it gets back detects FSHA early,
and raises no alarm against an honest server."""
from splitlab.claims.defence_claims import NO_NUMBERS
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast, AtMost, Beats
from splitlab.claims.stats import FACTOR, FLAG

PAPER = "erdogan"
ATTACKS = ("fsha",)
DEFENCES = ("splitguard",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
README_GROUP = "field defences"
"""The README counts the field's defence papers in one row (docs/claims.md has each)."""
CITATION = ("Erdogan, Kupcu, Cicek. SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split "
            "Learning. WPES 2022 (arXiv 2108.09052).")

GUARD = "splitguard:p_fake=0.2,start=10"
REDUCED = ("60 rounds of 32 images against a width-0.25 MLP client on mnist5k (FSHA, level 1) and one epoch of the "
           "SmallMLP split model on mnist5k (honest), each seed its own train/test draw; the paper: ResNet clients on "
           "MNIST, Fashion-MNIST and CIFAR-10 through training")
CLAIMS = [
    Claim("erdogan.splitguard.detects-fsha", PAPER, "Sec. 5 (detection)",
          "SplitGuard flags FSHA within its first fake batches.",
          f"FSHA detected in every run, within the first epoch; {NO_NUMBERS}",
          Measure("field-defences-splitguard",
                  AtLeast(Select({"defence": f"{GUARD},on_detection=stop"}, "SplitGuard against FSHA"),
                          "defence_report.splitguard_detected", 1.0, FLAG),
                  "share of seeds 0-2 whose FSHA run SplitGuard flagged (the round is in the same rows)"),
          reduced=REDUCED,
          easier="the lab's own threshold (0.5, fail-fast) flags at the first score, early in training, where it "
                 "flagged one honest run of three too (erdogan.splitguard.no-false-alarm): a detection this early "
                 "tells FSHA from an honest server less than the paper's tuned policies do"),
    Claim("erdogan.splitguard.limits-recovery", PAPER, "abstract, Sec. 5 (mitigation)",
          "A client that stops when SplitGuard flags the server leaves FSHA less to reconstruct.",
          f"the abstract: detection 'while minimizing the amount of information recovered by the adversaries'; "
          f"{NO_NUMBERS}",
          Measure("field-defences-splitguard",
                  Beats(a=Select({"defence": "none"}, "FSHA, no SplitGuard"),
                        b=Select({"defence": f"{GUARD},on_detection=stop"}, "FSHA, SplitGuard stopping"),
                        metric="image_mse", higher_is_better=False, scale=FACTOR, defended_b=True),
                  "paired FSHA target image MSE over seeds 0-2, without SplitGuard against SplitGuard stopping the "
                  "client at its first alarm"),
          reduced=REDUCED),
    Claim("erdogan.splitguard.no-false-alarm", PAPER, "Sec. 5 (false positives)",
          "SplitGuard raises no alarm against an honest server.",
          f"no honest run flagged at the paper's thresholds; {NO_NUMBERS}",
          Measure("field-defences-splitguard-honest",
                  AtMost(Select({"defence": GUARD}, "SplitGuard, honest server"),
                         "defence_report.splitguard_detected", 0.0, FLAG),
                  "share of seeds 0-2 whose honest run SplitGuard flagged"),
          reduced=REDUCED),
]

PAPER_PRESETS: dict = {}

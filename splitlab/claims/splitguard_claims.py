"""Claims of Erdogan, Kupcu, Cicek, *SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split
Learning* (WPES 2022): a client that sends fake batches and scores the gradients it gets back detects FSHA early,
and raises no alarm against an honest server."""
from splitlab.claims.defence_claims import NO_NUMBERS
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast, AtMost
from splitlab.claims.stats import SHARE

PAPER = "erdogan"
ATTACKS = ("fsha",)
DEFENCES = ("splitguard",)
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
CITATION = ("Erdogan, Kupcu, Cicek. SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split "
            "Learning. WPES 2022 (arXiv 2108.09052).")

GUARD = "splitguard:p_fake=0.2,start=10"
REDUCED = ("60 rounds of 32 images against a width-0.25 MLP client on mnist5k (FSHA, level 1) and one epoch of the "
           "SmallMLP split model on mnist5k (honest); the paper: ResNet clients on MNIST, Fashion-MNIST and CIFAR-10 "
           "through training")
CLAIMS = [
    Claim("erdogan.splitguard.detects-fsha", PAPER, "Sec. 5 (detection)",
          "SplitGuard flags FSHA within its first fake batches.",
          f"FSHA detected in every run, within the first epoch; {NO_NUMBERS}",
          Measure("field-defences-splitguard",
                  AtLeast(Select({"defence": f"{GUARD},on_detection=stop"}, "SplitGuard against FSHA"),
                          "defence_report.splitguard_detected", 1.0, SHARE),
                  "share of seeds 0-2 whose FSHA run SplitGuard flagged (the round is in the same rows)"),
          reduced=REDUCED),
    Claim("erdogan.splitguard.no-false-alarm", PAPER, "Sec. 5 (false positives)",
          "SplitGuard raises no alarm against an honest server.",
          f"no honest run flagged at the paper's thresholds; {NO_NUMBERS}",
          Measure("field-defences-splitguard-honest",
                  AtMost(Select({"defence": GUARD}, "SplitGuard, honest server"),
                         "defence_report.splitguard_detected", 0.0, SHARE),
                  "share of seeds 0-2 whose honest run SplitGuard flagged"),
          reduced=REDUCED),
]

PAPER_PRESETS: dict = {}

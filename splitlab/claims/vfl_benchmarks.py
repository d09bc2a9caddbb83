"""Claims of three VFL attack papers the field's benchmarks run: batch label inference and label replacement
(Liu, Zou, Kang et al.), feature inference from model predictions (Luo, Wu, Xiao, Ooi, ICDE 2021) and the
gradient-replacement backdoor (Liu, Yi, Chen, 2020).

None of the three papers' texts was available to the lab when these were written: each claim is the paper's
headline as its abstract words it, judged by a rule that needs no number of the paper's where the lab has none
(an attack beats its trivial answer), and the paper's own tables are listed as not attempted. The grids are
CPU-sized: mnist5k and wdbc, the lab's small models, seeds 0-2 (each its own data order or split).
"""
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast, Fails
from splitlab.claims.stats import PLAIN, SHARE

PAPER = "vflbench"
ATTACKS = ("bli", "bli-replace", "esa", "grn", "gr-backdoor")
DEVIATIONS = ()
"""The attacks declare their own deviations (data, settings, what the party reads)."""
CITATION = ("Liu, Zou, Kang, Liu, He, Yi, Yang. Batch Label Inference and Replacement Attacks in Black-Boxed "
            "Vertical Federated Learning (arXiv 2112.05409); Luo, Wu, Xiao, Ooi. Feature Inference Attack on Model "
            "Predictions in Vertical Federated Learning (ICDE 2021); Liu, Yi, Chen. Backdoor Attacks and Defenses "
            "in Feature-partitioned Collaborative Learning (ICML 2020 FL workshop).")

UNSOURCED = "the paper's text was not available to the lab: its tables and settings are not sourced here"
BLI_REDUCED = ("mnist5k (10 classes) and wdbc (binary), one passive party holding every feature, the lab's small "
               "MLPs sending class scores, one epoch (mnist5k) or five (wdbc), the last 4 rounds attacked")
BLI_EASIER = ("one passive party and no other party's scores: the unseen scores the attacker fits are exactly 0, "
              "where its dummy starts; the paper's passive party does not know the other parties' scores")
LUO_REDUCED = "wdbc, five feature parties of six columns, the label party holding 1-4 of them; 20 epochs"
BACKDOOR_REDUCED = "wdbc, the tabular MLP cut 6, 5 known target samples, 40 poisoned, 20 epochs"
NONE = {"send-back": "none"}


def _backdoor(attack: str, sweep: str, where: str, words: str) -> Claim:
    return Claim(f"vflbench.{attack}.plants", PAPER, where, words,
                 f"the abstract; {UNSOURCED}",
                 Measure(sweep, Fails(Select(NONE, "undefended"), "backdoor_success", scale=SHARE, fails=False),
                         "share of triggered test inputs (not of the target class) the poisoned model labels the "
                         "target, mean over seeds 0-2, against the same model trained unpoisoned on the same inputs"),
                 reduced=BACKDOOR_REDUCED)


CLAIMS: list[Claim] = [
    Claim("vflbench.bli.high-accuracy", PAPER, "Liu, Zou, Kang et al., abstract",
          "Private labels can be reconstructed with high accuracy from black-boxed VFL's batch-level gradients.",
          f"the abstract: 'reconstructed with high accuracy' (read here as within 5 points of 1); {UNSOURCED}",
          Measure("bli-batch", AtLeast(Select({"batch-size": 64}, "batch 64"), "label_accuracy", 1.0, SHARE),
                  "label accuracy of the last 4 rounds' samples, mean over seeds 0-2, beside the majority class"),
          reduced=BLI_REDUCED, easier=BLI_EASIER),
    Claim("vflbench.bli.tabular", PAPER, "Liu, Zou, Kang et al., abstract",
          "The same on a tabular task: the batch's labels beat the majority class.",
          f"the abstract's claim, on the lab's tabular set; {UNSOURCED}",
          Measure("bli-tabular", Fails(Select({"batch-size": 32}, "batch 32"), "label_accuracy", scale=SHARE,
                                       fails=False),
                  "label accuracy of the last 4 rounds' samples, mean over seeds 0-2, against the majority class"),
          reduced=BLI_REDUCED, easier=BLI_EASIER),
    _backdoor("bli-replace", "bli-replace-tabular", "Liu, Zou, Kang et al., abstract",
              "Swapping a poisoned sample's gradient for a known target sample's plants a label replacement backdoor."),
    Claim("vflbench.bli.paper-tables", PAPER, "Liu, Zou, Kang et al., experiments",
          "Batch label inference and replacement at the paper's own datasets, batch sizes and defences (CoAE, DP).",
          UNSOURCED,
          reason=f"not sourced: {UNSOURCED}; no dataset or batch size of the paper's is run here (the confusional "
                 "autoencoder is in the catalogue as cae, not yet run against BLI)"),
    Claim("vflbench.esa.beats-mean", PAPER, "Luo et al., the equality-solving attack",
          "The equality-solving attack infers a passive party's features of a logistic regression better than a "
          "guess from their distribution.",
          f"the abstract: the attacks infer the passive party's features; {UNSOURCED}",
          Measure("esa-share", Fails(Select({}, "undefended, every share"), "feature_mse", higher_is_better=False,
                                     scale=PLAIN, fails=False),
                  "per-feature MSE on the standardised scale, mean over shares 20-80% and seeds 0-2, against each "
                  "feature's training mean"),
          reduced=LUO_REDUCED),
    Claim("vflbench.grn.beats-mean", PAPER, "Luo et al., the generative regression network",
          "The generative regression network infers a passive party's features of a neural network better than a "
          "guess from their distribution.",
          f"the abstract: the attacks infer the passive party's features; {UNSOURCED}",
          Measure("grn-share", Fails(Select({}, "every share"), "feature_mse", higher_is_better=False, scale=PLAIN,
                                     fails=False),
                  "per-feature MSE on the standardised scale, mean over shares 20-80% and seeds 0-2, against each "
                  "feature's training mean"),
          reduced=LUO_REDUCED),
    Claim("vflbench.esa.exact", PAPER, "Luo et al., the equality-solving attack",
          "ESA recovers the features exactly when the passive party has no more of them than the classes less one.",
          f"the paper's condition for an exact solution; {UNSOURCED}",
          reason="the grid's binary dataset gives one equation a sample for six or more unknowns; the exact case is "
                 "checked by the tests (tests/test_newattacks.py, wine, one unknown column), not by a grid"),
    _backdoor("gr-backdoor", "gr-backdoor-tabular", "Liu, Yi, Chen, abstract",
              "A feature party with a few labelled target samples plants a backdoor by gradient replacement."),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset: the papers' numbers are not sourced here."""

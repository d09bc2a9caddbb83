"""Claims of two VFL attack papers the field's benchmarks run: feature inference from model predictions (Luo, Wu,
Xiao, Ooi, ICDE 2021: the equality-solving attack and the generative regression network) and the gradient-replacement
backdoor (Liu, Yi, Chen, 2020). The batch label inference paper, the third the benchmarks run, has its own key
(`liu`, `liu_bli.py`), with the confusional autoencoder it proposes.

Neither paper's tables were available to the lab (its paper store holds five other papers; the search corpora hold
their abstracts, and for Luo et al. the authors' code, which gives the paper's datasets and defaults but no result):
each claim is the paper's headline as its abstract words it, judged by a rule that needs no number of the paper's
(an attack beats its trivial answer, a defence lowers it) or by the abstract's own word read as a number ('high
accuracy': within 5 points of 1), and says where the paper's number would go that it is not sourced. The grids are
CPU-sized: mnist5k (each seed its own train/test draw) and wdbc (each seed its own split), the lab's small models,
seeds 0-2; Luo et al.'s datasets (LUO_SETTINGS) are not run.
"""
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast, Beats, Close, Fails
from splitlab.claims.stats import PLAIN, SHARE

PAPER = "vflbench"
ATTACKS = ("esa", "grn", "gr-backdoor")
DEVIATIONS = ()
"""The attacks declare their own deviations (data, settings, what the party reads)."""
CITATION = ("Luo, Wu, Xiao, Ooi. Feature Inference Attack on Model Predictions in Vertical Federated Learning (ICDE "
            "2021); Liu, Yi, Chen. Backdoor Attacks and Defenses in Feature-partitioned Collaborative Learning (ICML "
            "2020 FL workshop).")

UNSOURCED = ("not sourced: the paper's tables were not available to the lab (its abstract only), so no number of "
             "the paper's is quoted here")
LUO_SETTINGS = ("the paper's settings from the authors' code (xinjianluo/featureinference-vfl; its results are not "
                "sourced): tabular sets only, bank (2 classes, 20 features), credit (2, 23), drive (11, 48), news (5, "
                "59) and two synthetic; ESA by default recovers 10 of bank's features, GRN 20 of drive's 48 with the "
                "attacker holding 28; a 60/20/20 train/test/prediction split, 10 runs")
LUO_REDUCED = "wdbc, five feature parties of six columns, the label party holding 1-4 of them; 20 epochs"
BACKDOOR_REDUCED = "wdbc, the tabular MLP cut 6, 5 known target samples, 40 poisoned, 20 epochs"
DIGITS_BACKDOOR_REDUCED = "mnist5k, the small MLP cut 1, 5 epochs, 10 known target samples, 100 poisoned"
NONE = {"send-back": "none"}
SUCCESS = ("share of triggered test inputs (not of the target class) the poisoned model labels the target, mean "
           "over seeds 0-2")
COMBINED = "gradient-noise:ratio=2+sparsify:drop=0.9"
"""The two send-back defences of gr-backdoor-digits at once: the paper blocks the backdoor by a combination."""


def _backdoor(claim_id: str, sweep: str, where: str, words: str, reduced: str) -> Claim:
    return Claim(claim_id, PAPER, where, words, f"the abstract; {UNSOURCED}",
                 Measure(sweep, Fails(Select(NONE, "undefended"), "backdoor_success", scale=SHARE, fails=False),
                         f"{SUCCESS}, against the same model trained unpoisoned on the same inputs"),
                 reduced=reduced)


HIGH = "'high accuracy on both main and backdoor tasks'"
HIGH_WORDS = (f"the abstract: {HIGH}; the lab reads it as within 5 points of 1 on the backdoor task (as the batch "
              "label inference paper's 'high accuracy' is) and within 5 points of the same model trained unpoisoned "
              "on the main task: readings of the words, no number of the paper's; ")
KEPT = ("paired difference over seeds 0-2, the poisoned model's clean test accuracy minus that of the same model "
        "trained unpoisoned on the same inputs (the cells' `accuracy` against `baselines.unpoisoned.accuracy`), "
        "no worse by more than 5 points")


def _high(claim_id: str, sweep: str, where: str, reduced: str) -> Claim:
    main_task = claim_id.replace("high-accuracy", "main-task")
    return Claim(claim_id, PAPER, "Liu, Yi, Chen, abstract",
                 f"The backdoor reaches high accuracy on the backdoor task ({where}).", f"{HIGH_WORDS}{UNSOURCED}",
                 Measure(sweep, AtLeast(Select(NONE, "undefended"), "backdoor_success", 1.0, SHARE,
                                        reading=HIGH),
                         f"{SUCCESS}; the main task is judged apart ({main_task})"),
                 reduced=reduced)


def _main_task(claim_id: str, sweep: str, where: str, reduced: str) -> Claim:
    return Claim(claim_id, PAPER, "Liu, Yi, Chen, abstract",
                 f"The backdoor keeps high accuracy on the main task ({where}): no worse than the same model trained "
                 "unpoisoned.", f"{HIGH_WORDS}{UNSOURCED}",
                 Measure(sweep, Close(a=Select(NONE, "poisoned"), b=Select(NONE, "unpoisoned"), metric="accuracy",
                                      metric_b="baselines.unpoisoned.accuracy", scale=SHARE, margin=0.05,
                                      one_sided=True, guard=""), KEPT),
                 reduced=reduced)


CLAIMS: list[Claim] = [
    Claim("vflbench.esa.beats-mean", PAPER, "Luo et al., the equality-solving attack",
          "The equality-solving attack infers a passive party's features of a logistic regression better than a "
          "guess from their distribution.",
          f"the abstract: the attacks infer the passive party's features; {UNSOURCED}; {LUO_SETTINGS}",
          Measure("esa-share", Fails(Select({}, "undefended, every share"), "feature_mse", higher_is_better=False,
                                     scale=PLAIN, fails=False),
                  "per-feature MSE on the standardised scale, mean over shares 20-80% and seeds 0-2, against each "
                  "feature's training mean"),
          reduced=LUO_REDUCED),
    Claim("vflbench.grn.beats-mean", PAPER, "Luo et al., the generative regression network",
          "The generative regression network infers a passive party's features of a neural network better than a "
          "guess from their distribution.",
          f"the abstract: the attacks infer the passive party's features; {UNSOURCED}; {LUO_SETTINGS}",
          Measure("grn-share", Fails(Select({}, "every share"), "feature_mse", higher_is_better=False, scale=PLAIN,
                                     fails=False),
                  "per-feature MSE on the standardised scale, mean over shares 20-80% and seeds 0-2, against each "
                  "feature's training mean"),
          reduced=LUO_REDUCED),
    Claim("vflbench.grn.digits", PAPER, "Luo et al., the generative regression network",
          "The same on the digits: GRN infers the pixels of the passive parties' columns better than each pixel's "
          "training mean.",
          f"the abstract: the attacks infer the passive party's features; {UNSOURCED}; {LUO_SETTINGS}",
          Measure("grn-digits", Fails(Select({}, "25% and 75% held"), "feature_mse", higher_is_better=False,
                                      scale=PLAIN, fails=False),
                  "per-pixel MSE on [0, 1] of the columns the attacker does not hold, 200 test digits, mean over "
                  "shares 25% and 75% and seeds 0-2 (each its own draw), against each pixel's training mean"),
          reduced="mnist5k, the small MLP over four parties by columns, 2 epochs, 200 predictions",
          not_comparable="Luo et al. ran tabular sets only (the authors' code: bank, credit, drive, news and two "
                         "synthetic), never images: the digits are the field's benchmarks' use of GRN, a setting the "
                         "paper does not claim anything about"),
    Claim("vflbench.esa.exact", PAPER, "Luo et al., the equality-solving attack",
          "ESA recovers the features exactly when the passive party has no more of them than the classes less one.",
          f"the paper's condition for an exact solution; {UNSOURCED}",
          reason="the grid's binary dataset gives one equation a sample for six or more unknowns; the exact case is "
                 "checked by the tests (tests/test_newattacks.py, wine, one unknown column), not by a grid; ESA has "
                 "no digits grid: it solves a logistic regression's equations, and the lab's image victims are "
                 "neural networks, which esa refuses"),
    _backdoor("vflbench.gr-backdoor.plants", "gr-backdoor-tabular", "Liu, Yi, Chen, abstract",
              "A feature party with a few labelled target samples plants a backdoor by gradient replacement.",
              BACKDOOR_REDUCED),
    _backdoor("vflbench.gr-backdoor.plants-digits", "gr-backdoor-digits", "Liu, Yi, Chen, abstract",
              "The same on the digits: the trigger calls up the target digit.", DIGITS_BACKDOOR_REDUCED),
    _high("vflbench.gr-backdoor.high-accuracy", "gr-backdoor-tabular", "a tabular task", BACKDOOR_REDUCED),
    _high("vflbench.gr-backdoor.high-accuracy-digits", "gr-backdoor-digits", "the digits", DIGITS_BACKDOOR_REDUCED),
    _main_task("vflbench.gr-backdoor.main-task", "gr-backdoor-tabular", "a tabular task", BACKDOOR_REDUCED),
    _main_task("vflbench.gr-backdoor.main-task-digits", "gr-backdoor-digits", "the digits", DIGITS_BACKDOOR_REDUCED),
    Claim("vflbench.gr-backdoor.blocked", PAPER, "Liu, Yi, Chen, abstract",
          "A combination of defences blocks the backdoor (here: noise on the returned gradient and its "
          "sparsification at once).",
          f"the abstract: 'the backdoor can be successfully blocked by a combination of these techniques without "
          f"hurting main task accuracy'; which techniques and at what strengths is {UNSOURCED}",
          Measure("gr-backdoor-digits", Beats(a=Select(NONE, "no defence"), b=Select({"send-back": COMBINED},
                                                                                      "noise + sparsify"),
                                              metric="backdoor_success", scale=SHARE, defended_b=True),
                  f"paired difference over seeds 0-2 (each its own draw), no defence minus {COMBINED}: backdoor "
                  f"success ({SUCCESS}); the main task accuracy it costs is judged apart "
                  "(vflbench.gr-backdoor.blocked-main-task)"),
          reduced=DIGITS_BACKDOOR_REDUCED,
          reason="the paper's defences are read as noise and sparsification of the returned gradient, the lab's "
                 "reading of the abstract's 'several defense techniques'; the strengths are the lab's"),
    Claim("vflbench.gr-backdoor.blocked-main-task", PAPER, "Liu, Yi, Chen, abstract",
          "The combination blocks the backdoor without hurting main task accuracy (here: noise on the returned "
          "gradient and its sparsification at once, against no defence).",
          "the abstract: 'without hurting main task accuracy', read here as no worse than the undefended model by "
          f"more than 5 points (a reading of the words, no number of the paper's); {UNSOURCED}",
          Measure("gr-backdoor-digits", Close(a=Select({"send-back": COMBINED}, "noise + sparsify"),
                                              b=Select(NONE, "no defence"), metric="accuracy", scale=SHARE,
                                              margin=0.05, one_sided=True, guard=""),
                  f"paired difference over seeds 0-2 (each its own draw), {COMBINED} minus no defence: the poisoned "
                  "model's clean test accuracy, no worse by more than 5 points"),
          reduced=DIGITS_BACKDOOR_REDUCED,
          reason="the defences and strengths are the lab's reading (vflbench.gr-backdoor.blocked)"),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset: the papers' numbers are not sourced here."""

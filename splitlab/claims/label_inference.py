"""Claims of Fu et al., *Label Inference Attacks Against Vertical Federated Learning* (USENIX Security 2022).

The feature parties of vertical FL infer the label party's labels: by completing their trained bottom model
with a few labelled samples (passive model completion, Sec. 4.1), after training it with a malicious local
optimiser (active, Sec. 4.2), or, without a top model, straight from the gradients' signs (direct, Sec. 4.3).
The lab's grids run the lab's CNN on mnist5k, trained with SGD 0.05 and momentum 0.9 for two epochs, seeds 0-2.
"""
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast, Beats, Trend
from splitlab.claims.stats import SHARE

PAPER = "fu"
ATTACKS = ("label-direct", "label-completion", "label-active")
DEVIATIONS = ()
"""The attacks declare their own deviations (data, MixMatch, the scale-up rule)."""
CITATION = ("Fu, Zhang, Ji, Chen, Wu, Li, Chen, Wang. Label Inference Attacks Against Vertical Federated "
            "Learning. USENIX Security 2022.")

REDUCED = ("mnist5k's ten digits, one feature party holding the whole image, the lab's CNN cut after its first "
           "dense layer, two epochs; the paper: CIFAR-10/100, CINIC-10, Tiny ImageNet, Yahoo Answers, Criteo, "
           "breast histopathology")
BCW = ("wdbc is the paper's BCW (scikit-learn's copy, each seed its own stratified 456/113 split, standardised on "
       "the training split; the paper's code takes a fixed 25% split), one feature party holding all 30 columns, the "
       "tabular MLP, Adam 1e-3 for ten epochs, supervised fine-tuning in place of MixMatch")
PASSIVE = {"gamma": 0.0}
ACTIVE = {"gamma": 1.0}

CLAIMS: list[Claim] = [
    Claim("fu.sec4.direct-exact", PAPER, "Sec. 4.3",
          "Without model splitting, direct label inference recovers every label from the gradients' signs.",
          "100% attack accuracy on every dataset (the paper's direct-attack results)",
          Measure("label-direct", AtLeast(Select({}, "multiclass and binary, seeds 0-2"), "label_accuracy", 1.0, SHARE),
                  "label accuracy over every round of two epochs, mean over cells"),
          reduced=REDUCED),
    Claim("fu.sec4.completion-labelled", PAPER, "Sec. 4.1 (known labels)",
          "Passive model completion infers labels better the more labelled samples the attacker has.",
          "accuracy rises with the number of known labels (the paper's figures on the auxiliary labels)",
          Measure("label-completion", Trend(select=Select(PASSIVE, "passive (gamma 0)"), x="labelled",
                                                    metric="label_accuracy", scale=SHARE),
                  "label accuracy of the training samples not labelled, mean over seeds 0-2 per labelled count"),
          reduced=REDUCED),
    Claim("fu.sec4.active-beats-passive", PAPER, "Sec. 4.2",
          "The malicious local optimiser makes model completion more accurate than the passive attack.",
          "the active attack's accuracy is above the passive one's on most datasets (the paper's tables)",
          Measure("label-completion", Beats(a=Select({**ACTIVE, "labelled": 4}, "active, 4 labels a class"),
                                            b=Select({**PASSIVE, "labelled": 4}, "passive, 4 labels a class"),
                                            metric="label_accuracy", scale=SHARE),
                  "paired label accuracy difference over seeds 0-2 at 4 labelled samples a class"),
          reduced=REDUCED),
    Claim("fu.sec4.direct-exact-bcw", PAPER, "Sec. 4.3 (BCW)",
          "Direct label inference recovers every label on Breast Cancer Wisconsin, where the label party has no model.",
          "100% attack accuracy on every dataset (the paper's direct-attack results); BCW is in the paper's code "
          "(`--dataset-name BCW`); its own number for BCW is not sourced here",
          Measure("tabular-direct", AtLeast(Select({"dataset": "wdbc"}, "wdbc, seeds 0-2"), "label_accuracy", 1.0,
                                            SHARE),
                  "label accuracy over every round of ten epochs, mean over seeds 0-2 (each its own split)"),
          reduced=BCW),
    Claim("fu.sec4.completion-labelled-bcw", PAPER, "Sec. 4.1 (BCW, known labels)",
          "On Breast Cancer Wisconsin, passive model completion infers labels better with more labelled samples.",
          "accuracy rises with the number of known labels; the paper's code gives BCW 20 known labels (10 a class)",
          Measure("tabular-completion", Trend(select=Select({"dataset": "wdbc", "top": "model"}, "wdbc, two-party "
                                                            "split"), x="labelled", metric="label_accuracy",
                                              scale=SHARE),
                  "label accuracy of the training samples not labelled, 1 against 10 labelled a class, paired by "
                  "seed 0-2"),
          reduced=BCW),
    Claim("fu.sec5.paper-datasets", PAPER, "Sec. 5",
          "The attacks' accuracies on the paper's image, text and tabular datasets with MixMatch completion.",
          "top-1 accuracies of passive and active completion per dataset, with 40 (CIFAR-10) to 800 known labels",
          reason="dataset: CIFAR-10/100, CINIC-10, Tiny ImageNet, Yahoo Answers, Criteo and the breast images are "
                 "not in this lab's data root, and MixMatch's training runs for hours on a CPU"),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset: the presets name their sources per number."""

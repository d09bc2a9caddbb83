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
    Claim("fu.sec5.paper-datasets", PAPER, "Sec. 5",
          "The attacks' accuracies on the paper's image, text and tabular datasets with MixMatch completion.",
          "top-1 accuracies of passive and active completion per dataset, with 40 (CIFAR-10) to 800 known labels",
          reason="dataset: CIFAR-10/100, CINIC-10, Tiny ImageNet, Yahoo Answers, Criteo and the breast images are "
                 "not in this lab's data root, and MixMatch's training runs for hours on a CPU"),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset: the presets name their sources per number."""

"""Claims of Liu, Zou, Kang et al., *Batch Label Inference and Replacement Attacks in Black-Boxed Vertical Federated
Learning* (arXiv 2112.05409), the one paper behind two attacks and two defences of the lab: batch label inference
(`bli`), the label replacement backdoor (`bli-replace`), and the confusional autoencoder (CAE) with its discrete
form (DCAE) that the paper proposes against both.

The paper's tables were not available to the lab (its paper store holds five other papers; the search corpora hold
its abstract and the opening of its arXiv page, and the authors' code, which gives its datasets and models but no
result): every claim is the abstract's, judged by a rule that needs no number of the paper's or by the abstract's
own word read as a number ('high accuracy': within 5 points of 1), and says where the paper's number would go that
it is not sourced. The grids are CPU-sized: mnist5k (each seed its own train/test draw) and wdbc, the lab's small
models, seeds 0-2; the paper's settings (PAPER_SETTINGS) are not run.
"""
from splitlab.claims.defence_claims import label_leak_claim
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtLeast, Beats, Fails
from splitlab.claims.stats import SHARE

PAPER = "liu"
ATTACKS = ("bli", "bli-replace", "label-norm")
DEFENCES = ("cae", "dcae")
"""The defences whose declared deviations these claims carry (docs/defences.md)."""
DEVIATIONS = ()
"""The attacks and defences declare their own deviations (data, settings, what the party reads)."""
CITATION = ("Liu, Zou, Kang, Liu, He, Yi, Yang. Batch Label Inference and Replacement Attacks in Black-Boxed "
            "Vertical Federated Learning. arXiv 2112.05409 (2021).")

UNSOURCED = ("not sourced: the paper's tables were not available to the lab (its abstract only), so no number of "
             "the paper's is quoted here")
PAPER_SETTINGS = ("the paper's settings from the authors' code (FLAIR-THU/TrustworthyFederatedLearning, LabelDefender; "
                  "its results are not sourced): MNIST and NUS-WIDE on a two-layer MLP, CIFAR-10 and CIFAR-100 on "
                  "ResNet-18 or -20, two parties (four for the multi-party replacement backdoor), the main task on "
                  "MNIST and NUS-WIDE at learning rate 0.001 for 30 and 20 epochs, CIFAR at 0.003 for 100 and 200")
BLI_REDUCED = ("mnist5k (10 classes) and wdbc (binary), one passive party holding every feature, the lab's small "
               "MLPs sending class scores, one epoch (mnist5k) or five (wdbc), the last 4 rounds attacked")
BLI_EASIER = ("one passive party and no other party's scores: the unseen scores the attacker fits are exactly 0, "
              "where its dummy starts; the paper's passive party does not know the other parties' scores")
REPLACE_REDUCED = ("mnist5k, the small MLP cut 1, 5 epochs, 50 known target samples, 100 poisoned (wdbc: the "
                   "tabular MLP cut 6, 20 epochs, 5 known, 40 poisoned)")
NONE = {"send-back": "none"}
_NOT_COMPARABLE = ("the paper's attack is its batch label inference on multiclass data (MNIST, CIFAR, NUS-WIDE); the "
                   "lab runs norm scoring on a binary task, where the autoencoder's confusion is a two-class map")
FROM_CHANCE = ("leak AUC of the batch's recovered class scores (each sample's true class against the others), mnist5k, "
               "batch 64, read as its distance from chance, |AUC - 0.5|, over seeds 0-2 (each its own draw): under "
               "CAE the recovered scores rank the true class last (AUC about 0.04, label accuracy about 0.002 against "
               "the majority class's 0.12), which leaks as much read the other way to an attacker that knows it faces "
               "CAE; a defence that pushes the attack below chance has not blocked it")
SUCCESS = ("share of triggered test inputs (not of the target class) the poisoned model labels the target, mean "
           "over seeds 0-2")


def _plants(claim_id: str, sweep: str, claim: str) -> Claim:
    return Claim(claim_id, PAPER, "abstract", claim, f"the abstract; {UNSOURCED}",
                 Measure(sweep, Fails(Select(NONE, "undefended"), "backdoor_success", scale=SHARE, fails=False),
                         f"{SUCCESS}, against the same model trained unpoisoned on the same inputs"),
                 reduced=REPLACE_REDUCED)


def _cae_blocks_bli(defence: str, claim: str) -> Claim:
    return Claim(f"liu.{defence.split(':')[0]}.blocks-bli", PAPER, "abstract; Sec. 6", claim,
                 f"the abstract: the attacks 'can be successfully blocked' by CoAE; {UNSOURCED}",
                 Measure("bli-cae", Fails(Select({"send-back": defence}, defence), "leak_auc", scale=SHARE,
                                          two_sided=True), FROM_CHANCE),
                 reduced=BLI_REDUCED)


def _cae_blocks_replacement(defence: str, claim: str) -> Claim:
    return Claim(f"liu.{defence.split(':')[0]}.blocks-replacement", PAPER, "abstract; Sec. 6", claim,
                 f"the abstract: the attacks 'can be successfully blocked' by CoAE; {UNSOURCED}",
                 Measure("bli-replace-digits", Beats(a=Select(NONE, "no defence"),
                                                     b=Select({"send-back": defence}, defence),
                                                     metric="backdoor_success", scale=SHARE, defended_b=True),
                         f"paired difference over seeds 0-2 (each its own draw), no defence minus {defence}: "
                         f"backdoor success ({SUCCESS}), mnist5k"),
                 reduced=REPLACE_REDUCED)


CLAIMS: list[Claim] = [
    Claim("liu.bli.high-accuracy", PAPER, "abstract",
          "Private labels can be reconstructed with high accuracy from black-boxed VFL's batch-level gradients.",
          f"the abstract: 'reconstructed with high accuracy' (read here as within 5 points of 1); {UNSOURCED}",
          Measure("bli-batch", AtLeast(Select({"batch-size": 64}, "batch 64"), "label_accuracy", 1.0, SHARE,
                                          reading="'reconstructed with high accuracy'"),
                  "label accuracy of the last 4 rounds' samples, mean over seeds 0-2 (each its own train/test "
                  "draw), beside the majority class"),
          reduced=BLI_REDUCED, easier=BLI_EASIER),
    Claim("liu.bli.tabular", PAPER, "abstract",
          "The same on a tabular task: the batch's labels beat the majority class.",
          f"the abstract's claim, on the lab's tabular set; {UNSOURCED}",
          Measure("bli-tabular", Fails(Select({"batch-size": 32}, "batch 32"), "label_accuracy", scale=SHARE,
                                       fails=False),
                  "label accuracy of the last 4 rounds' samples, mean over seeds 0-2, against the majority class"),
          reduced=BLI_REDUCED, easier=BLI_EASIER),
    _plants("liu.bli-replace.plants", "bli-replace-digits",
            "Swapping a poisoned sample's gradient for a known target sample's plants a label replacement backdoor "
            "(the digits)."),
    _plants("liu.bli-replace.tabular", "bli-replace-tabular",
            "The same label replacement backdoor on a tabular task."),
    _cae_blocks_bli("cae:lam=1", "CAE (lambda 1) blocks batch label inference: the labels the attack recovers "
                                 "are the autoencoder's confused ones."),
    _cae_blocks_bli("dcae:lam=1", "DCAE (CAE plus DiscreteSGD, lambda 1) blocks batch label inference."),
    _cae_blocks_replacement("cae:lam=1", "CAE (lambda 1) blocks the label replacement backdoor."),
    _cae_blocks_replacement("dcae:lam=1", "DCAE (lambda 1) blocks the label replacement backdoor."),
    label_leak_claim(
        "liu.cae.lowers-label-leak", PAPER, "Sec. 6 (CAE)",
        "CAE at VFLAIR's strongest lambda (1) lowers label inference from the gradients the label party sends back.",
        "MNIST, CIFAR-10/100 and NUS-WIDE, the paper's batch label inference attack", "cae:lam=1", _NOT_COMPARABLE),
    label_leak_claim(
        "liu.dcae.lowers-label-leak", PAPER, "Sec. 6 (DCAE)",
        "DCAE (CAE plus DiscreteSGD) at lambda 1 lowers label inference from the gradients the label party sends "
        "back.", "as CAE's, with DiscreteSGD's bins", "dcae:lam=1", _NOT_COMPARABLE),
    Claim("liu.bli.paper-tables", PAPER, "experiments",
          "Batch label inference and replacement at the paper's own datasets, batch sizes and defences (CoAE, DP).",
          f"{UNSOURCED}; {PAPER_SETTINGS}",
          reason=f"{UNSOURCED}; no dataset of the paper's is run here (full MNIST is the paper-size "
                 "grids' dataset: `splitlab sweep --paper bli-cae --paper-size`); CAE and DCAE run against BLI "
                 "(bli-cae) and the replacement backdoor (bli-replace-digits) at the lab's size"),
]

PAPER_PRESETS: dict = {}
"""No `*.paper` preset: the paper's numbers are not sourced here."""

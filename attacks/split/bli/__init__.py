"""Batch label inference (BLI): a passive party of black-boxed VFL recovers the labels of a batch from the
batch-level gradient of its own model.

`attack.py` holds the gradient inversion model; `settings.py` the settings; the experiment is the label attacks'
shared one (`attacks.split.labels`), its victim without a top model by the preset. The same paper's label
replacement backdoor is `bli-replace` (`replace.py`), on the poisoning experiment (`attacks.split.poisoning`).
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import AttackSpec, Deviation, LabelConfig, Preset, label_experiment
from attacks.split.bli.attack import BatchLabelInference
from attacks.split.bli.papers import BLI_DATA, BLI_NUMBERS, BLI_PAPER
from attacks.split.bli.replace import REPLACE_SPEC
from attacks.split.bli.settings import BatchLabelSettings

__all__ = ["SPEC", "REPLACE_SPEC", "BatchLabelInference", "BatchLabelSettings", "BatchLabelConfig"]


@dataclass(frozen=True, kw_only=True)
class BatchLabelConfig(LabelConfig):
    attack: ClassVar[str] = "bli"


VICTIM = {"top": "none", "task": "multiclass", "arch": "small-mlp", "epochs": 1}

SPEC = AttackSpec(
    name="bli", setting="split",
    title="Batch label inference: the labels of a batch from the batch-level gradient of the passive party's model",
    paper=BLI_PAPER, observes=("gradients",), settings=BatchLabelSettings, attack=BatchLabelInference,
    default="bli.liu",
    experiment=label_experiment(BatchLabelConfig),
    presets=(
        Preset("bli.liu", "Liu et al.'s batch label inference: dummy labels and the unseen parties' dummy scores "
                          "fitted to one batch's parameter gradient (the paper's method; its Adam steps and rate "
                          "are ours, unsourced); the last 4 rounds of one epoch, batch 64, multi-class digits",
               experiment=VICTIM),
        Preset("bli.tabular", "ours: the same on wdbc (binary, 30 features, tabular MLP), batch 32",
               experiment={**VICTIM, "dataset": "wdbc", "arch": "tabular-mlp", "task": "binary", "batch_size": 32,
                           "epochs": 5}),
    ),
    smoke={"rounds": 1, "iterations": 150},
    deviations=(BLI_DATA, BLI_NUMBERS,
                Deviation("what the party reads", "the batch-level parameter gradient HE-protected VFL decrypts for "
                          "it", "the per-sample cut gradients the lab's protocol sends in the clear, reduced by the "
                          "attack to that same batch-level gradient before anything else reads them",
                          "the lab's protocol has no homomorphic encryption; the reduction gives the attack exactly "
                          "the paper's observation")),
)

"""Norm scoring: the feature party ranks its samples by the norm of the cut gradient it received (Li et al.).

`attack.py` reads like the paper's Sec. 3.1; `settings.py` holds the settings; the experiment that trains the
victim and scores the answer is the label attacks' shared one (`attacks.split.labels`).
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import LI, LI_DATA, LI_MODEL, AttackSpec, Deviation, LabelConfig, Preset, label_experiment
from attacks.split.label_norm.attack import NormScoring
from attacks.split.label_norm.settings import NormSettings

__all__ = ["SPEC", "NormScoring", "NormSettings", "NormConfig"]


@dataclass(frozen=True, kw_only=True)
class NormConfig(LabelConfig):
    attack: ClassVar[str] = "label-norm"


SPEC = AttackSpec(
    name="label-norm", setting="split",
    title="Norm scoring: the feature party ranks its samples by the norm of the cut gradient it received",
    paper=LI, observes=("gradients",), settings=NormSettings, attack=NormScoring, default="label-norm.li",
    experiment=label_experiment(NormConfig),
    presets=(
        Preset("label-norm.li", "Li et al. Sec. 3.1: the score is the gradient norm, every round of training scored "
                                "(the leak AUC is its mean over the rounds)"),
        Preset("label-norm.last-epoch", "ours: only the last 63 rounds (the last epoch of mnist5k at batch 64)",
               {"iterations": 63}),
    ),
    smoke={"arch": "small-mlp", "cut_layer": 1, "epochs": 1, "iterations": 1},
    deviations=(LI_DATA, LI_MODEL,
                Deviation("label accuracy", "none (the leak AUC only)", "positive where the round's min-max scaled "
                          "norm exceeds 1/2 (VFLAIR's rule for norm scoring)", "a label accuracy beside the AUC, in "
                          "the one metrics schema")),
)

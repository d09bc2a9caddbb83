"""Gradient-replacement backdoor (Liu, Yi, Chen. Backdoor attacks and defenses in feature-partitioned
collaborative learning. ICML 2020 workshop on federated learning): a feature party that knows a few samples of the
target class stamps its trigger on the samples it poisons and backpropagates, in place of their gradient, the last
gradient of a known target sample amplified by gamma. The label party trains on true labels and still learns the
trigger as the target class. The mechanism is `attacks.split.poisoning.replacement`; the experiment the backdoors'
shared one (`attacks.split.poisoning`), the unpoisoned victim beside the poisoned one.
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import (DIGITS_BACKDOOR_VICTIM, AttackSpec, Backdoor, BackdoorConfig, BackdoorSettings, Deviation,
                         Preset, backdoor_experiment, backdoor_success)

__all__ = ["SPEC", "GradientReplacementBackdoor", "GradientReplacementConfig"]

PAPER = ("Liu, Yi, Chen. Backdoor Attacks and Defenses in Feature-partitioned Collaborative Learning. ICML 2020 "
         "Workshop on Federated Learning for User Privacy and Data Confidentiality")


class GradientReplacementBackdoor(Backdoor):
    name = "gr-backdoor"


@dataclass(frozen=True, kw_only=True)
class GradientReplacementConfig(BackdoorConfig):
    attack: ClassVar[str] = "gr-backdoor"


SPEC = AttackSpec(
    name="gr-backdoor", setting="split",
    title="Gradient-replacement backdoor: a feature party with a few labelled target samples plants a trigger",
    paper=PAPER, observes=("gradients",), settings=BackdoorSettings, attack=GradientReplacementBackdoor,
    default="gr-backdoor.liu", evaluate=backdoor_success,
    experiment=backdoor_experiment(GradientReplacementConfig),
    presets=(
        Preset("gr-backdoor.liu", "Liu et al.'s gradient replacement (the last known target sample's gradient, "
                                  "amplified); ours: gamma 2, 10 known target samples, 100 poisoned, a 4x4 patch, "
                                  "CNN cut 6, 2 epochs",
               {"amplify": 2.0}, experiment={"top": "model", "task": "multiclass", "arch": "cnn", "cut_layer": 6,
                                             "epochs": 2}),
        Preset("gr-backdoor.tabular", "ours: the same on wdbc (binary, tabular MLP cut 6), the target benign, 5 "
                                      "known, 40 poisoned, the last 3 features as the trigger, 20 epochs",
               {"amplify": 2.0, "known": 5, "poisoned": 40, "trigger_size": 3, "target": 0},
               experiment={"top": "model", "dataset": "wdbc", "arch": "tabular-mlp", "task": "binary",
                           "batch_size": 32, "epochs": 20}),
        Preset("gr-backdoor.digits", "ours: the same on the digits with the small MLP cut 1 and 5 epochs (the CNN's "
                                     "2 epochs plant nothing on the CPU), gamma 2, 10 known, 100 poisoned, a 4x4 "
                                     "patch",
               {"amplify": 2.0}, experiment=DIGITS_BACKDOOR_VICTIM),
    ),
    smoke={"epochs": 1, "arch": "small-mlp", "cut_layer": 1},
    deviations=(
        Deviation("data", "the paper's datasets (not sourced here) split between two parties", "mnist5k or wdbc, one "
                  "feature party holding every feature",
                  "no download on a fresh machine; the lab's label victim is two-party"),
        Deviation("settings", "the paper's amplification, counts and training", "the lab's (CPU-sized), named in each "
                  "preset", "the paper's text was not available to the lab when this attack was written, so its "
                  "numbers are not sourced here; the method is"),
    ),
)

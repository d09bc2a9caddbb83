"""The label replacement backdoor of the batch label inference paper (`bli-replace`): in black-boxed VFL the
passive party cannot read the encrypted per-sample gradients, but it can swap them. For each sample it poisons
(its trigger stamped on its own features) it hands back, in place of that sample's gradient, the one of a sample
it knows to be of the target class in the same batch, unscaled; the label party's model learns the trigger as the
target label. The experiment is the backdoors' shared one (`attacks.split.poisoning`)."""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import (DIGITS_BACKDOOR_VICTIM, AttackSpec, Backdoor, BackdoorConfig, BackdoorSettings, Deviation,
                         Preset, backdoor_experiment, backdoor_success)
from attacks.split.bli.papers import BLI_DATA, BLI_NUMBERS, BLI_PAPER

__all__ = ["REPLACE_SPEC", "LabelReplacement", "ReplacementConfig"]


class LabelReplacement(Backdoor):
    name = "bli-replace"


@dataclass(frozen=True, kw_only=True)
class ReplacementConfig(BackdoorConfig):
    attack: ClassVar[str] = "bli-replace"


VICTIM = {"top": "model", "task": "multiclass", "arch": "cnn", "cut_layer": 6, "epochs": 2}

REPLACE_SPEC = AttackSpec(
    name="bli-replace", setting="split",
    title="Label replacement backdoor: the passive party swaps a poisoned sample's gradient for a known target "
          "sample's",
    paper=BLI_PAPER, observes=("gradients",), settings=BackdoorSettings, attack=LabelReplacement,
    default="bli-replace.liu", evaluate=backdoor_success,
    experiment=backdoor_experiment(ReplacementConfig),
    presets=(
        Preset("bli-replace.liu", "Liu et al.'s gradient replacement (a known target sample's gradient from the same "
                                  "batch, unscaled); ours: 10 known target samples, 100 poisoned (2.5% of the "
                                  "training split), a 4x4 patch, CNN cut 6, 2 epochs",
               {"same_round": True}, experiment=VICTIM),
        Preset("bli-replace.tabular", "ours: the same on wdbc (binary, tabular MLP cut 6), the target benign, 5 "
                                      "known, 40 poisoned, the last 3 features as the trigger, 20 epochs",
               {"same_round": True, "known": 5, "poisoned": 40, "trigger_size": 3, "target": 0},
               experiment={"top": "model", "dataset": "wdbc", "arch": "tabular-mlp", "task": "binary",
                           "batch_size": 32, "epochs": 20}),
        Preset("bli-replace.digits", "ours: the same on the digits with the small MLP cut 1 and 5 epochs, 50 known "
                                     "target samples (a known one in about half the batches of 64), 100 poisoned, a "
                                     "4x4 patch", {"same_round": True, "known": 50}, experiment=DIGITS_BACKDOOR_VICTIM),
    ),
    smoke={"epochs": 1, "arch": "small-mlp", "cut_layer": 1},
    deviations=(BLI_DATA, BLI_NUMBERS,
                Deviation("messages swapped", "encrypted per-sample gradients, swapped unread", "the per-sample cut "
                          "gradients in the clear, swapped the same way", "the lab's protocol has no homomorphic "
                          "encryption; the swap reads nothing of them but which rows are the known samples'")),
)

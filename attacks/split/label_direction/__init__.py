"""Direction scoring: the feature party scores its samples by the cosine of their cut gradients with that of a
sample whose label it knows (Li et al.).

`attack.py` reads like the paper's Sec. 3.2; `settings.py` holds the settings; the experiment is the label
attacks' shared one (`attacks.split.labels`).
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import LI, LI_DATA, LI_MODEL, AttackSpec, Deviation, LabelConfig, Preset, label_experiment
from attacks.split.label_direction.attack import DirectionScoring
from attacks.split.label_direction.settings import DirectionSettings

__all__ = ["SPEC", "DirectionScoring", "DirectionSettings", "DirectionConfig"]


@dataclass(frozen=True, kw_only=True)
class DirectionConfig(LabelConfig):
    attack: ClassVar[str] = "label-direction"


SPEC = AttackSpec(
    name="label-direction", setting="split",
    title="Direction scoring: the feature party scores its samples by the cosine of their cut gradients with a "
          "known positive's",
    paper=LI, observes=("gradients",), settings=DirectionSettings, attack=DirectionScoring,
    default="label-direction.li",
    experiment=label_experiment(DirectionConfig),
    presets=(
        Preset("label-direction.li", "Li et al. Sec. 3.2: cosine with one known positive example per batch, every "
                                     "round of training scored"),
        Preset("label-direction.last-epoch", "ours: only the last 63 rounds (the last epoch of mnist5k at batch 64)",
               {"iterations": 63}),
    ),
    smoke={"arch": "small-mlp", "cut_layer": 1, "epochs": 1, "iterations": 1},
    deviations=(LI_DATA, LI_MODEL,
                Deviation("reference gradient", "the known positive's gradient recomputed without the defence's "
                          "noise (the paper's code)", "the known positive's gradient as the party received it, "
                          "defended", "the attacker has only what it received"),
                Deviation("rounds without a positive", "skipped (no training step, no score)", "trained; scored "
                          "against the last known positive's gradient", "every round of the lab's protocol trains")),
)

"""Direct label inference: without a top model, the sign of the gradient of the class scores names the label
(Fu et al.).

`attack.py` reads like the paper's Sec. 4.3; `settings.py` holds the settings; the experiment is the label
attacks' shared one (`attacks.split.labels`), its victim without a top model by the preset.
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import FU, FU_DATA, AttackSpec, LabelConfig, Preset, label_experiment
from attacks.split.label_direct.attack import DirectInference
from attacks.split.label_direct.settings import DirectSettings

__all__ = ["SPEC", "DirectInference", "DirectSettings", "DirectConfig"]


@dataclass(frozen=True, kw_only=True)
class DirectConfig(LabelConfig):
    attack: ClassVar[str] = "label-direct"


SPEC = AttackSpec(
    name="label-direct", setting="split",
    title="Direct label inference: without a top model the sign of the returned gradient names each label",
    paper=FU, observes=("gradients",), settings=DirectSettings, attack=DirectInference, default="label-direct.fu",
    experiment=label_experiment(DirectConfig),
    presets=(
        Preset("label-direct.fu", "Fu et al. Sec. 4.3: VFL without model splitting (the label party sums the class "
                                  "scores), every round read; multi-class task",
               experiment={"top": "none", "task": "multiclass"}),
        Preset("label-direct.binary", "ours: the same on the binary task (one digit against the rest)",
               experiment={"top": "none", "task": "binary"}),
    ),
    smoke={"arch": "small-mlp", "epochs": 1, "iterations": 1},
    deviations=(FU_DATA,),
)

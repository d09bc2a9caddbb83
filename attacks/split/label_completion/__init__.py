"""Model completion, passive and active: the feature party completes its trained bottom model into a classifier
with a few labelled samples; actively, it first trains that model with a malicious local optimiser (Fu et al.).

`attack.py` reads like the paper's Sec. 4.1-4.2; `optimizer.py` is the malicious optimiser; `settings.py` holds
both attacks' settings; the experiment is the label attacks' shared one (`attacks.split.labels`).
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import FU, FU_DATA, AttackSpec, Deviation, LabelConfig, Preset, label_experiment
from attacks.split.label_completion.attack import ActiveCompletion, ModelCompletion, completion_test_accuracy
from attacks.split.label_completion.settings import ActiveSettings, CompletionSettings

__all__ = ["SPEC", "ACTIVE_SPEC", "ModelCompletion", "ActiveCompletion", "CompletionSettings", "ActiveSettings"]

FU_VICTIM = {"task": "multiclass", "optimizer": "momentum", "lr": 0.05}
"""Fu et al. train every party with SGD and momentum 0.9 (their scripts: lr 0.05-0.1 on images); at 0.1 the lab's
CNN on mnist5k does not train in two epochs, at 0.05 it does."""
SSL = Deviation("training of the completed model", "MixMatch semi-supervised learning on the labelled and the "
                "unlabelled samples", "supervised fine-tuning on the labelled samples only", "the attack as the lab "
                "states it: fine-tune the bottom model and a head on the few labelled samples; MixMatch's "
                "augmentations are image-specific and its training long on a CPU")


@dataclass(frozen=True, kw_only=True)
class CompletionConfig(LabelConfig):
    attack: ClassVar[str] = "label-completion"


@dataclass(frozen=True, kw_only=True)
class ActiveConfig(LabelConfig):
    attack: ClassVar[str] = "label-active"


SPEC = AttackSpec(
    name="label-completion", setting="split",
    title="Passive model completion: the feature party fine-tunes its bottom model and a head on a few labelled "
          "samples",
    paper=FU, observes=("bottom-model",), settings=CompletionSettings, attack=ModelCompletion,
    default="label-completion.fu", evaluate=completion_test_accuracy,
    experiment=label_experiment(CompletionConfig),
    presets=(
        Preset("label-completion.fu", "Fu et al. Sec. 4.1: 4 labelled samples a class (40 on CIFAR-10), a "
                                      "one-hidden-layer head; the victim trained with SGD and momentum",
               experiment=FU_VICTIM),
        Preset("label-completion.binary", "ours: the binary task (one digit against the rest), 4 labelled samples "
                                          "a class", experiment={**FU_VICTIM, "task": "binary"}),
    ),
    smoke={"arch": "small-mlp", "cut_layer": 1, "epochs": 1, "iterations": 30},
    deviations=(FU_DATA, SSL),
)

ACTIVE_SPEC = AttackSpec(
    name="label-active", setting="split",
    title="Active model completion: the feature party trains its bottom model with a malicious local optimiser, "
          "then completes it",
    paper=FU, observes=("bottom-model",), settings=ActiveSettings, attack=ActiveCompletion,
    default="label-active.fu", evaluate=completion_test_accuracy,
    experiment=label_experiment(ActiveConfig),
    presets=(
        Preset("label-active.fu", "Fu et al. Sec. 4.2: the malicious SGD (momentum 0.9, scale-up up to 5x, Fu et "
                                  "al.'s code), then completion as label-completion.fu", experiment=FU_VICTIM),
    ),
    smoke={"arch": "small-mlp", "cut_layer": 1, "epochs": 1, "iterations": 30},
    deviations=(FU_DATA, SSL,
                Deviation("scale-up rule", "the ratio of this step's gradient to the last scaled one (their code)",
                          "the ratio of this step's momentum direction to the last unscaled one", "the scale-up "
                          "then reads the gradient's own trend, not the optimiser's past scaling")),
)

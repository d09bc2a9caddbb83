"""UnSplit's label inference: in the U-shaped split the attacker matches the gradients it receives against a
clone of the label party's output layer, label by label (Erdogan et al.).

`attack.py` reads like the paper's Sec. 5; `settings.py` holds the settings; the experiment is the label
attacks' shared one (`attacks.split.labels`), its victim U-shaped by the preset.
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import AttackSpec, Deviation, LabelConfig, Preset, label_experiment
from attacks.split.label_unsplit.attack import UnsplitLabels
from attacks.split.label_unsplit.settings import UnsplitLabelSettings

__all__ = ["SPEC", "UnsplitLabels", "UnsplitLabelSettings", "UnsplitLabelConfig"]


@dataclass(frozen=True, kw_only=True)
class UnsplitLabelConfig(LabelConfig):
    attack: ClassVar[str] = "label-unsplit"


SPEC = AttackSpec(
    name="label-unsplit", setting="split",
    title="UnSplit's label inference: match the returned gradients against a clone of the label party's output "
          "layer, label by label",
    paper="Erdogan, Kupcu, Cicek. UnSplit: Data-Oblivious Model Inversion, Model Stealing, and Label Inference "
          "Attacks Against Split Learning. WPES 2022",
    observes=("gradients",), settings=UnsplitLabelSettings, attack=UnsplitLabels, default="label-unsplit.original",
    experiment=label_experiment(UnsplitLabelConfig),
    presets=(
        Preset("label-unsplit.original", "UnSplit's label inference demo (github.com/ege-erdogan/unsplit): the MNIST "
                                         "network split before its last layer, all ten classes, online as the "
                                         "rounds come; the clone's steps, rate and window of 4 rounds are ours",
               experiment={"top": "linear", "task": "multiclass"}),
    ),
    smoke={"arch": "small-mlp", "epochs": 1, "iterations": 1, "batch_size": 256},
    deviations=(
        Deviation("what is matched", "the gradient of the label party's output-layer weights (the UnSplit code "
                  "compares it for each candidate label)", "the gradient with respect to the attacker's own output, "
                  "what its party receives in the protocol", "the attacker observes only what crosses the cut"),
        Deviation("labelled samples", "none (the weight gradient's rows are indexed by class)", "one a class, to "
                  "name the clone's classes", "the cut gradient fixes the classes only up to a permutation"),
        Deviation("clone training", "cross-entropy on the inferred labels, Adam 1e-3, batch 1 on 100 test images",
                  "gradient matching on the inferred labels of the last 4 rounds at each round (the engine, Adam 1e-2, "
                  "20 steps); a class no sample chooses is restarted at the worst-explained sample",
                  "the clone is fitted to what is observed; without the restart, classes that win no sample early "
                  "are never fitted (on mnist5k 3 of 10 stayed empty, label accuracy 0.70 instead of 0.997)"),
        Deviation("data", "MNIST, Fashion-MNIST, CIFAR-10", "mnist5k", "no download on a fresh machine"),
    ),
)

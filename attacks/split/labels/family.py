"""How a label-inference attack joins the one split experiment (`attacks.split.run_split`): its spec's
`experiment` is that experiment over the label family (`attacks.split.labels.experiment.LabelFamily`) and its own
config, a `LabelConfig` subclass naming the attack. Every label attack, the lab's and a plug-in's, declares it by
`label_experiment(Config)` (from `attacks.kit`)."""
from __future__ import annotations

from attacks.split.experiment import Experiment
from attacks.split.labels.experiment import LABELS
from attacks.split.run_split import split_experiment

__all__ = ["label_experiment"]


def label_experiment(config: type) -> Experiment:
    """The label attacks' experiment (train the victim with the attacking party observing, attack, score) for
    `config`, a `LabelConfig` subclass whose `attack` is the spec's name."""
    return split_experiment(config, LABELS)

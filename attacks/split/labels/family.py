"""How a label-inference attack joins the family's one experiment: its spec's `experiment` is the shared one
(`attacks.split.labels.experiment`) over its own config, a `LabelConfig` subclass naming the attack. Every label
attack, the lab's and a plug-in's, declares it by `label_experiment(Config)` (from `attacks.kit`)."""
from __future__ import annotations

from attacks.split.experiment import Experiment
from attacks.split.labels import experiment

__all__ = ["label_experiment"]


def label_experiment(config: type) -> Experiment:
    """The label attacks' experiment (train the victim with the attacking party observing, attack, score) for
    `config`, a `LabelConfig` subclass whose `attack` is the spec's name."""
    return Experiment(config, experiment.prepare, experiment.execute, experiment.summary)

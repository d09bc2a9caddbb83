"""Feature inference from model predictions (Luo, Wu, Xiao, Ooi, ICDE 2021): the label party, holding the trained
VFL model and its own features, infers a passive party's features from the predictions the deployed model returns.
Two attacks, one spec each: the equality-solving attack on a logistic regression (`esa.py`) and the generative
regression network on any model (`grn.py`); their experiment is `experiment.py`, what the attacker has `view.py`.
"""
from dataclasses import dataclass
from typing import ClassVar

from attacks.kit import AttackSpec, Deviation, Experiment, Preset
from attacks.split.feature_inference import experiment
from attacks.split.feature_inference.esa import EqualitySolving
from attacks.split.feature_inference.experiment import FeatureConfig, mean_baseline
from attacks.split.feature_inference.grn import GenerativeRegression
from attacks.split.feature_inference.settings import EsaSettings, GrnSettings

__all__ = ["SPEC", "GRN_SPEC", "EqualitySolving", "GenerativeRegression", "EsaConfig", "GrnConfig"]

PAPER = "Luo, Wu, Xiao, Ooi. Feature Inference Attack on Model Predictions in Vertical Federated Learning. ICDE 2021"


@dataclass(frozen=True, kw_only=True)
class EsaConfig(FeatureConfig):
    attack: ClassVar[str] = "esa"


@dataclass(frozen=True, kw_only=True)
class GrnConfig(FeatureConfig):
    attack: ClassVar[str] = "grn"


DATA = Deviation("data", "UCI tabular sets and synthetic data (from the authors' code: bank, 2 classes and 20 "
                 "features; credit, 2 and 23; drive, 11 and 48; news, 5 and 59; two synthetic sets)",
                 "wdbc and wine (tabular), mnist5k (digits, columns of pixels)",
                 "no download on a fresh machine")
NUMBERS = Deviation("settings", "the paper's training and attack settings", "the lab's (CPU-sized), named in each "
                    "preset", "the paper's text was not available to the lab when these attacks were written, so its "
                    "numbers are not sourced here; the methods are")
THREAT = Deviation("what the attacker holds", "the active party with its own features and the trained model's "
                   "parameters, the passive party's included", "the label party holding the features of the first "
                   "--held of --parties feature parties and every party's trained model", "the lab's label party "
                   "holds no features; holding some parties' columns is the same knowledge")

LR = {"dataset": "wdbc", "arch": "tabular-lr", "aggregate": "sum", "parties": 2, "task": "binary", "positive": 0,
      "epochs": 20, "batch_size": 32}

SPEC = AttackSpec(
    name="esa", setting="split",
    title="Equality-solving attack: the label party solves a logistic regression's predictions for a passive "
          "party's features",
    paper=PAPER, observes=("bottom-model",), settings=EsaSettings, attack=EqualitySolving, default="esa.luo",
    evaluate=mean_baseline,
    experiment=Experiment(EsaConfig, experiment.prepare, experiment.execute, experiment.summary),
    presets=(
        Preset("esa.luo", "Luo et al.'s ESA on a logistic regression: the attacker holds half the columns "
                          "(ours: wdbc, two parties, 20 epochs)", experiment=LR),
        Preset("esa.wine", "ours: wine (three classes: two equations a sample), three parties, the attacker "
                           "holding two", {"held": 2},
               experiment={**LR, "dataset": "wine", "task": "multiclass", "parties": 3, "epochs": 40}),
    ),
    smoke={"epochs": 2},
    deviations=(DATA, NUMBERS, THREAT),
)

GRN_SPEC = AttackSpec(
    name="grn", setting="split",
    title="Generative regression network: the label party trains a generator of a passive party's features to "
          "reproduce the model's predictions",
    paper=PAPER, observes=("bottom-model",), settings=GrnSettings, attack=GenerativeRegression, default="grn.luo",
    evaluate=mean_baseline,
    experiment=Experiment(GrnConfig, experiment.prepare, experiment.execute, experiment.summary),
    presets=(
        Preset("grn.luo", "Luo et al.'s GRN on a neural network: the tabular MLP split over two parties "
                          "(ours: wdbc, 20 epochs; 2000 Adam steps at 1e-3)",
               experiment={**LR, "arch": "tabular-mlp", "aggregate": "concat", "cut_layer": 2}),
        Preset("grn.digits", "ours: mnist5k, the MLP over four parties (columns of pixels), the attacker holding "
                             "three; 500 predictions", {"held": 3, "predictions": 500},
               experiment={"dataset": "mnist5k", "arch": "small-mlp", "cut_layer": 1, "parties": 4,
                           "task": "multiclass", "epochs": 2}),
    ),
    smoke={"epochs": 2, "iterations": 200},
    deviations=(DATA, NUMBERS, THREAT,
                Deviation("generator", "the paper's generator", "dense 600-200-100 with ReLU, sigmoid out on pixels, "
                          "linear on standardised columns, its output layer starting at zero",
                          "the lab's reading; the widths are not sourced here (the authors' code trains it for "
                          "60 epochs)")),
)

"""Feature inference from model predictions as an experiment: train the VFL model through the protocol (K feature
parties, `--parties`, the attacker holding the first `--held` parties' features), deploy it on the prediction
samples (the first of the test split), give the label party what it has (`view.PredictionView`), and score its
guess of the other parties' features against them, beside the training mean of each feature (the trivial
baseline: what the attacker would guess knowing only the features' distribution)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from attacks.kit import (Outcome, Run, SplitConfig, SplitlabError, TrainConfig, Truth, attack_and_score, feature_mse,
                         load_data, require_data, resolve_device, train_split, training_curves_figure)
from attacks.split.feature_inference.view import JointModel, PredictionView

__all__ = ["FeatureConfig", "Prepared", "prepare", "execute", "summary", "mean_baseline"]


@dataclass(frozen=True, kw_only=True)
class FeatureConfig(SplitConfig):
    """`splitlab attack esa|grn`: the attack's preset and settings, and the VFL model's training options."""
    attack: ClassVar[str]
    victim_options: ClassVar[type] = TrainConfig

    def check(self) -> None:
        super().check()
        victim = self.victim_config
        check_victim = getattr(self.bound_spec.make(self.settings), "check_victim", None)
        if check_victim is not None:
            check_victim(victim)
        held = self.settings.held
        if held >= victim.parties:
            raise SplitlabError(f"--held {held}: with --parties {victim.parties} the attacker would hold every "
                                f"feature; give --held below --parties (or more --parties)")

    def check_data(self) -> None:
        require_data(self.victim_config.dataset, self.victim_config.data_root)

    @functools.cached_property
    def victim_config(self) -> TrainConfig:
        base = dict(self.bound_spec.preset(self.preset).experiment)
        return TrainConfig(**{**base, **self.runtime, **self.victim})


@dataclass(frozen=True, eq=False)
class Prepared:
    config: FeatureConfig
    attack: Any
    victim: TrainConfig
    data: tuple

    def record(self) -> dict[str, Any]:
        return {"victim": self.victim, "settings": self.attack.settings, "seed": self.victim.seed,
                "device": str(resolve_device(self.victim.device)), "dataset_provenance": self.data[0].provenance,
                "partition": self.victim.feature_partition()}


def prepare(config: FeatureConfig) -> Prepared:
    return Prepared(config, config.bound_spec.make(config.settings), config.victim_config,
                    load_data(config.victim_config))


def columns(victim: TrainConfig, held: int) -> tuple[list[int], list[int]]:
    """(the attacker's columns, the target columns): the first `held` parties' and the rest's."""
    each = victim.feature_partition()["columns"]
    return sorted(c for p in each[:held] for c in p), sorted(c for p in each[held:] for c in p)


def mean_baseline(reconstruction, metrics: dict[str, Any], truth: Truth) -> dict[str, Any]:
    """The spec's evaluation: the training mean of each target feature as the guess, scored the same way."""
    mean = truth.context["train_mean"]
    per_feature = feature_mse(mean.expand_as(truth.images), truth.images)
    return {"baselines": {**metrics["baselines"], "mean": {"feature_mse": float(per_feature.mean()),
                                                           "feature_mse_per_feature": per_feature.tolist()}},
            "held_share": truth.context["held_share"]}


def execute(prepared: Prepared, run: Run, *, lpips=None, fid=None, progress: bool = True) -> Outcome:
    victim, (train, test) = prepared.victim, prepared.data
    settings = prepared.attack.settings
    trained = train_split(victim, train, test, run, progress)
    if run is not None:
        run.save_figure("training_curves.png", training_curves_figure(trained))
        run.log(f"trained {victim.arch} with {victim.parties} parties ({victim.aggregate}) on {victim.dataset}: "
                f"accuracy {trained.accuracy:.4f}")
    own_cols, target_cols = columns(victim, settings.held)
    count = settings.predictions or len(test.labels)
    x = test.images[:count].cpu()
    model = JointModel(trained.client, trained.server).cpu()
    with torch.no_grad():
        probabilities = torch.softmax(model(x), 1)
    own = x.clone()
    own[..., target_cols] = 0
    spec = prepared.config.bound_spec
    view = PredictionView(model, own, own_cols, target_cols, probabilities,
                          linear=victim.arch == "tabular-lr" and victim.aggregate == "sum",
                          pixels=len(victim.image_shape) > 1)
    truth = Truth(view.targets_of(x), context={
        "train_mean": view.targets_of(train.images.cpu()).double().mean(0),
        "held_share": len(own_cols) / victim.image_shape[-1]})
    facts = {"accuracy": trained.accuracy, "parties": victim.parties, "held": settings.held, "arch": victim.arch,
             "aggregate": victim.aggregate, "defence": victim.defence, "send_back": victim.send_back,
             "target_features": truth.images.shape[1]}
    return attack_and_score(spec, prepared.attack, view, truth, run=run, seed=victim.seed, progress=progress,
                            facts=facts, title=f"{spec.name} on {victim.arch}, {victim.parties} parties, "
                                                f"{victim.dataset}")


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, victim = outcome.metrics, prepared.victim

    def show(console) -> None:
        console.print(f"{m['attack']} on {victim.arch} ({victim.parties} parties, {victim.aggregate}), "
                      f"{victim.dataset}: the attacker holds {100 * m['held_share']:.0f}% of the columns; feature "
                      f"MSE {m['feature_mse']:.4f} (training mean {m['baselines']['mean']['feature_mse']:.4f}) over "
                      f"{m['n_targets']} predictions of {m['target_features']} features each; task accuracy "
                      f"{m['accuracy']:.4f}; run directory {run.path}")
    return show

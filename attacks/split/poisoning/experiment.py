"""A gradient-replacement backdoor in the one split experiment (`attacks.split.run_split`): train the victim with the poisoning feature party at work
(`victim.train_victim(poison=...)`) and the same victim, same seed, without it; query both with the test inputs,
clean and with the trigger stamped; score.

The attack's answer is the poisoned model's labels for its queries: every clean test input, then every test input
not of the target class with the trigger stamped. It is scored against what the attacker wants: the true label of
a clean input, the target class of a triggered one (`label_accuracy`, beside the majority baseline). Then, apart:

- `backdoor_success`: the share of triggered inputs labelled the target class, by the poisoned model;
- `clean_model_success`: the same share by the unpoisoned model (what the trigger alone does);
- `accuracy`: the poisoned model's clean test accuracy; `clean_model_accuracy`: the unpoisoned one's.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from attacks.driver import Outcome, Truth
from attacks.engine import QUIET, EngineOptions
from attacks.result import Reconstruction
from attacks.split.experiment import Experiment
from attacks.split.labels.answer import answer
from attacks.split.labels.experiment import LabelConfig, LabelFamily, evaluation_facts, title
from attacks.split.labels.observation import Needs
from attacks.split.labels.victim import TaskData, Trained, task_data, train_victim
from attacks.split.poisoning.replacement import GradientReplacement
from attacks.split.poisoning.settings import BackdoorSettings
from attacks.split.poisoning.trigger import Trigger
from attacks.split.run_split import Observed, Prepared, split_experiment
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.runtime import stream_seed

__all__ = ["BackdoorConfig", "BackdoorObservation", "Backdoor", "BackdoorFamily", "summary", "draw_samples",
           "backdoor_success", "backdoor_experiment"]


@dataclass(frozen=True, kw_only=True)
class BackdoorConfig(LabelConfig):
    """`splitlab attack NAME` for a backdoor: the label attacks' victim and options."""

    def check(self) -> None:
        super().check()
        if self.transport == "tcp":
            raise SplitlabError(f"{self.attack} over --transport tcp: the client program does not poison; run it "
                                "with --transport local")
        victim = self.victim_config
        if self.settings.target >= victim.classes:
            raise SplitlabError(f"--target {self.settings.target}: the {victim.task} task has classes 0 to "
                                f"{victim.classes - 1}")
        if victim.top == "none":
            raise SplitlabError(f"{self.attack} needs a label party with a model (--top model or linear): without one "
                                "the replaced gradient trains nothing on its side")

    def check_data(self) -> None:
        super().check_data()
        victim, s = self.victim_config, self.settings
        labels = task_data(victim).train.labels
        fewest = int((labels == s.target).sum())
        if s.known >= fewest:
            raise SplitlabError(f"--known {s.known}: the target class {s.target} has {fewest} training samples; give "
                                f"--known below {fewest}")
        if s.known + s.poisoned > len(labels):
            raise SplitlabError(f"--poisoned {s.poisoned}: with --known {s.known} that is more than the "
                                f"{len(labels)} training samples")


@dataclass(frozen=True, eq=False)
class BackdoorObservation:
    """What the poisoning party gets back when it queries the trained model: the label party's class scores (N, K)
    of each query, and which queries carried its trigger."""
    scores: torch.Tensor
    triggered: torch.Tensor


class Backdoor:
    """A gradient-replacement backdoor; `name` and `settings` are each attack's own."""
    name: str
    settings: BackdoorSettings

    def __init__(self, settings: BackdoorSettings):
        self.settings = settings

    @property
    def needs(self) -> Needs:
        return Needs(gradients=False)

    def check_victim(self, victim) -> None:
        """The victim's rules are the config's (`BackdoorConfig.check`)."""

    def poisoner(self, data: TaskData, seed: int) -> GradientReplacement:
        """The party's poisoning in training: its known target samples and its poisoned ones drawn from its own
        stream, the trigger from its own training features."""
        known, poisoned = draw_samples(data.train.labels, self.settings, seed)
        return GradientReplacement(poisoned, known, Trigger.for_data(data.train.images, self.settings.trigger_size),
                                   self.settings.amplify, self.settings.same_round, self.settings.iterations)

    def __call__(self, observation: BackdoorObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET) -> Reconstruction:
        if not isinstance(observation, BackdoorObservation):
            raise SplitlabError(f"{self.name} takes a BackdoorObservation (the model's answers to its queries), got "
                                f"{type(observation).__name__}")
        started = time.perf_counter()     # the attack's own work is in training (the poisoning); here it reads
        scores = observation.scores       # the model's answers to its queries, one pass
        return answer(self.name, self.settings.preset, scores, seconds=time.perf_counter() - started, steps=1,
                      rule="the model's answer", mode="sequential",
                      extras={"triggered_queries": int(observation.triggered.sum())})


def draw_samples(labels: torch.Tensor, settings: BackdoorSettings, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids of the known target samples, ids of the poisoned ones), from the attacker's own stream. Ground truth
    picks only which target samples its auxiliary knowledge holds."""
    g = torch.Generator().manual_seed(stream_seed(seed, "backdoor samples"))
    targets = torch.nonzero(labels.cpu() == settings.target).flatten()
    known = targets[torch.randperm(len(targets), generator=g)[:settings.known]]
    rest = torch.ones(len(labels), dtype=torch.bool)
    rest[known] = False
    others = torch.nonzero(rest).flatten()
    poisoned = others[torch.randperm(len(others), generator=g)[:settings.poisoned]]
    return known.sort().values, poisoned.sort().values


@torch.no_grad()
def _answers(trained: Trained, x: torch.Tensor) -> torch.Tensor:
    device = next(trained.client.model.parameters()).device
    return trained.server.predict(trained.client.infer(x.to(device))).cpu()


class BackdoorFamily(LabelFamily):
    """The label attacks' family with the backdoors' own training: the poisoned victim and the unpoisoned one
    beside it, queried with and without the trigger."""

    @contextmanager
    def observe(self, prepared: Prepared, run: Run | None, progress: bool) -> Iterator[Observed]:
        attack, victim, data = prepared.attack, prepared.victim, prepared.data
        poison = attack.poisoner(data, victim.seed)
        poisoned = train_victim(victim, data, run, progress, poison=poison)
        clean = train_victim(victim, data, None, False)
        target = attack.settings.target
        others = data.test.labels != target
        stamped = poison.trigger.apply(data.test.images[others])
        queries = torch.cat([data.test.images, stamped])
        triggered = torch.cat([torch.zeros(len(data.test.labels), dtype=torch.bool),
                               torch.ones(len(stamped), dtype=torch.bool)])
        wanted = torch.cat([data.test.labels.cpu(), torch.full((len(stamped),), target, dtype=torch.long)])
        clean_stamped = _answers(clean, stamped).argmax(1)
        facts: dict[str, Any] = {
            **evaluation_facts(poisoned, data),
            "clean_model_accuracy": clean.accuracy,
            "clean_model_success": float((clean_stamped == target).double().mean()),
            "target": target, "known": attack.settings.known, "poisoned": attack.settings.poisoned,
            "replaced_gradients": poison.replaced}
        if run is not None:
            run.log(f"poisoned training: accuracy {poisoned.accuracy:.4f}, {poison.replaced} gradients replaced; "
                    f"unpoisoned: accuracy {clean.accuracy:.4f}")
        observation = BackdoorObservation(_answers(poisoned, queries), triggered)
        yield Observed(observation, Truth(None, wanted, context={"triggered": triggered, "target": target}), facts,
                       title(prepared), victim.seed)

    def summary(self, prepared: Prepared, outcome: Outcome, run: Run):
        return summary(prepared, outcome, run)


def backdoor_success(reconstruction, metrics: dict[str, Any], truth: Truth) -> dict[str, Any]:
    """The spec's evaluation: the share of triggered queries the poisoned model labels the target class, beside
    the unpoisoned model's share and clean accuracy (its trivial baseline: what the trigger does unplanted)."""
    said = reconstruction.labels[0][truth.context["triggered"]]
    unpoisoned = {"backdoor_success": metrics["clean_model_success"], "accuracy": metrics["clean_model_accuracy"]}
    return {"backdoor_success": float((said == truth.context["target"]).double().mean()),
            "baselines": {**metrics["baselines"], "unpoisoned": unpoisoned}}


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, victim = outcome.metrics, prepared.victim

    def show(console) -> None:
        console.print(f"{m['attack']} on {victim.arch} ({victim.where}), {victim.dataset} {victim.task}, target class "
                      f"{m['target']}, defence {victim.defence}, send-back {victim.send_back}: backdoor success "
                      f"{m['backdoor_success']:.3f} (unpoisoned model {m['clean_model_success']:.3f}); clean "
                      f"accuracy {m['accuracy']:.4f} (unpoisoned {m['clean_model_accuracy']:.4f}); run directory "
                      f"{run.path}")
    return show


def backdoor_experiment(config: type) -> Experiment:
    """The backdoors' experiment (train the poisoned victim and the unpoisoned one beside it, attack, score) for
    `config`, a `BackdoorConfig` subclass whose `attack` is the spec's name: how a backdoor's spec declares it."""
    return split_experiment(config, BACKDOORS)


BACKDOORS = BackdoorFamily()
"""The backdoors' family in the one split experiment."""

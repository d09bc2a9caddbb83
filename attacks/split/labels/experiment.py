"""A label-inference attack as an experiment: train the victim through the protocol with the attacking feature
party observing (`victim.train_victim`), give the attack what its party has (`observe`), and score its answer
against the private labels through the one driver, the task's accuracy beside it.

Every label attack's command (`splitlab attack label-norm`, ...) is this experiment with the attack's own
config class (`LabelConfig` with its name); the victim is the one split case (`vfl.case.SplitCase`) over the label
attacks' defaults (`victim.LABEL_DEFAULTS`), a preset may set some of its fields (`Preset.experiment`: the direct attack's victim has no top model).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch

from attacks import registry
from attacks.driver import Outcome, Truth, attack_and_score
from attacks.split.experiment import SplitConfig
from attacks.split.labels.observation import GradientRecord, LabelObservation, Needs, OwnBottom
from attacks.split.labels.victim import LABEL_DEFAULTS, TaskData, Trained, check_label_victim, task_data, train_victim
from attacks.split.labels.wire import train_victim_over_tcp, wire_config
from vfl import data as datasets
from vfl.case import SplitCase
from vfl.defences import report as defence_report
from vfl.errors import SplitlabError
from vfl.options import choice, option
from vfl.runs import Run
from vfl.runtime import resolve_device, stream_seed
from vfl.training import TrainedSplit, training_curves_figure

__all__ = ["LabelConfig", "Prepared", "prepare", "execute", "summary", "observe", "victim_for", "run_attack",
           "evaluation_facts"]


def victim_for(attack: str, preset: str | None = None, **given: Any) -> SplitCase:
    """The victim the attack's preset was written for (`Preset.experiment`) over the label attacks' defaults, with
    the given fields (None: not given) replaced; checked."""
    base = dict(registry.spec(attack).preset(preset).experiment)
    given = {k: v for k, v in given.items() if v is not None}
    return registry.spec(attack).experiment.config.victim_of(**{**base, **given})


@dataclass(frozen=True, kw_only=True)
class LabelConfig(SplitConfig):
    """`splitlab attack label-*`: the attack's preset and settings, and the victim's options."""
    attack: ClassVar[str]
    victim_options: ClassVar[type] = SplitCase
    victim_defaults: ClassVar[Mapping[str, Any]] = LABEL_DEFAULTS
    victim_hidden: ClassVar[tuple[str, ...]] = ("parties", "partition", "aggregate")    # one party; --top none
    check_victim: ClassVar[Any] = staticmethod(check_label_victim)
    transport: str = option("local", "local (both parties in this process) or tcp (the label party here, the "
                            "attacking feature party a `splitlab client` process on 127.0.0.1 that records what it "
                            "receives; the attack reads only that record).", choice(("local", "tcp")))

    def check(self) -> None:
        super().check()
        attack = registry.spec(self.attack).make(self.settings)
        attack.check_victim(self.victim_config)
        if self.transport == "tcp":
            wire_config(self.victim_config)
            needs = attack.needs
            kept = {"the activations it sent": needs.sent, "its weights in each round": needs.models,
                    "its own optimiser": getattr(attack, "local_optimizer", None) is not None}
            missing = [what for what, needed in kept.items() if needed]
            if missing:
                raise SplitlabError(f"{self.attack} over --transport tcp: it needs {missing[0]}, which the client "
                                    "program does not keep; run it with --transport local")

    def check_data(self) -> None:
        """The dataset is here, and the labels the attacker is granted leave samples of every class to infer."""
        victim = self.victim_config
        datasets.require(victim.dataset, victim.data_root)
        labelled = registry.spec(self.attack).make(self.settings).needs.labelled
        if labelled:
            counts = torch.bincount(task_data(victim).train.labels)
            fewest, which = int(counts.min()), int(counts.argmin())
            if labelled >= fewest:
                raise SplitlabError(f"--labelled {labelled}: class {which} of the {victim.task} task has {fewest} "
                                    "training samples, so every label of it would be known and none left to infer; "
                                    f"give --labelled below {fewest}")


@dataclass(frozen=True, eq=False)
class Prepared:
    config: LabelConfig
    attack: Any
    victim: SplitCase
    data: TaskData

    def record(self) -> dict[str, Any]:
        return {"victim": self.victim, "settings": self.attack.settings, "seed": self.victim.seed,
                "transport": self.config.transport,
                "device": str(resolve_device(self.victim.device)), "dataset_provenance": self.data.train.provenance,
                "positive_rate": self.data.positive_rate if self.victim.task == "binary" else None}


def prepare(config: LabelConfig) -> Prepared:
    """The task's data and the attack; nothing written."""
    attack = registry.spec(config.attack).make(config.settings)
    return Prepared(config, attack, config.victim_config, task_data(config.victim_config))


def _labelled(labels: torch.Tensor, per_class: int, seed: int) -> torch.Tensor:
    """The ids of `per_class` training samples of each class, drawn from the attacker's own stream."""
    g = torch.Generator().manual_seed(stream_seed(seed, "labelled samples"))
    chosen = []
    for c in torch.unique(labels).tolist():
        ids = torch.nonzero(labels == c).flatten()
        chosen.append(ids[torch.randperm(len(ids), generator=g)[:per_class]])
    return torch.cat(chosen).sort().values


def _hints(record: GradientRecord, labels: torch.Tensor, seed: int) -> dict[int, tuple[int, int]]:
    """In every round holding a positive sample, one of them (drawn from the attacker's own stream): its row and
    label."""
    g = torch.Generator().manual_seed(stream_seed(seed, "direction hints"))
    hints = {}
    for r, ids in enumerate(record.samples):
        rows = torch.nonzero(labels[ids] == 1).flatten()
        if len(rows):
            hints[r] = (int(rows[torch.randint(len(rows), (1,), generator=g)]), 1)
    return hints


def observe(trained: Trained, data: TaskData, needs: Needs, seed: int) -> tuple[LabelObservation, torch.Tensor]:
    """(what the attacking party has, granted as `needs` says; the private labels of the samples it scores).
    Ground truth picks only the knowledge the threat model grants (which samples' labels are known)."""
    labels = data.train.labels.cpu()
    full = GradientRecord.from_transcript(trained.client.seen, trained.samples)
    record = full.last(needs.rounds) if needs.gradients else None
    known = _labelled(labels, needs.labelled, seed) if needs.labelled else None
    kept = dict(trained.client.models or ()) if needs.models else {}
    if needs.bottom:
        unknown = torch.ones(len(labels), dtype=torch.bool)
        if known is not None:
            unknown[known] = False
        targets = torch.nonzero(unknown).flatten()
    else:
        targets = record.targets
    victim = trained.victim
    observation = LabelObservation(
        classes=victim.classes, targets=targets, record=record,
        bottom=OwnBottom(trained.client.model, trained.client.defences) if needs.bottom or needs.models else None,
        train_inputs=data.train.images if needs.bottom or needs.models else None,
        test_inputs=data.test.images if needs.bottom else None,
        labelled=None if known is None else (known, labels[known]),
        hints=_hints(record, labels, seed) if needs.hints else {},
        facts={"top": victim.top, "batch_size": victim.batch_size},
        models=tuple(kept[s] for s in record.steps) if needs.models else None)
    return observation, labels[targets]


def evaluation_facts(trained: Trained, data: TaskData) -> dict[str, Any]:
    """What metrics.json says of the victim: the task's accuracy (and AUC, binary), its setting, and what its
    send-back defences did."""
    v = trained.victim
    report = trained.defence_report if trained.defence_report is not None else \
        defence_report(trained.client, trained.server)
    return {"accuracy": trained.accuracy, "task_auc": trained.task_auc, "task": v.task,
            "positive": v.positive if v.task == "binary" else None,
            "positive_rate": data.positive_rate if v.task == "binary" else None, "arch": v.arch,
            "cut_layer": v.cut_layer if v.top == "model" else None, "top": v.top, "defence": v.defence,
            "send_back": v.send_back,
            "epochs": v.epochs, "training_rounds": len(trained.samples), "training_seconds": trained.seconds,
            "defence_report": report, **({"cut_bytes": trained.cut_bytes} if trained.cut_bytes else {})}


def run_attack(prepared: Prepared, run: Run | None = None, *, progress: bool = True) -> Outcome:
    """Train the victim with the attacker observing, attack, score (the one driver)."""
    attack, victim, data = prepared.attack, prepared.victim, prepared.data
    needs = attack.needs
    if prepared.config.transport == "tcp":
        trained = train_victim_over_tcp(victim, data, run, progress)
    else:
        trained = train_victim(victim, data, run, progress, keep_sent=needs.sent,
                               local_optimizer=getattr(attack, "local_optimizer", None),
                               keep_models=needs.rounds if needs.models else None)
    if run is not None:
        run.save_figure("training_curves.png", training_curves_figure(
            TrainedSplit(victim, None, trained.server, trained.accuracy, trained.history, trained.seconds)))
        run.log(f"trained {victim.arch} ({victim.where}) on the {victim.task} task: accuracy {trained.accuracy:.4f} "
                f"in {trained.seconds:.1f} s; defence {victim.defence}, send-back {victim.send_back}")
    observation, truth = observe(trained, data, needs, victim.seed)
    test_truth = data.test.labels if needs.bottom else None
    spec = registry.spec(prepared.config.attack)
    return attack_and_score(spec, attack, observation, Truth(None, truth, context={"test_labels": test_truth}),
                            run=run, seed=victim.seed, progress=progress, facts=evaluation_facts(trained, data),
                            title=f"{spec.name} on {victim.arch} ({victim.where}), {victim.task} {victim.dataset}")


def execute(prepared: Prepared, run: Run, *, lpips=None, fid=None, progress: bool = True) -> Outcome:
    return run_attack(prepared, run, progress=progress)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, victim = outcome.metrics, prepared.victim

    def show(console) -> None:
        task = f"binary (class {victim.positive} vs the rest, {100 * prepared.data.positive_rate:.1f}% positive)" \
            if victim.task == "binary" else "multiclass"
        console.print(f"{m['attack']} on {victim.arch} ({victim.where}), {victim.dataset} {task}, defence "
                      f"{victim.defence}, send-back {victim.send_back}: leak AUC {_fmt(m['leak_auc'])} (pooled "
                      f"{_fmt(m['extras'].get('leak_auc_pooled'))}), label accuracy {_fmt(m['label_accuracy'])} "
                      f"(majority {_fmt(m['baselines']['majority']['label_accuracy'])}) over {m['n_targets']} "
                      f"samples; task accuracy {_fmt(m['accuracy'], 4)}"
                      + (f", task AUC {_fmt(m['task_auc'], 4)}" if m.get("task_auc") is not None else "")
                      + f"; run directory {run.path}")
    return show

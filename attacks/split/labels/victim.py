"""The victim of a label-inference attack: the one split case (`vfl.case.SplitCase`) trained through the protocol,
with the attacking feature party keeping what crossed the cut on its side.

The label attacks' defaults over the case (`LABEL_DEFAULTS`): a binary task (`--task binary --positive C`: on
mnist5k one digit is 10% of the samples, an imbalanced task like the papers' click data), the cut after cnn's first
dense layer, two epochs. The label party's model is the case's `--top` (model, linear: U-shaped, none: no model).
The label party's send-back defences (`--send-back`) perturb every gradient it returns, the feature party's own
(`--defence`) what it sends and receives; the training uses the perturbed messages, so the task accuracy measured
here is the defences' cost.
"""
from __future__ import annotations

import collections
import functools
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import torch
from torch import nn

from attacks.split.experiment import family_victim
from vfl import data as datasets
from vfl.case import TOPS, SplitCase
from vfl.errors import SplitlabError
from vfl.models import ends_dense
from vfl.protocol import Activations, Client, CutGradient, Server, Transcript
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.defences.send_back import SendBackDefence
from vfl.tasks import TASKS
from vfl.training import build_client, build_server, load_data, train_split

__all__ = ["LabelVictim", "LABEL_DEFAULTS", "check_label_victim", "TASKS", "TOPS", "require_binary", "require_top",
           "TaskData", "Trained", "ObservingClient", "Poisoner", "task_data", "build_models", "train_victim"]

LABEL_DEFAULTS = {"task": "binary", "cut_layer": 6, "epochs": 2}
"""The label attacks' case where a field is not given: Li et al.'s binary task, cnn cut after its first dense layer
(the feature party's activations are 120 features), two epochs."""


def check_label_victim(case: SplitCase) -> None:
    """What the label attacks need of the case beyond its own checks: the attacking party is the one feature party,
    each round holds two samples at least, the model ends in a dense layer (the task's output layer)."""
    if case.parties != 1:
        raise SplitlabError(f"--parties {case.parties}: a label attack's feature party holds whole samples; give "
                            "--parties 1")
    if case.batch_size < 2:
        raise SplitlabError(f"--batch-size {case.batch_size}: a label attack reads rounds of two samples or more; "
                            "give --batch-size 2 or more")
    if case.lr > 10:
        raise SplitlabError(f"--lr {case.lr:g}: give a learning rate above 0 and at most 10")
    if not ends_dense(case.arch):
        raise SplitlabError(f"architecture {case.arch} does not end in a dense layer; use cnn, mlp or small-mlp")


LabelVictim = functools.partial(family_victim, SplitCase, LABEL_DEFAULTS, check_label_victim)
"""The split case with the label attacks' defaults (`LABEL_DEFAULTS`) where a field is not given; checked."""


def require_binary(attack: str, victim: SplitCase) -> None:
    """Refuse, in one line, a multi-class victim for an attack defined on binary tasks."""
    if victim.task != "binary":
        raise SplitlabError(f"{attack} attacks a binary task (Li et al.); give --task binary (and --positive C)")


def require_top(attack: str, victim: SplitCase, top: str, why: str) -> None:
    """Refuse, in one line, a victim whose label party holds another model than the attack needs."""
    if victim.top != top:
        raise SplitlabError(f"{attack} needs --top {top} ({why}); got --top {victim.top}")


@dataclass(frozen=True)
class TaskData:
    """Both splits with the task's labels (binary: 1 for the positive class)."""
    train: datasets.ImageData
    test: datasets.ImageData

    @property
    def positive_rate(self) -> float:
        return float(self.train.labels.double().mean())


def task_data(victim: SplitCase) -> TaskData:
    """The dataset's splits relabelled for the task (raises `SplitlabError` when the files are missing)."""
    return TaskData(*load_data(victim))


def build_models(victim: SplitCase) -> tuple[nn.Module, nn.Module]:
    """(feature party's model, label party's model), as the case's training builds them."""
    cpu = torch.device("cpu")
    return build_client(victim, cpu).model, build_server(victim, cpu).model


class ObservingClient:
    """The attacking feature party: it follows the protocol (an honest `Client` inside) and keeps, in its own
    transcript, the gradients it received and, when asked, the activations it sent. Nothing of the label
    party's enters it.

    Two attacker's hooks, both on its own side of the cut: `keep_models` keeps its bottom model's weights as they
    were when it computed each round's activations (the last `keep_models` rounds, 0 every round; a black-boxed
    party computes its batch-level parameter gradient with them), and `poison` (a `Poisoner`) lets it change
    its own inputs of a round and the gradient it backpropagates (a backdoor). `samples` is the list of each
    round's sample ids as the epoch loop draws them (the party knows its rows' ids)."""

    def __init__(self, client: Client, keep_sent: bool = False, *, samples: list[torch.Tensor] | None = None,
                 poison: "Poisoner | None" = None, keep_models: int | None = None):
        self.client = client
        self.keep_sent = keep_sent
        self.seen = Transcript(keep_tensors=True)
        self.samples = samples if samples is not None else []
        self.poison = poison
        self.models: collections.deque | None = None if keep_models is None else \
            collections.deque(maxlen=keep_models or None)
        """(step, its bottom model's state when it computed that round's activations), oldest first."""

    @property
    def model(self) -> nn.Module:
        return self.client.model

    @property
    def defences(self) -> tuple:
        return self.client.defences

    def labels_sent(self, y: torch.Tensor | None, step: int) -> torch.Tensor | None:
        return self.client.labels_sent(y, step)      # its own defences' (a detector's fake batch) as an honest one's

    def send(self, x: torch.Tensor, step: int) -> Activations:
        if self.models is not None:
            self.models.append((step, {k: v.detach().clone() for k, v in self.client.model.state_dict().items()}))
        if self.poison is not None:
            x = self.poison.inputs(x, self.samples[-1])
        message = self.client.send(x, step)
        if self.keep_sent:
            self.seen.record(message)
        return message

    def receive(self, message: CutGradient) -> None:
        self.seen.record(message)
        if self.poison is not None:
            message = CutGradient(message.step, self.poison.gradient(message.tensor, self.samples[-1]))
        self.client.receive(message)

    def infer(self, x: torch.Tensor) -> torch.Tensor:
        return self.client.infer(x)

    def query(self, x: torch.Tensor, step: int):
        return self.client.query(x, step)

    def receive_prediction(self, message) -> None:
        self.client.receive_prediction(message)


class Poisoner(Protocol):
    """What a poisoning feature party changes on its own side in training, round by round (`ids`: the round's
    sample ids)."""

    def inputs(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Its features of the round as it computes on them."""

    def gradient(self, g: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The cut gradient it backpropagates, from the one it received."""


@dataclass
class Trained:
    """The trained split model, what the attacking party kept, and the task's measures (evaluation only)."""
    victim: SplitCase
    client: ObservingClient
    server: Server
    samples: list[torch.Tensor]
    """Per training round, the ids of its samples (what the feature party knows of its rounds)."""
    accuracy: float
    history: list[dict[str, Any]]
    seconds: float
    task_auc: float | None = None
    defences: tuple[SendBackDefence, ...] = ()
    defence_report: dict[str, Any] | None = None
    """What the defences did, where the parties here never ran them (rebuilt from a run over TCP); None: ask them."""
    cut_bytes: dict[str, int] | None = None
    """The bytes that crossed the cut in training, by sender (`vfl.training.FitState.cut_bytes`)."""


def train_victim(victim: SplitCase, data: TaskData, run: Run | None = None, progress: bool = True, *,
                 keep_sent: bool = False,
                 local_optimizer: Callable[[list, float], torch.optim.Optimizer] | None = None,
                 poison: Poisoner | None = None, keep_models: int | None = None) -> Trained:
    """Train the case through the protocol in process, the feature party observing (`ObservingClient`). An active
    attacker trains its own model with `local_optimizer(params, lr)` instead of the protocol's optimiser; a
    poisoning one changes its inputs and gradients (`poison`); `keep_models` keeps its weights per round."""
    from attacks.metrics.labels import auc

    samples: list[torch.Tensor] = []
    trained = train_split(victim, data.train, data.test, run, progress, feature_party=lambda client: ObservingClient(
        client, keep_sent, samples=samples, poison=poison, keep_models=keep_models), optimiser=local_optimizer, samples=samples, query=False)
    client, server = trained.client, trained.server
    task_auc = None
    if victim.classes == 2:
        with torch.no_grad():
            logits = server.predict(client.infer(data.test.images.to(resolve_device(victim.device))))
        task_auc = auc((logits[:, 1] - logits[:, 0]).cpu(), data.test.labels == 1)
    return Trained(victim, client, server, samples, trained.accuracy, trained.history, trained.seconds, task_auc,
                   server.defences, cut_bytes=trained.cut_bytes)

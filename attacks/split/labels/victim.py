"""The victim of a label-inference attack: split learning on a labelled task, trained through the protocol, with
the attacking feature party keeping what crossed the cut on its side.

The task is the dataset's classes (`--task multiclass`) or one class against the rest (`--task binary
--positive C`: on mnist5k one digit is 10% of the samples, an imbalanced task like the papers' click data).
The label party's model (`--top`) is

- `model`: the architecture's layers after `--cut-layer` (two-party split learning, Li et al.);
- `linear`: its output layer only, the attacker holding everything before it (the U-shaped split UnSplit's
  label inference attacks, where the label party keeps only the output layer to protect its labels);
- `none`: no model: the feature party's model computes the class scores, the label party only the loss
  (vertical FL without model splitting, where Fu et al.'s direct label inference applies).

The output layer has one unit per class of the task. The label party's send-back defences (`--send-back`)
perturb every gradient it returns, the feature party's own (`--defence`) what it sends and receives; the training
uses the perturbed messages, so the task accuracy measured here is the defences' cost.
"""
from __future__ import annotations

import collections
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch
from torch import nn

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.models import arch_spec, check_cut_layer, check_input_shape
from vfl.options import Runtime, choice, integer, number, option, text
from vfl.protocol import OPTIMIZERS, Activations, Client, CutGradient, Server, Transcript, make_optimizer
from vfl.runs import Run
from vfl.runtime import generator as seeded_generator
from vfl.runtime import resolve_device, seeded
from vfl.defences import check_send_back, parse_defences, parse_send_back, parse_spec
from vfl.defences.send_back import SendBackDefence
from vfl.tasks import check_task, for_task, output_layer, task_classes
from vfl.training import FitState, fit

__all__ = ["LabelVictim", "TASKS", "TOPS", "require_binary", "require_top", "TaskData", "Trained", "ObservingClient",
           "Poisoner", "task_data", "build_models", "train_victim"]

TASKS = ("binary", "multiclass")            # the label attacks' default first (`vfl.tasks`)
TOPS = ("model", "linear", "none")


@dataclass(frozen=True, kw_only=True)
class LabelVictim(Runtime):
    """Split learning on a labelled task, attacked by its feature party. Every name and number is checked when
    it is built, before anything is loaded or written."""
    dataset: str = option("mnist5k", "Dataset (see `splitlab datasets`).", text())
    task: str = option("binary", "binary (one class against the rest, see --positive) or multiclass.",
                       choice(TASKS))
    positive: int = option(0, "The positive class of a binary task (on mnist5k one digit: 10% of the samples).",
                           integer(low=0, high=999))
    arch: str = option("cnn", "Architecture (see `splitlab models`); its last layer must be dense.", text())
    cut_layer: int = option(6, "Cut layer with --top model: the feature party holds layers 0..cut.",
                            integer(low=0, high=1000))
    top: str = option("model", "The label party's model: model (the layers after --cut-layer), linear (the output "
                      "layer only: U-shaped) or none (no model: it sums the class scores it receives).", choice(TOPS))
    epochs: int = option(2, "Training epochs.", integer(low=1, high=100_000))
    batch_size: int = option(64, "Mini-batch size (one protocol round each).", integer(low=2, high=1_000_000))
    lr: float = option(1e-3, "Learning rate of both parties.", number(low=0, low_open=True, high=10))
    optimizer: str = option("adam-amsgrad", "sgd, momentum, adam or adam-amsgrad.", choice(OPTIMIZERS))
    defence: str = option("none", "The feature party's defences (input, activations sent, gradient received): none "
                          "or name[:key=value,...] items joined by + (see `splitlab defences`).", text())
    send_back: str = option("none", "The label party's defences on the cut gradient it sends back: none or "
                            "name[:key=value,...] items joined by + (see `splitlab defences`), e.g. marvell:scale=1.",
                            text())

    def check(self) -> None:
        spec = arch_spec(self.arch)
        found = datasets.dataset_spec(self.dataset)
        check_input_shape(spec, found.image_shape, self.dataset)
        if self.top == "model":
            check_cut_layer(spec, self.cut_layer)
        check_task(self.task, self.positive, self.dataset)
        if not isinstance(spec.build().layers[-1], nn.Linear):
            raise SplitlabError(f"architecture {self.arch} does not end in a dense layer; use cnn, mlp or small-mlp")
        parse_spec(self.defence, found.image_shape, flat_input=False)     # its bottom model keeps the input size
        check_send_back(self.send_back, self.classes, label_model=self.top != "none")
        resolve_device(self.device)

    @property
    def classes(self) -> int:
        return task_classes(self.task, self.dataset)

    @property
    def where(self) -> str:
        """The cut in words, for titles."""
        return {"model": f"cut {self.cut_layer}", "linear": "U-shaped (label party: output layer)",
                "none": "no top model"}[self.top]


def require_binary(attack: str, victim: LabelVictim) -> None:
    """Refuse, in one line, a multi-class victim for an attack defined on binary tasks."""
    if victim.task != "binary":
        raise SplitlabError(f"{attack} attacks a binary task (Li et al.); give --task binary (and --positive C)")


def require_top(attack: str, victim: LabelVictim, top: str, why: str) -> None:
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


def task_data(victim: LabelVictim) -> TaskData:
    """The dataset's splits relabelled for the task (raises `SplitlabError` when the files are missing)."""
    return TaskData(*(for_task(datasets.load(victim.dataset, split, victim.data_root, seed=victim.seed), victim.task,
                               victim.positive) for split in ("train", "test")))


def build_models(victim: LabelVictim) -> tuple[nn.Module, nn.Module]:
    """(feature party's model, label party's model): the architecture seeded with the victim's seed, its output
    layer replaced by one of the task's classes (from a stream of its own) where the count differs, split as
    `--top` says."""
    spec = arch_spec(victim.arch)
    build = spec.build
    if spec.tabular:                             # its first layer takes the data set's number of features
        build = functools.partial(build, in_features=datasets.dataset_spec(victim.dataset).image_shape[0])
    with seeded(victim.seed):
        layers = list(build().layers)
    layers[-1] = output_layer(layers[-1], victim.classes, victim.seed)
    if victim.top == "model":
        cut = victim.cut_layer + 1
    else:
        cut = len(layers) - 1 if victim.top == "linear" else len(layers)
    return nn.Sequential(*layers[:cut]), nn.Sequential(*layers[cut:])


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
class _Rounds:
    """The training split as the epoch loop reads it, noting which samples each round holds (in vertical FL the
    parties align samples by id, so the feature party knows its own samples' ids in every round)."""
    data: datasets.ImageData
    samples: list[torch.Tensor] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.data)

    @property
    def labels(self) -> torch.Tensor:
        return self.data.labels

    def relabelled(self, labels: torch.Tensor) -> "_Rounds":
        """The same rounds with other training labels; `samples` is the same list (the caller reads it)."""
        return _Rounds(self.data.relabelled(labels), self.samples)

    def batches(self, batch_size: int, generator: torch.Generator | None = None):
        d = self.data
        ids = datasets.ImageData(d.name, d.split, d.images, torch.arange(len(d), device=d.images.device), d.provenance)
        for x, index in ids.batches(batch_size, generator):          # the order `ImageData.batches` draws
            self.samples.append(index.cpu())
            yield x, d.labels[index]


@dataclass
class Trained:
    """The trained split model, what the attacking party kept, and the task's measures (evaluation only)."""
    victim: LabelVictim
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


def train_victim(victim: LabelVictim, data: TaskData, run: Run | None = None, progress: bool = True, *,
                 keep_sent: bool = False,
                 local_optimizer: Callable[[list, float], torch.optim.Optimizer] | None = None,
                 poison: Poisoner | None = None, keep_models: int | None = None) -> Trained:
    """Train through the protocol in process, the feature party observing (`ObservingClient`). An active
    attacker trains its own model with `local_optimizer(params, lr)` instead of the protocol's optimiser; a
    poisoning one changes its inputs and gradients (`poison`); `keep_models` keeps its weights per round."""
    from attacks.metrics.labels import auc

    device = resolve_device(victim.device)
    bottom, top = (m.to(device) for m in build_models(victim))
    params = list(bottom.parameters())
    optimizer = local_optimizer(params, victim.lr) if local_optimizer else make_optimizer(victim.optimizer, params,
                                                                                          victim.lr)
    found = datasets.dataset_spec(victim.dataset)
    own = parse_defences(victim.defence, found.image_shape, data.train.images)
    samples: list[torch.Tensor] = []
    client = ObservingClient(Client(bottom, optimizer, own), keep_sent, samples=samples, poison=poison,
                             keep_models=keep_models)
    top_params = list(top.parameters())
    shape = None
    if any(c.spec.point == "label-layers" for c in check_send_back(victim.send_back, victim.classes)):
        with torch.no_grad():                    # the activations' shape, for the label party's layers
            bottom.eval()
            shape = tuple(bottom(data.train.images[:1].to(device)).shape[1:])
            bottom.train()
    defences = tuple(parse_send_back(victim.send_back, victim.classes, shape))
    server = Server(top, make_optimizer(victim.optimizer, top_params, victim.lr) if top_params else None,
                    defences=defences)
    train = datasets.ImageData(data.train.name, "train", data.train.images.to(device), data.train.labels.to(device),
                               data.train.provenance)
    rounds = _Rounds(train, samples)
    start = time.perf_counter()
    state = fit(client, server, rounds, data.test, victim, device, seeded_generator(victim.seed), state=FitState(),
                run=run, progress=progress)
    seconds = time.perf_counter() - start
    task_auc = None
    if victim.classes == 2:
        with torch.no_grad():
            logits = server.predict(client.infer(data.test.images.to(device)))
        task_auc = auc((logits[:, 1] - logits[:, 0]).cpu(), data.test.labels == 1)
    return Trained(victim, client, server, rounds.samples, state.history[-1]["test_accuracy"], state.history,
                   seconds, task_auc, defences)

"""What an honest-but-curious HFL server observes, and a small client simulator that produces it.

The server sends the global model to a client and receives its upload. An observation is a frozen
record of exactly that: the model it sent (architecture and weights), the upload after the client's
defence, the batch size, the local hyperparameters where they matter, and the defence's spec. The
client's private images and labels are never stored in an observation; the simulator returns them to
the caller separately only as far as the caller already holds them (evaluation uses them, attacks
never see them). Labels enter an observation only when the threat model grants them to the server
(`reveal_labels=True`, e.g. Inverting Gradients' "labels known" setting).

Kinds:
- `FedSGDObservation`: g = grad_theta CE(F(x; theta), y) for one client batch (mean over the batch).
- `FedAvgObservation`: theta_0 - theta_E after E local epochs of SGD at a local learning rate over
  mini-batches of the client's data, reshuffled every epoch.
- `RoundLog`: (weights, gradient) of the same client over rounds while the global model trains.

Each observation lists what it `provides`; an attack declares what it `requires`, and
`check_requirements` raises a one-line `SplitlabError` naming what is missing.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import torch
from torch import nn
from torch.func import functional_call, grad

from attacks.engine import FedSGDGradient, task_loss
from vfl.defences.upload import Defence, NoDefence
from vfl.errors import SplitlabError
from vfl.models.hfl import final_linear

__all__ = ["CAPABILITIES", "ModelView", "FedSGDObservation", "FedAvgObservation", "RoundLog", "Observation",
           "check_requirements", "UploadAttack", "upload_needs", "observe_fedsgd", "observe_fedavg", "local_sgd"]

CAPABILITIES = {
    "weights": "the model's weights",
    "gradient": "a FedSGD gradient (observe with FedSGD, not FedAvg)",
    "update": "a FedAvg model update",
    "batch_size": "the client's batch size",
    "local_hyperparameters": "the client's local learning rate, epochs and mini-batch size",
    "final_linear": "a final linear layer (analytic label recovery reads its gradient)",
    "labels": "the client's labels (a threat model where the server knows them)",
    "rounds": "a log of (weights, gradient) over several rounds",
}


@dataclass(frozen=True, eq=False)
class ModelView:
    """The global model as the server sent it: the architecture (a module in eval mode) and its weights.

    The module is a private copy; attacks run it with `torch.func.functional_call` on `params` and
    `buffers`, so nothing they do changes it.
    """
    arch: str
    """The architecture's name (`splitlab models`)."""
    network: nn.Module
    """A private copy of the model, in eval mode, its parameters frozen."""
    input_shape: tuple[int, ...]
    """(C, H, W) of one input image."""
    num_classes: int
    """Classes of the classifier's output."""

    @classmethod
    def of(cls, model: nn.Module, arch: str, input_shape: Sequence[int], num_classes: int) -> "ModelView":
        network = copy.deepcopy(model).eval()
        for p in network.parameters():
            p.requires_grad_(False)
        return cls(arch, network, tuple(input_shape), int(num_classes))

    @property
    def params(self) -> Mapping[str, torch.Tensor]:
        """The weights the server sent, by parameter name (read-only)."""
        return MappingProxyType({k: v.detach() for k, v in self.network.named_parameters()})

    @property
    def buffers(self) -> Mapping[str, torch.Tensor]:
        """The model's buffers (BatchNorm running statistics), by name (read-only)."""
        return MappingProxyType({k: v.detach() for k, v in self.network.named_buffers()})

    @property
    def param_names(self) -> tuple[str, ...]:
        """Parameter names in the order of every upload's tensors."""
        return tuple(k for k, _ in self.network.named_parameters())

    @property
    def final_linear(self) -> str | None:
        """The name of the final linear layer (analytic label recovery reads its gradient), or None."""
        return final_linear(self.network)

    @property
    def device(self) -> torch.device:
        """Where the weights are."""
        return next(self.network.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """The weights' floating-point type."""
        return next(self.network.parameters()).dtype

    def with_params(self, params: Mapping[str, torch.Tensor]) -> "ModelView":
        """The same architecture with other weights (the next round's global model)."""
        network = copy.deepcopy(self.network)
        with torch.no_grad():
            for name, p in network.named_parameters():
                p.copy_(params[name])
        return ModelView(self.arch, network, self.input_shape, self.num_classes)


def _base_capabilities(model: ModelView, labels: torch.Tensor | None) -> set[str]:
    provides = {"weights", "batch_size"}
    if model.final_linear is not None:
        provides.add("final_linear")
    if labels is not None:
        provides.add("labels")
    return provides


@dataclass(frozen=True, eq=False, kw_only=True)
class Upload:
    """What every single upload carries: the model it was computed at, the number of examples behind it,
    the client's defence, and the labels only when the threat model grants them to the server."""
    model: ModelView
    """The global model the upload was computed at (architecture and weights)."""
    batch_size: int
    """Number of examples the client trained on."""
    defence: str = "none"
    """The client's upload defence, as its spec (`gaussian:sigma=0.01`)."""
    labels: torch.Tensor | None = None
    """(B,) the client's labels, only where the threat model grants them to the server (`--labels known`)."""
    clients: int = 1
    """Clients whose uploads were summed into this one (secure aggregation, `attacks.hfl.secagg`)."""
    carries = frozenset()
    """Capabilities this kind of upload adds to the model's."""

    @property
    def provides(self) -> frozenset[str]:
        """What it gives an attack (`CAPABILITIES`): the model's and this kind's."""
        return frozenset(_base_capabilities(self.model, self.labels) | self.carries)


@dataclass(frozen=True, eq=False, kw_only=True)
class FedSGDObservation(Upload):
    """One FedSGD upload: the (defended) gradient of the mean CE loss over the client's batch."""
    gradient: tuple[torch.Tensor, ...]
    """One tensor per parameter, in `model.param_names` order."""
    kind = "fedsgd"
    carries = frozenset({"gradient"})

    def named(self) -> dict[str, torch.Tensor]:
        return dict(zip(self.model.param_names, self.gradient))


@dataclass(frozen=True, eq=False, kw_only=True)
class FedAvgObservation(Upload):
    """One FedAvg upload: theta_0 - theta_E after `local_epochs` epochs of SGD at `local_lr` over
    mini-batches of `local_batch_size` (the client reshuffles every epoch; the server does not know
    the order)."""
    update: tuple[torch.Tensor, ...]
    """theta_0 - theta_E, one tensor per parameter in `model.param_names` order."""
    local_lr: float
    """The client's SGD learning rate."""
    local_epochs: int
    """The client's local epochs E."""
    local_batch_size: int
    """The client's mini-batch size (the batch is split into ceil(batch_size / local_batch_size) steps per epoch)."""
    epoch_params: tuple[Mapping[str, torch.Tensor], ...] | None = field(default=None, repr=False)
    """Evaluation only (diagnostics such as the interpolation error): theta after each local epoch. The
    server never sees these; no attack reads them."""
    kind = "fedavg"
    carries = frozenset({"update", "local_hyperparameters"})


@dataclass(frozen=True, eq=False)
class RoundLog:
    """The same client's FedSGD uploads over rounds, each with the global weights it was computed at."""
    rounds: tuple[FedSGDObservation, ...]
    """The uploads, first seen first, each with the global weights of its round (`model`)."""
    kind = "rounds"
    round_numbers: tuple[int, ...] = ()
    """The FL round of each upload when the log is a sparse trace (other clients' rounds in between);
    empty for consecutive rounds 0, 1, 2, ..."""

    @property
    def provides(self) -> frozenset[str]:
        """What every upload in the log provides, and `rounds`."""
        return frozenset(set.intersection(*(set(r.provides) for r in self.rounds)) | {"rounds"})

    @property
    def model(self) -> ModelView:
        """The first upload's model (the architecture every round shares)."""
        return self.rounds[0].model

    @property
    def batch_size(self) -> int:
        """The client's batch size."""
        return self.rounds[0].batch_size


Observation = FedSGDObservation | FedAvgObservation | RoundLog


def check_requirements(attack: str, requires: Sequence[str], observation: Observation) -> None:
    """Raise a one-line SplitlabError if the observation lacks something the attack needs."""
    missing = [need for need in requires if need not in observation.provides]
    if missing:
        what = "; ".join(CAPABILITIES.get(m, m) for m in missing)
        raise SplitlabError(f"attack {attack} needs {what}, which this {observation.kind} observation "
                            f"(model {observation.model.arch}) does not provide")


class UploadAttack:
    """Requirements of an attack on one FedSGD gradient or FedAvg update (Inverting Gradients, FedLeak):
    `requires` maps the upload's kind to what it needs, plus the final linear layer whenever the server
    must recover the labels from it (they are not in the observation)."""
    name: str
    requires: Mapping[str, tuple[str, ...]]

    def requirements(self, observation: Observation) -> tuple[str, ...]:
        if observation.kind not in self.requires:
            raise SplitlabError(f"{self.name} observes {' or '.join(self.requires)}, not {observation.kind}")
        needs = self.requires[observation.kind]
        return needs if "labels" in observation.provides else needs + ("final_linear",)

    def check(self, observation: Observation) -> None:
        check_requirements(self.name, self.requirements(observation), observation)


def upload_needs(*fedavg_extra: str) -> Mapping[str, tuple[str, ...]]:
    """`UploadAttack.requires`: the upload and the batch size, and for FedAvg also `fedavg_extra`."""
    return MappingProxyType({"fedsgd": ("gradient", "batch_size"),
                             "fedavg": ("update", "batch_size", "local_hyperparameters", *fedavg_extra)})


# --- the client simulator ----------------------------------------------------------------------------

def _check_batch(model: ModelView, x: torch.Tensor, y: torch.Tensor) -> None:
    if x.dim() != 4 or tuple(x.shape[1:]) != model.input_shape or y.shape != (x.shape[0],):
        raise SplitlabError(f"client batch must be images (B, {', '.join(map(str, model.input_shape))}) "
                            f"with B labels, got {tuple(x.shape)} and {tuple(y.shape)}")


def _view(model: nn.Module, arch: str, x: torch.Tensor) -> ModelView:
    model = model.eval()
    with torch.no_grad():
        classes = model(x[:1]).shape[-1]
    return ModelView.of(model, arch, tuple(x.shape[1:]), classes)


def observe_fedsgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, arch: str = "custom",
                   defence: Defence = NoDefence(), generator: torch.Generator | None = None,
                   reveal_labels: bool = False) -> FedSGDObservation:
    """The server's view of one FedSGD client step on the batch (x, y).

    The gradient is the engine's `FedSGDGradient` with its `task_loss` (mean CE), the same function the
    attacks simulate, evaluated with BatchNorm in eval mode. `generator` drives the defence's noise.
    """
    view = _view(model, arch, x)
    _check_batch(view, x, y)
    gradient = FedSGDGradient(view.network)({"x": x}, {"params": dict(view.params), "buffers": dict(view.buffers),
                                                        "labels": y})
    return FedSGDObservation(model=view, gradient=tuple(t.detach() for t in defence(gradient, generator)),
                             batch_size=len(y), defence=defence.spec,
                             labels=y.detach().clone() if reveal_labels else None)


def local_sgd(network: nn.Module, params: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor],
              x: torch.Tensor, y: torch.Tensor, *, lr: float, epochs: int, batch_size: int,
              generator: torch.Generator | None = None, shuffle: bool = True,
              trajectory: list | None = None) -> dict[str, torch.Tensor]:
    """theta_E after `epochs` epochs of plain SGD on mini-batches of `batch_size` (reshuffled each epoch);
    `trajectory`, when given, receives theta after every epoch."""
    current = {k: v.detach() for k, v in params.items()}
    n = len(y)
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator).to(x.device) if shuffle else torch.arange(n, device=x.device)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]

            def loss(p, xb=x[idx], yb=y[idx]):
                return task_loss(functional_call(network, (p, dict(buffers)), (xb,)), yb)

            step = grad(loss)(current)
            current = {k: current[k] - lr * step[k] for k in current}
        if trajectory is not None:
            trajectory.append(current)
    return current


def observe_fedavg(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, lr: float, epochs: int,
                   batch_size: int, arch: str = "custom", defence: Defence = NoDefence(),
                   generator: torch.Generator | None = None, reveal_labels: bool = False) -> FedAvgObservation:
    """The server's view of one FedAvg client: the (defended) update theta_0 - theta_E.

    The client runs `epochs` epochs over its data in mini-batches of `batch_size`, reshuffled every
    epoch with `generator`, SGD at `lr`, mean CE (`task_loss`), BatchNorm in eval mode.
    """
    if lr <= 0 or epochs < 1 or batch_size < 1:
        raise SplitlabError("FedAvg needs a positive local learning rate, at least one epoch and batch size 1+")
    view = _view(model, arch, x)
    _check_batch(view, x, y)
    params0 = dict(view.params)
    trajectory: list = []
    final = local_sgd(view.network, params0, view.buffers, x, y, lr=lr, epochs=epochs, batch_size=batch_size,
                      generator=generator, trajectory=trajectory)
    update = [params0[k] - final[k] for k in params0]
    return FedAvgObservation(model=view, update=tuple(t.detach() for t in defence(update, generator)),
                             batch_size=len(y), local_lr=lr, local_epochs=epochs, local_batch_size=batch_size,
                             defence=defence.spec, labels=y.detach().clone() if reveal_labels else None,
                             epoch_params=tuple(MappingProxyType(p) for p in trajectory))

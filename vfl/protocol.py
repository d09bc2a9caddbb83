"""Split learning with the messages across the cut made explicit.

One training round (`exchange`):

    client.send(X)      -> Activations H = f(X)           (detached: only numbers cross the cut)
    server.respond(H,y) -> CutGradient  G = dL/dH          (the server trains its top model on the way)
    client.receive(G)   -> H.backward(G); client optimiser step

One inference query (`evaluate`, and the evaluation targets after training):

    client.query(X)          -> InferenceQuery H = f(X)   (inference mode; no gradient comes back)
    server.answer(H)         -> Prediction, the class of each row
    client.receive_prediction(P)

The client side may be one `Client`, `vfl.parties.Parties` (K feature parties whose activations are
joined), or `vfl.wire.remote.RemoteParties` (clients in other processes, as the server sees them): the
loops below take any of them. Every message can be recorded in a `Transcript`. The server role is
pluggable (`Role`): `Server` is honest, `CuriousServer` also keeps every activation it received,
inference queries included (UnSplit's adversary), and `MaliciousServer` returns gradients of its own
choosing instead of task gradients (FSHA's adversary). Each role records what it received in `seen`
(shapes only unless it keeps tensors). Defences hook in at typed points on the client: the input, the
activations it sends, the gradients it receives; and on the label party at the send-back point, the
gradients it returns (`vfl.defences.send_back`, against a client that infers labels from them).
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, Protocol, Sequence

import torch
from torch import nn

from vfl.errors import SplitlabError
from vfl.messages import (Activations, CutGradient, InferenceQuery, Message, Prediction,  # noqa: F401 - the
                          Transcript, TranscriptEntry)  # protocol's vocabulary, still importable from here
from vfl.runtime import adam

OPTIMIZERS = ("sgd", "momentum", "adam", "adam-amsgrad")


def make_optimizer(name: str, params: Iterable[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    """Client/server optimisers. The paper's default is Adam(1e-3, amsgrad=True) on both sides."""
    params = list(params)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name in ("adam", "adam-amsgrad"):
        return adam(params, lr, amsgrad=name == "adam-amsgrad")
    raise SplitlabError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")


# --- defences hook points --------------------------------------------------------------------------

class Defence(Protocol):
    """A client-side defence. Each hook may be the identity; see `vfl.defences` for the real ones."""

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor: ...
    def on_activations(self, h: torch.Tensor, training: bool) -> torch.Tensor: ...
    def on_gradient(self, g: torch.Tensor) -> torch.Tensor: ...
    def on_loss(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None: ...


# --- parties ---------------------------------------------------------------------------------------

class Client:
    """The non-label party: holds X and the bottom model; sees only gradients for its activations."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, defences: Sequence[Defence] = ()):
        self.model = model
        self.optimizer = optimizer
        self.defences = tuple(defences)
        self._pending: tuple[int, torch.Tensor, torch.Tensor] | None = None
        self.last_prediction: Prediction | None = None

    def activations(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        """f(X) through the defences, still attached to the client's graph."""
        for d in self.defences:
            x = d.on_input(x, training)
        h = self.model(x)
        for d in self.defences:
            h = d.on_activations(h, training)
        return h

    def send(self, x: torch.Tensor, step: int) -> Activations:
        self.model.train()
        h = self.activations(x, training=True)
        self._pending = (step, h, x)
        return Activations(step, h.detach())

    def receive(self, message: CutGradient) -> None:
        if self._pending is None or self._pending[0] != message.step:
            raise RuntimeError("client received a gradient for activations it did not send")
        _, h, x = self._pending
        self._pending = None
        if message.tensor.shape != h.shape:
            raise RuntimeError(f"gradient shape {tuple(message.tensor.shape)} != activation shape {tuple(h.shape)}")
        g = message.tensor
        for d in self.defences:
            g = d.on_gradient(g)
            if g is None:                            # a defence discards the round: no step on it
                return
        extra = [term for d in self.defences if (term := _loss_term(d, x, h)) is not None]
        self.optimizer.zero_grad(set_to_none=True)
        if extra:                                    # the feature-loss point: G and the extra terms together
            torch.autograd.backward([h, torch.stack(extra).sum()], [g, None])
        else:
            h.backward(g)
        self.optimizer.step()

    def labels_sent(self, y: torch.Tensor | None, step: int) -> torch.Tensor | None:
        """The labels that go with this round's activations (a detector's fake batch changes them; `None`: the
        server holds no labels of the client's)."""
        for d in self.defences:
            on_labels = getattr(d, "on_labels", None)
            if on_labels is not None:
                y = on_labels(y, step)
        return y

    @torch.no_grad()
    def infer(self, x: torch.Tensor) -> torch.Tensor:
        """Inference-time activations (what a server sees when the trained model is used)."""
        self.model.eval()
        return self.activations(x, training=False)

    def query(self, x: torch.Tensor, step: int) -> InferenceQuery:
        """Ask the server to predict `x`: the query carries only the inference-time activations."""
        return InferenceQuery(step, self.infer(x).detach())

    def receive_prediction(self, message: Prediction) -> None:
        self.last_prediction = message


def _loss_term(defence, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None:
    on_loss = getattr(defence, "on_loss", None)          # a plug-in defence may predate the feature-loss point
    return None if on_loss is None else on_loss(x, h)


class Role(Protocol):
    """The label party's side of the protocol: what the server loops (`exchange`, `train_epoch`,
    `evaluate`, `vfl.wire.server`) call. `seen` is what the role received, in order."""

    seen: Transcript
    last_loss: torch.Tensor | None
    last_correct: torch.Tensor | None

    def respond(self, message: Activations, labels: torch.Tensor | None) -> CutGradient: ...
    def answer(self, message: InferenceQuery) -> Prediction: ...


class Server:
    """The honest label party: trains its top model on the task and returns dL/dH.

    `optimizer=None` for a top model with nothing to train (e.g. a fixed loss of H in the lemma checks).
    It records the shapes of what it received in `seen`, never the tensors. `defences` are the label party's
    (`vfl.defences.send_back.SendBackDefence`): at the labels point `training_labels` gives the labels it trains
    on (the epoch loop calls it once); at the label-layers point each defence's `layer` goes between the
    activations and the top model (trained with it: its parameters join the optimiser) and its `penalty()` joins
    the loss; at the send-back point `on_send(G, labels) -> G` acts on dL/dH: the top model trains on the true
    gradient, the client receives the defended one.
    """

    keeps_tensors = False

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy,
                 defences: Sequence = ()):
        self.defences = tuple(defences)
        layers = [d.layer for d in self.defences if getattr(d, "layer", None) is not None]
        if layers:
            if optimizer is None:
                raise SplitlabError("the label party's layers need an optimiser to train them; this label party "
                                    "has no model to train")
            device = next(model.parameters()).device
            layers = [layer.to(device) for layer in layers]
            optimizer.add_param_group({"params": [p for layer in layers for p in layer.parameters()]})
            model = nn.Sequential(*layers, model)
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.last_loss: torch.Tensor | None = None
        self.last_correct: torch.Tensor | None = None
        self.last_predicted: torch.Tensor | None = None
        self.seen = Transcript(keep_tensors=self.keeps_tensors)

    def respond(self, message: Activations, labels: torch.Tensor) -> CutGradient:
        self.seen.record(message)
        self.model.train()
        h = message.tensor.detach().requires_grad_(True)
        logits = self.model(h)
        loss = self.loss_fn(logits, labels)
        penalties = [p for d in self.defences if (p := _penalty(d)) is not None]
        if penalties:
            loss = loss + torch.stack(penalties).sum()
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        wanted = [d for d in self.defences if getattr(d, "class_gradients", False)]
        loss.backward(retain_graph=bool(wanted))
        for d in wanted:                 # before the step: the gradients of the model that gave G
            d.per_class = self._class_gradients(h, logits, labels)
        if self.optimizer is not None:
            self.optimizer.step()
        self.last_loss = loss.detach()
        self.last_predicted = self._decoded(logits.detach()).argmax(1)        # in the true classes, as `predict`'s
        # soft labels (cae) name no class to count against: the epoch loop counts against the true labels
        self.last_correct = (self.last_predicted == labels).sum() if labels.dim() == 1 else None
        g = h.grad
        for d in self.defences:
            g = d.on_send(g, labels)
        return CutGradient(message.step, g)

    def _class_gradients(self, h: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
        """The cut gradient of the task loss as if every label of the batch were class c, for each class c."""
        if labels.dim() != 1:
            raise SplitlabError("a defence that needs the per-class gradients (grad-perturb) takes class labels; "
                                "the label party here trains on soft labels (cae, dcae): use one of the two")
        classes = logits.shape[1]
        return [torch.autograd.grad(self.loss_fn(logits, torch.full_like(labels, c)), h, retain_graph=True)[0]
                for c in range(classes)]

    def training_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The labels it trains on: its defences' at the labels point, in order (the same tensor when none acts)."""
        for d in self.defences:
            on_labels = getattr(d, "on_training_labels", None)
            if on_labels is not None:
                labels = on_labels(labels)
        return labels

    @torch.no_grad()
    def predict(self, h: torch.Tensor) -> torch.Tensor:
        """The top model's scores of `h`, through the defences that decode them (cae: its decoder)."""
        self.model.eval()
        return self._decoded(self.model(h))

    def _decoded(self, scores: torch.Tensor) -> torch.Tensor:
        """The top model's scores through the defences that decode them into the true classes (cae's decoder)."""
        for d in self.defences:
            decode = getattr(d, "on_predict", None)
            if decode is not None:
                scores = decode(scores)
        return scores

    def answer(self, message: InferenceQuery) -> Prediction:
        self.seen.record(message)
        return Prediction(message.step, self.predict(message.tensor).argmax(1))


def _penalty(defence) -> torch.Tensor | None:
    penalty = getattr(defence, "penalty", None)
    return None if penalty is None else penalty()


class CuriousServer(Server):
    """Honest-but-curious: follows the protocol, and keeps every activation it received (training rounds
    and inference queries) with its tensor in `seen`, for an attack to read afterwards."""

    keeps_tensors = True


class MaliciousServer:
    """Returns gradients of its own choosing: `choose_gradient(H, step)` must return a tensor shaped like H.

    It has no task model: it answers inference queries with class -1. `seen` records what it received
    (tensors too when `keep_tensors`, e.g. for a decoder run on the targets' activations later)."""

    def __init__(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor], keep_tensors: bool = False):
        self.choose_gradient = choose_gradient
        self.last_loss: torch.Tensor | None = None
        self.last_correct: torch.Tensor | None = None
        self.seen = Transcript(keep_tensors=keep_tensors)

    def respond(self, message: Activations, labels: torch.Tensor | None = None) -> CutGradient:
        self.seen.record(message)
        return CutGradient(message.step, self.choose_gradient(message.tensor, message.step).detach())

    def answer(self, message: InferenceQuery) -> Prediction:
        self.seen.record(message)
        return Prediction(message.step, torch.full((len(message.tensor),), -1, dtype=torch.long,
                                                   device=message.tensor.device))


class ClientSession:
    """A running session of an honest client, as a malicious server meets it (FSHA's observation).

    Through it the server can only (a) run one protocol round with `round(choose_gradient)`: the
    client sends H = f(x) for its next private batch, `choose_gradient(H, step)` returns G, the client
    backpropagates G and steps (`exchange` with a `MaliciousServer`); and (b) at the end ask for the
    smashed data of the evaluation targets the victim side holds (`target_activations()`, client
    inference). Private images stay inside; every message is recorded in `transcript` when given.
    """

    def __init__(self, client: Client, batches: Iterator[torch.Tensor], targets: torch.Tensor,
                 transcript: Transcript | None = None):
        self._client = client
        self._batches = batches
        self._targets = targets
        self._transcript = transcript
        self._step = 0

    def round(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor]) -> int:
        """One protocol round on the client's next private batch; returns the round's step number."""
        step = self._step
        exchange(self._client, MaliciousServer(choose_gradient), next(self._batches), None, step, self._transcript)
        self._step += 1
        return step

    def target_activations(self) -> torch.Tensor:
        """The client's smashed data of the evaluation targets (inference mode, detached)."""
        return self._client.infer(self._targets).detach()


def exchange(client: Client, server: Role, x: torch.Tensor, y: torch.Tensor | None,
             step: int, transcript: Transcript | None = None) -> CutGradient:
    """One protocol round: H goes to the server, G comes back, the client steps. Returns G."""
    sent = getattr(client, "labels_sent", None)
    y = y if sent is None else sent(y, step)
    h = client.send(x, step)
    g = server.respond(h, y)
    if transcript is not None:
        transcript.record(h)
        transcript.record(g)
    client.receive(g)
    return g


class Diverged(SplitlabError):
    """Training met a non-finite loss or cut gradient: the run stops, and nothing of the epoch is kept."""


def _diverged(flags: list[torch.Tensor], first_step: int) -> Diverged:
    """The one line for the first round whose (loss finite, gradient finite) flags are not both true."""
    table = torch.stack(flags).cpu()
    index = int((~table.all(1)).nonzero()[0, 0])
    what = "the loss" if not bool(table[index, 0]) else "the cut gradient"
    return Diverged(f"training diverged: {what} became non-finite at step {first_step + index} (every party's "
                    "input here is this run's own: its data, model and --lr); nothing of the epoch was written")


# --- the one training loop -------------------------------------------------------------------------

def train_epoch(client: Client, server: Role, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
                device: torch.device, first_step: int = 0, transcript: Transcript | None = None,
                on_step: Callable[[int], None] | None = None) -> dict[str, float]:
    """Run protocol rounds over the batches; return the epoch's mean loss and training accuracy.

    A batch is (x, y), or (x, y, true labels) where the label party trains on soft labels y (cae): its training
    accuracy counts the server's predictions against the true labels.

    Loss and accuracy are summed on the device and read once at the end (no host sync per step); so are the
    flags saying each round's loss and cut gradient were finite: a non-finite one raises `Diverged` then.
    """
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    flags: list[torch.Tensor] = []
    seen = 0
    step = first_step
    for x, y, *truth in batches:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        g = exchange(client, server, x, y, step, transcript)
        finite = torch.isfinite(g.tensor).all()
        if server.last_loss is not None:
            loss_sum += server.last_loss * len(y)
            correct += server.last_correct if not truth else \
                (server.last_predicted == truth[0].to(device, non_blocking=True)).sum()
            flags.append(torch.stack((torch.isfinite(server.last_loss), finite)))
        else:
            flags.append(torch.stack((finite, finite)))
        seen += len(y)
        step += 1
        if on_step is not None:
            on_step(step)
    if flags and not bool(torch.stack(flags).all()):
        raise _diverged(flags, first_step)
    return {"loss": float(loss_sum) / max(seen, 1), "train_accuracy": int(correct) / max(seen, 1), "steps": step}


def ask(client: Client, server: Role, x: torch.Tensor, step: int,
        transcript: Transcript | None = None) -> Prediction:
    """One inference query: the client's activations of `x` go to the server, its prediction comes back (both
    recorded in `transcript` when given)."""
    query = client.query(x, step)
    prediction = server.answer(query)
    if transcript is not None:
        transcript.record(query)
        transcript.record(prediction)
    client.receive_prediction(prediction)
    return prediction


@torch.no_grad()
def evaluate(client: Client, server: Role, images: torch.Tensor, labels: torch.Tensor,
             device: torch.device, batch_size: int = 1000, step: int = 0,
             transcript: Transcript | None = None) -> float:
    """Test accuracy of the split model: inference queries of `batch_size` rows, scored by the server
    against its labels. `step` (the training rounds taken) labels the queries."""
    correct = torch.zeros((), device=device, dtype=torch.long)
    for start in range(0, len(labels), batch_size):
        x = images[start:start + batch_size].to(device)
        y = labels[start:start + batch_size].to(device)
        correct += (ask(client, server, x, step, transcript).tensor == y).sum()
    return int(correct) / max(len(labels), 1)

"""Train a split model from a config, and save/load it as a checkpoint that attacks can use."""
from __future__ import annotations

import dataclasses
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from vfl import data as datasets
from vfl.case import MAX_BATCH_SIZE, MAX_EPOCHS, SplitCase
from vfl.defences import parse_defences, parse_send_back, parse_spec, report, transformed_shape
from vfl.errors import SplitlabError, lookup
from vfl.parties import CutLayout, Parties, SumScores, bottom_model, score_model, strip_shape, take_strip, top_model
from vfl.progress import progress_bar
from vfl.protocol import (Client, ClientSession, CuriousServer, Prediction, Role, Server, Transcript, ask, evaluate,
                          make_optimizer, train_epoch)
from vfl.runs import Run, atomic_torch_save
from vfl.transcripts import FINAL, TranscriptFiles, epoch_file
from vfl.runtime import generator as seeded_generator
from vfl.runtime import resolve_device
from vfl.tasks import for_task, task_output

__all__ = ["TrainConfig", "SplitCase", "TrainedSplit", "MAX_EPOCHS", "MAX_BATCH_SIZE", "SERVER_ROLES", "ROLES",
           "load_data", "build_client", "build_server", "build_parties", "malicious_session", "FitState", "fit",
           "SampleRecord", "train_split",
           "target_indices", "query_targets", "training_curves_figure", "training_metrics", "trained_report",
           "save_trained", "save_checkpoint", "load_checkpoint"]

Optimiser = Callable[[list, float], torch.optim.Optimizer]
"""(parameters, learning rate) -> an optimiser: a feature party that trains its model its own way."""

CHECKPOINT_FORMAT = "splitlab-checkpoint/1"

TrainConfig = SplitCase
"""Split-learning training: the one split case (`vfl.case.SplitCase`), under the name `splitlab train` knew it by."""


@dataclass
class TrainedSplit:
    config: TrainConfig
    client: Client | Parties
    server: Server
    accuracy: float
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    provenance: str = ""
    defence_report: dict[str, Any] | None = None
    """What the defences did in training, where the parties above were rebuilt afterwards (from a checkpoint, or
    from the files of a run over TCP) and so never ran them; None: ask the parties."""


def load_data(config: TrainConfig) -> tuple[datasets.ImageData, datasets.ImageData]:
    """Both splits of the config's dataset, labelled for its task (raises `SplitlabError` if the files are
    missing)."""
    return tuple(for_task(datasets.load(config.dataset, split, config.data_root, seed=config.seed, draw=config.data_draw), config.task,
                          config.positive) for split in ("train", "test"))


SERVER_ROLES: dict[str, type[Server]] = {"honest": Server, "curious": CuriousServer}
"""The label party's roles that train the task (`vfl.protocol`), built from the case (`build_server`)."""

ROLES = (*SERVER_ROLES, "malicious")
"""Every server role of the case's training: honest (the label party's top model trains the task), curious (it
does, and records what it received) and malicious: a server object of the attacker's own that supplies the cut
gradients (`vfl.protocol.MaliciousServer`, FSHA's server, `splitlab serve --role malicious`), handed to
`train_split` as `server`, or driving the rounds itself through `malicious_session`."""


def _check_role(role: str, server: Role | None) -> None:
    lookup(dict.fromkeys(ROLES), role, "server role")
    if role == "malicious" and server is None:
        raise SplitlabError("a malicious server supplies its own cut gradients: pass the server object (server=)")
    if role != "malicious" and server is not None:
        raise SplitlabError(f"a {role} server is the label party the case builds; a server object of one's own is "
                            "role malicious")


def build_client(config: TrainConfig, device: torch.device, train_images: torch.Tensor | None = None,
                 party: int = 0, optimiser: Optimiser | None = None) -> Client:
    """Feature party `party`'s client: its defences for its strip (built first: they may change the input
    shape the bottom model takes, and DP estimates its sensitivity on the party's strip of `train_images`),
    its seeded bottom model and optimiser (the config's, or `optimiser`'s: an active attacker's own). The
    in-process run and `splitlab client` build it here alike."""
    shape = strip_shape(config.image_shape, config.parties, party)
    if train_images is not None and config.parties > 1:
        train_images = take_strip(train_images, config.parties, party, config.partition, config.seed,
                                  config.dataset, config.data_root)
    defences = parse_defences(config.defence, shape, train_images)
    if config.aggregate == "sum":
        model = score_model(config.arch, config.seed, config.parties, party, transformed_shape(defences, shape),
                            config.classes).to(device)
    else:
        model = bottom_model(config.arch, config.cut_layer, config.seed, config.parties, party,
                             transformed_shape(defences, shape)).to(device)
    params = list(model.parameters())
    return Client(model, optimiser(params, config.lr) if optimiser else make_optimizer(config.optimizer, params,
                                                                                         config.lr), defences)


def build_server(config: TrainConfig, device: torch.device, role: str = "honest") -> Server:
    """The label party: its seeded top model (taking the parties' joined activations; on a binary task its output
    layer has two units, from a stream of its own) in the given role, with its send-back defences."""
    shapes = config.cut_shapes()
    if config.aggregate == "sum":
        model = SumScores(config.parties, config.classes).to(device)
    else:
        model = task_output(top_model(config.arch, config.cut_layer, config.seed, shapes), config.classes,
                            config.seed).to(device)
    optimizer = make_optimizer(config.optimizer, model.parameters(), config.lr) if config.aggregate == "concat" \
        else None
    return lookup(SERVER_ROLES, role, "server role")(model, optimizer,
                                                     defences=parse_send_back(config.send_back, config.classes,
                                                                              CutLayout(shapes).joined_shape))


def build_parties(config: TrainConfig, device: torch.device, train_images: torch.Tensor | None = None,
                  role: str = "honest", optimiser: Optimiser | None = None) -> tuple[Client | Parties, Server]:
    """Seeded client side (one `Client`, or `Parties` when config.parties > 1) and server at the config's
    cut layer, with their optimisers and defences. Each side builds the whole architecture from the seed
    and keeps its part, so the split run starts from the same weights however the parties are hosted."""
    if config.parties == 1:
        client = build_client(config, device, train_images, optimiser=optimiser)
    else:
        if optimiser is not None:
            raise SplitlabError("a feature party training its own way is one party: give --parties 1")
        shapes = config.cut_shapes()
        client = Parties([build_client(config, device, train_images, k) for k in range(config.parties)],
                         config.image_shape, CutLayout(shapes), config.partition, config.seed, config.dataset,
                         config.data_root)
    return client, build_server(config, device, role)


@dataclass
class FitState:
    """Where a training run is: what the loop needs to continue it bit for bit (with the data order's
    generator and the parties' own state, which their owners save)."""
    epoch: int = 0                       # finished epochs
    step: int = 0                        # protocol rounds taken
    history: list[dict[str, Any]] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)


def fit(client, server: Role, train: datasets.ImageData, test: datasets.ImageData, config: TrainConfig,
        device: torch.device, generator: torch.Generator, *, state: FitState | None = None, run: Run | None = None,
        progress: bool = True, on_epoch: Callable[[FitState], None] | None = None) -> FitState:
    """The epoch loop, written once for every transport: protocol rounds over the training data in the
    generator's order (`train_epoch`), then test accuracy through inference queries (`evaluate`), per
    epoch from `state.epoch` to `config.epochs`; `on_epoch(state)` after each (checkpoints).

    In process `train` and `test` hold images; over the wire (`vfl.wire.server`) the server's hold sample
    indices, which `RemoteParties` sends to the clients, who look up their own features."""
    state = state or FitState()
    train = _labelled_for_training(server, train)
    steps_per_epoch = -(-len(train) // config.batch_size)
    title = f"train {config.arch} {config.where}"
    with progress_bar((config.epochs - state.epoch) * steps_per_epoch, title, enabled=progress) as bar:
        for epoch in range(state.epoch, config.epochs):
            start = time.perf_counter()
            stats = train_epoch(client, server, train.batches(config.batch_size, generator), device,
                                first_step=state.step, on_step=lambda _: bar.advance())
            state.step = stats.pop("steps")
            stats.update(epoch=epoch + 1, test_accuracy=evaluate(client, server, test.images, test.labels, device,
                                                                 step=state.step))
            state.history.append(stats)
            state.epoch = epoch + 1
            state.epoch_seconds.append(time.perf_counter() - start)
            bar.describe(f"{title} epoch {epoch + 1} acc {stats['test_accuracy']:.4f}")
            if run is not None:
                run.log(f"epoch {epoch + 1}: loss {stats['loss']:.4f} test accuracy {stats['test_accuracy']:.4f}")
            if on_epoch is not None:
                on_epoch(state)
    return state


def _labelled_for_training(server: Role, train):
    """The training data with the labels the label party trains on (its defences' at the labels point, drawn once
    for the whole run); the same object when none acts. Soft labels (cae) come with the true ones alongside, which
    its training accuracy is counted against."""
    relabel = getattr(server, "training_labels", None)
    labels = train.labels if relabel is None else relabel(train.labels)
    if labels is train.labels:
        return train
    return train.relabelled(labels) if labels.dim() == 1 else WithTrueLabels(train, labels)


@dataclass
class WithTrueLabels:
    """Training data whose label party trains on soft labels: its batches are (x, soft labels, true labels), in
    the order the data's own batches are drawn (the same draws of the generator)."""
    data: Any
    soft: torch.Tensor

    def __len__(self) -> int:
        return len(self.data)

    def batches(self, batch_size: int, generator: torch.Generator | None = None):
        truth = self.data.labels
        ids = self.data.relabelled(torch.arange(len(truth), device=truth.device))
        for x, index in ids.batches(batch_size, generator):
            yield x, self.soft[index], truth[index]


def target_indices(labels: torch.Tensor) -> torch.Tensor:
    """The evaluation targets: the index of the first sample of each class present, in class order
    (`vfl.data.first_of_each_class`'s images, found from the labels alone as the label party can)."""
    return torch.stack([torch.nonzero(labels == c)[0, 0] for c in torch.unique(labels)])


def query_targets(client, server: Role, test: datasets.ImageData, device: torch.device, step: int) -> Prediction:
    """After training, the client sends the activations of the evaluation targets as an inference query:
    what an attack on the server's side may later read from the server's transcript."""
    return ask(client, server, test.images[target_indices(test.labels)].to(device), step)


@dataclass
class SampleRecord:
    """The training split as the epoch loop reads it, noting which samples each round holds (in vertical FL the
    parties align samples by id, so a feature party knows its own samples' ids in every round)."""
    data: datasets.ImageData
    samples: list[torch.Tensor] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.data)

    @property
    def labels(self) -> torch.Tensor:
        return self.data.labels

    def relabelled(self, labels: torch.Tensor) -> "SampleRecord":
        """The same rounds with other training labels; `samples` is the same list (the caller reads it)."""
        return SampleRecord(self.data.relabelled(labels), self.samples)

    def batches(self, batch_size: int, generator: torch.Generator | None = None):
        d = self.data
        ids = datasets.ImageData(d.name, d.split, d.images, torch.arange(len(d), device=d.images.device), d.provenance)
        for x, index in ids.batches(batch_size, generator):          # the order `ImageData.batches` draws
            self.samples.append(index.cpu())
            yield x, d.labels[index]


def train_split(config: TrainConfig, train: datasets.ImageData, test: datasets.ImageData,
                run: Run | None = None, progress: bool = True, role: str = "honest",
                transcript_dir: Run | Path | None = None, *, feature_party: Callable[[Client], Any] | None = None,
                optimiser: Optimiser | None = None, samples: list[torch.Tensor] | None = None,
                query: bool = True, server: Role | None = None) -> TrainedSplit:
    """Train the case through the explicit protocol in process; test accuracy after every epoch; then (`query`)
    the evaluation targets' inference query. `role` is the server's (`ROLES`): honest or curious, the label party
    the case builds; malicious, `server`, an object supplying the cut gradients in its place (it has no task: the
    test accuracy it answers for is that of its predictions, -1 for a server without one); with `transcript_dir`,
    what the server received is written there as `splitlab serve` writes it (`vfl.transcripts`; a `Run` records
    them).

    What an attacking feature party needs: `feature_party(client)` is the party that takes part in its place (one
    that keeps what it receives), `optimiser` its own way of training its model, and `samples`, a list the ids of
    each round's samples are appended to."""
    _check_role(role, server)
    device = resolve_device(config.device)
    generator = seeded_generator(config.seed)
    client, label_party = build_parties(config, device, train.images, "honest" if server else role, optimiser)
    server = label_party if server is None else server          # the attacker's own in the label party's place
    if feature_party is not None:
        client = feature_party(client)
    images, labels = train.images.to(device), train.labels.to(device)
    on_device = datasets.ImageData(train.name, train.split, images, labels, train.provenance)
    rounds = on_device if samples is None else SampleRecord(on_device, samples)
    files = TranscriptFiles(transcript_dir, server.seen) if transcript_dir is not None else None
    start = time.perf_counter()
    state = fit(client, server, rounds, test, config, device, generator, run=run, progress=progress,
                on_epoch=None if files is None else lambda s: files.write(epoch_file(s.epoch)))
    if query:
        query_targets(client, server, test, device, state.step)
    if files is not None:
        files.write(FINAL)
    seconds = time.perf_counter() - start
    return TrainedSplit(config, client, server, state.history[-1]["test_accuracy"], state.history, seconds,
                        train.provenance)


def malicious_session(client: Client, batches, targets: torch.Tensor,
                      transcript: Transcript | None = None) -> ClientSession:
    """The case's training with a malicious server that drives the rounds itself (FSHA's): the client trains on
    its private `batches` round by round with the gradients the server supplies, through the protocol's one round
    (`vfl.protocol.exchange`), and answers for the smashed data of its `targets` at the end."""
    return ClientSession(client, batches, targets, transcript)


def training_curves_figure(trained: TrainedSplit):
    """Training loss and train/test accuracy per epoch (the test accuracy is measured after each epoch)."""
    from matplotlib.figure import Figure

    epochs = [row["epoch"] for row in trained.history]
    fig = Figure(figsize=(9, 3.5))
    loss, accuracy = fig.subplots(1, 2)
    loss.plot(epochs, [row["loss"] for row in trained.history], "o-")
    loss.set(xlabel="epoch", ylabel="mean training loss", yscale="log", title="loss")
    for key, label in (("train_accuracy", "train (running, during the epoch)"), ("test_accuracy", "test")):
        accuracy.plot(epochs, [row[key] for row in trained.history], "o-", label=label)
    accuracy.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    accuracy.legend(fontsize=8)
    c = trained.config
    fig.suptitle(f"{c.arch}, cut {c.cut_layer}, {c.dataset}, {c.optimizer} lr {c.lr:g}, batch {c.batch_size}, "
                 f"seed {c.seed}" + (f", defence {c.defence}" if c.defence != "none" else ""), fontsize=9)
    for ax in (loss, accuracy):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def training_metrics(trained: TrainedSplit) -> dict[str, Any]:
    """What `metrics.json` holds for a training run (`splitlab train`, `splitlab.api.train`)."""
    found = trained_report(trained)
    return {"accuracy": trained.accuracy, "seconds": trained.seconds, "history": trained.history,
            **({"defence_report": found} if found else {})}


def trained_report(trained: TrainedSplit) -> dict[str, Any]:
    """What the defences did in training (`TrainedSplit.defence_report`, else the parties' own)."""
    return trained.defence_report if trained.defence_report is not None else report(trained.client, trained.server)


def save_trained(run: Run, trained: TrainedSplit) -> tuple[Path, Path]:
    """What every command that trains a model leaves in its run directory: `checkpoint.pt` (for the
    attacks) and `training_curves.png`. Returns both paths."""
    checkpoint = save_checkpoint(run.file("checkpoint.pt"), trained)
    return checkpoint, run.save_figure("training_curves.png", training_curves_figure(trained))


def save_checkpoint(path: Path, trained: TrainedSplit) -> Path:
    atomic_torch_save({
        "format": CHECKPOINT_FORMAT,
        "config": dataclasses.asdict(trained.config),
        "accuracy": trained.accuracy,
        "defence_report": trained_report(trained),
        "client": trained.client.model.state_dict(),
        "server": trained.server.model.state_dict(),
    }, path)
    return Path(path)


def load_checkpoint(path: Path | str, device: str = "auto", data_root: Path | str | None = None) -> TrainedSplit:
    """Rebuild client and server from a checkpoint (`torch.load(weights_only=True)`) on `device`.

    `data_root`, when given, replaces the one saved at training time (the data may have moved, and the
    errors tell users to pass --data-root); the returned config carries it, for loading the test data."""
    path = Path(path)
    try:
        found = path.is_file()
    except OSError as exc:                       # a name too long for the file system, a loop of links
        raise SplitlabError(f"cannot read checkpoint {path} ({exc.strerror}); pass --checkpoint the path of a "
                            "checkpoint.pt") from None
    if not found and path.exists():              # a folder, a FIFO, a device: never opened (a FIFO would wait)
        raise SplitlabError(f"checkpoint {path} is not a regular file; pass --checkpoint the path of a checkpoint.pt")
    if not found:
        raise SplitlabError(f"checkpoint {path} not found; train one with `splitlab train --out DIR` "
                            "and pass DIR/checkpoint.pt")
    retrain = "retrain with `splitlab train`"
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise SplitlabError(f"cannot read checkpoint {path} ({exc.strerror}); make it readable or {retrain}") from None
    try:
        with zipfile.ZipFile(path) as archive:      # torch's reader skips the CRCs: a flipped bit would load
            if any(member.compress_type != zipfile.ZIP_STORED for member in archive.infolist()):
                raise ValueError("compressed members")   # torch never compresses; checking one could take hours
            damaged = archive.testzip()
        blob = None if damaged else torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:     # a truncated or corrupt file fails in many ways: zip reader, unpickler, OSError
        raise SplitlabError(f"checkpoint {path} is truncated or corrupt ({type(exc).__name__}); {retrain}") from None
    if damaged:
        raise SplitlabError(f"checkpoint {path} is corrupt (its {damaged} fails its checksum); {retrain}")
    try:
        if not isinstance(blob, dict) or blob.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("not a splitlab checkpoint")
        saved = dict(blob["config"], device=device)
        if isinstance(saved.get("defence"), str):        # its gradient noise was the feature party's own: that name
            saved["defence"] = "+".join(f"received-{part.strip()}" if part.strip().startswith("gradient-noise")
                                        else part for part in saved["defence"].split("+"))
        if data_root is not None:
            saved["data_root"] = str(data_root)
        try:
            config = TrainConfig(**saved)           # checked when built
        except SplitlabError as exc:
            raise SplitlabError(f"checkpoint {path} holds a training config splitlab refuses ({exc}); {retrain}") from None
        needs_data = any("train-images" in item.spec.needs for item in parse_spec(config.defence))
        train_images = load_data(config)[0].images if needs_data else None
        client, server = build_parties(config, resolve_device(device), train_images)
        client.model.load_state_dict(blob["client"])
        server.model.load_state_dict(blob["server"])
        accuracy = float(blob.get("accuracy", float("nan")))
    except SplitlabError:
        raise
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SplitlabError(f"checkpoint {path} is corrupt or not a splitlab checkpoint "
                            f"({type(exc).__name__}); {retrain}") from None
    return TrainedSplit(config, client, server, accuracy, defence_report=dict(blob.get("defence_report") or {}))

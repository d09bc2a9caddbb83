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
from vfl.defences import check_send_back, parse_defences, parse_send_back, parse_spec, report, transformed_shape
from vfl.errors import SplitlabError, lookup
from vfl.models import arch_spec, check_cut_layer, check_input_shape
from vfl.parties import (AGGREGATES, MAX_PARTIES, PARTITION_RULES, PARTITIONS, CutLayout, Parties, SumScores,
                         activation_shapes, bottom_model, check_partition, check_parties, party_columns, score_model,
                         strip_shape, take_strip, top_model)
from vfl.validate import check_int
from vfl.progress import progress_bar
from vfl.protocol import (OPTIMIZERS, Client, CuriousServer, Prediction, Role, Server, ask, evaluate,
                          make_optimizer, train_epoch)
from vfl.runs import Run, atomic_torch_save
from vfl.transcripts import FINAL, TranscriptFiles, epoch_file
from vfl.runtime import generator as seeded_generator
from vfl.runtime import resolve_device
from vfl.options import Runtime, choice, integer, number, option, text
from vfl.tasks import TASKS, check_task, for_task, task_classes, task_output

CHECKPOINT_FORMAT = "splitlab-checkpoint/1"

MAX_EPOCHS, MAX_BATCH_SIZE = 100_000, 1_000_000
"""Far above any run here; they catch a typo (an extra digit) before hours of training are queued."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig(Runtime):
    """Split-learning training. Defaults are the JAST paper's (Adam 1e-3 amsgrad, batch 64, 10 epochs).
    Every name and number is checked when the config is built, before anything is loaded or written."""
    dataset: str = option("mnist5k", "Dataset (see `splitlab datasets`).", text())
    arch: str = option("cnn", "Architecture (see `splitlab models`).", text())
    cut_layer: int = option(1, "Cut layer: the client holds layers 0..cut.", integer(low=0, high=1000))
    epochs: int = option(10, "Training epochs.", integer(low=1, high=MAX_EPOCHS))
    batch_size: int = option(64, "Mini-batch size.", integer(low=1, high=MAX_BATCH_SIZE))
    lr: float = option(1e-3, "Learning rate of client and server.", number(low=0, low_open=True))
    optimizer: str = option("adam-amsgrad", "sgd, momentum, adam or adam-amsgrad.", choice(OPTIMIZERS))
    task: str = option("multiclass", "multiclass (the dataset's classes) or binary (one class, --positive, against "
                       "the rest: the label party's output layer then has two units).", choice(TASKS))
    positive: int = option(0, "The positive class of --task binary.", integer(low=0, high=999))
    defence: str = option("none", "The feature party's defences (input, activations sent, gradient received): none "
                          "or name[:key=value,...] items joined by + (see `splitlab defences`); with --parties K each "
                          "party applies them to its strip.", text())
    send_back: str = option("none", "The label party's defences on the cut gradient it sends back: none or "
                            "name[:key=value,...] items joined by + (see `splitlab defences`).", text())
    parties: int = option(1, "Feature parties K, each holding a vertical strip of every image (1: classic split "
                          "learning on whole images).", integer(low=1, high=64))
    partition: str = option("contiguous", "How --parties K split the columns: contiguous (party k holds the k-th "
                            "block: an image's vertical strip), random (tabular data only: as many columns each, "
                            "drawn from --seed) or correlation (tabular data only: columns ranked by |correlation "
                            "with the label| on the training split, dealt round-robin).", choice(PARTITIONS))
    aggregate: str = option("concat", "How the label party joins the parties' outputs: concat (its top model, the "
                            "layers after --cut-layer, takes their activations side by side) or sum (aggVFL: each "
                            "party's model is the whole architecture sending class scores, the label party sums them "
                            "and trains nothing; --cut-layer is not used).", choice(AGGREGATES))

    def check(self) -> None:
        spec = arch_spec(self.arch)
        check_cut_layer(spec, self.cut_layer)
        found = datasets.dataset_spec(self.dataset)
        image_shape = found.image_shape
        check_input_shape(spec, image_shape, self.dataset)
        if self.aggregate == "sum":
            check_int("--parties", self.parties, low=1, high=min(MAX_PARTIES, image_shape[-1]))
            for party in range(self.parties):       # raises if a party's columns are too few for the layers
                score_model(self.arch, 0, self.parties, party, strip_shape(image_shape, self.parties, party),
                            self.classes)
        else:
            check_parties(self.parties, self.arch, self.cut_layer, image_shape)
        check_partition(self.partition, image_shape)
        check_task(self.task, self.positive, self.dataset)
        for party in range(self.parties):
            parse_spec(self.defence, strip_shape(image_shape, self.parties, party), flat_input=spec.flat_input)
        check_send_back(self.send_back, self.classes, label_model=self.aggregate == "concat")
        resolve_device(self.device)

    @property
    def classes(self) -> int:
        return task_classes(self.task, self.dataset)

    @property
    def image_shape(self) -> tuple[int, ...]:
        return tuple(datasets.dataset_spec(self.dataset).image_shape)

    def cut_shapes(self) -> list[tuple[int, ...]]:
        """The per-example shape of what each party sends: its cut activations, or its class scores (sum)."""
        if self.aggregate == "sum":
            return [(self.classes,)] * self.parties
        return activation_shapes(self.arch, self.cut_layer, self.image_shape, self.parties)

    def feature_partition(self) -> dict[str, Any]:
        """What a run records of how its parties split the columns (of an image's last axis, or a tabular sample)."""
        return {"partition": self.partition, "parties": self.parties, "rule": PARTITION_RULES[self.partition],
                "columns": party_columns(self.image_shape[-1], self.parties, self.partition, self.seed,
                                         self.dataset)}


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
    return tuple(for_task(datasets.load(config.dataset, split, config.data_root, seed=config.seed), config.task,
                          config.positive) for split in ("train", "test"))


SERVER_ROLES: dict[str, type[Server]] = {"honest": Server, "curious": CuriousServer}
"""The label party's roles that train the task (`vfl.protocol`); a malicious server needs a gradient
callback (`vfl.protocol.MaliciousServer`, `splitlab serve --role malicious`)."""


def build_client(config: TrainConfig, device: torch.device, train_images: torch.Tensor | None = None,
                 party: int = 0) -> Client:
    """Feature party `party`'s client: its defences for its strip (built first: they may change the input
    shape the bottom model takes, and DP estimates its sensitivity on the party's strip of `train_images`),
    its seeded bottom model and optimiser. The in-process run and `splitlab client` build it here alike."""
    shape = strip_shape(config.image_shape, config.parties, party)
    if train_images is not None and config.parties > 1:
        train_images = take_strip(train_images, config.parties, party, config.partition, config.seed,
                                  config.dataset)
    defences = parse_defences(config.defence, shape, train_images)
    if config.aggregate == "sum":
        model = score_model(config.arch, config.seed, config.parties, party, transformed_shape(defences, shape),
                            config.classes).to(device)
    else:
        model = bottom_model(config.arch, config.cut_layer, config.seed, config.parties, party,
                             transformed_shape(defences, shape)).to(device)
    return Client(model, make_optimizer(config.optimizer, model.parameters(), config.lr), defences)


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
                  role: str = "honest") -> tuple[Client | Parties, Server]:
    """Seeded client side (one `Client`, or `Parties` when config.parties > 1) and server at the config's
    cut layer, with their optimisers and defences. Each side builds the whole architecture from the seed
    and keeps its part, so the split run starts from the same weights however the parties are hosted."""
    if config.parties == 1:
        client = build_client(config, device, train_images)
    else:
        shapes = config.cut_shapes()
        client = Parties([build_client(config, device, train_images, k) for k in range(config.parties)],
                         config.image_shape, CutLayout(shapes), config.partition, config.seed, config.dataset)
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
    title = f"train {config.arch} cut {config.cut_layer}"
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
    for the whole run); the same object when none acts."""
    relabel = getattr(server, "training_labels", None)
    labels = train.labels if relabel is None else relabel(train.labels)
    return train if labels is train.labels else train.relabelled(labels)


def target_indices(labels: torch.Tensor) -> torch.Tensor:
    """The evaluation targets: the index of the first sample of each class present, in class order
    (`vfl.data.first_of_each_class`'s images, found from the labels alone as the label party can)."""
    return torch.stack([torch.nonzero(labels == c)[0, 0] for c in torch.unique(labels)])


def query_targets(client, server: Role, test: datasets.ImageData, device: torch.device, step: int) -> Prediction:
    """After training, the client sends the activations of the evaluation targets as an inference query:
    what an attack on the server's side may later read from the server's transcript."""
    return ask(client, server, test.images[target_indices(test.labels)].to(device), step)


def train_split(config: TrainConfig, train: datasets.ImageData, test: datasets.ImageData,
                run: Run | None = None, progress: bool = True, role: str = "honest",
                transcript_dir: Run | Path | None = None) -> TrainedSplit:
    """Train with the explicit protocol in process; test accuracy after every epoch; then the evaluation
    targets' inference query. `role` is the server's (`SERVER_ROLES`); with `transcript_dir`, what the
    server received is written there as `splitlab serve` writes it (`vfl.transcripts`; a `Run` records them)."""
    device = resolve_device(config.device)
    generator = seeded_generator(config.seed)
    client, server = build_parties(config, device, train.images, role)
    images, labels = train.images.to(device), train.labels.to(device)
    on_device = datasets.ImageData(train.name, train.split, images, labels, train.provenance)
    files = TranscriptFiles(transcript_dir, server.seen) if transcript_dir is not None else None
    start = time.perf_counter()
    state = fit(client, server, on_device, test, config, device, generator, run=run, progress=progress,
                on_epoch=None if files is None else lambda s: files.write(epoch_file(s.epoch)))
    query_targets(client, server, test, device, state.step)
    if files is not None:
        files.write(FINAL)
    seconds = time.perf_counter() - start
    return TrainedSplit(config, client, server, state.history[-1]["test_accuracy"], state.history, seconds,
                        train.provenance)


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

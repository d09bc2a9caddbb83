"""Train a split model from a config, and save/load it as a checkpoint that attacks can use."""
from __future__ import annotations

import dataclasses
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vfl import data as datasets
from vfl.defences import parse_defences, parse_spec, transformed_shape
from vfl.errors import SplitlabError
from vfl.models import arch_spec, build_split, check_cut_layer, check_input_shape
from vfl.progress import progress_bar
from vfl.protocol import OPTIMIZERS, Client, Server, evaluate, make_optimizer, train_epoch
from vfl.runs import Run, atomic_torch_save
from vfl.runtime import generator as seeded_generator
from vfl.runtime import resolve_device
from vfl.options import Runtime, choice, integer, number, option, text

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
    defence: str = option("none", "Client defence spec: none, orthogonal[:seed=N], semi-orthogonal:dim=D, "
                          "patch-orthogonal[:patch=P], input-dp[:epsilon=E,delta=D,sensitivity=S] (defaults 6, 0.5, "
                          "estimated) or input-dp:sigma=S, activation-noise:sigma=S, gradient-noise:sigma=S; join "
                          "with +.", text())

    def check(self) -> None:
        spec = arch_spec(self.arch)
        check_cut_layer(spec, self.cut_layer)
        check_input_shape(spec, datasets.dataset_spec(self.dataset).image_shape, self.dataset)
        for item in parse_spec(self.defence, datasets.dataset_spec(self.dataset).image_shape):
            if item.name == "semi-orthogonal" and not spec.flat_input:
                raise SplitlabError(f"defence semi-orthogonal changes the input size; architecture {self.arch} "
                                    "cannot take it (use mlp or small-mlp)")
        resolve_device(self.device)


@dataclass
class TrainedSplit:
    config: TrainConfig
    client: Client
    server: Server
    accuracy: float
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    provenance: str = ""


def load_data(config: TrainConfig) -> tuple[datasets.ImageData, datasets.ImageData]:
    """Both splits of the config's dataset (raises `SplitlabError` if the files are missing)."""
    return (datasets.load(config.dataset, "train", config.data_root),
            datasets.load(config.dataset, "test", config.data_root))


def build_parties(config: TrainConfig, device: torch.device,
                  train_images: torch.Tensor | None = None) -> tuple[Client, Server]:
    """Seeded client and server at the config's cut layer, with their optimisers and defences.

    Defences are built first: they may change the input shape the client takes, and DP estimates its
    sensitivity on `train_images`.
    """
    image_shape = datasets.dataset_spec(config.dataset).image_shape
    defences = parse_defences(config.defence, image_shape, train_images)
    client_model, server_model = build_split(config.arch, config.cut_layer, seed=config.seed,
                                             input_shape=transformed_shape(defences, image_shape))
    client_model, server_model = client_model.to(device), server_model.to(device)
    client = Client(client_model, make_optimizer(config.optimizer, client_model.parameters(), config.lr),
                    defences)
    server = Server(server_model, make_optimizer(config.optimizer, server_model.parameters(), config.lr))
    return client, server


def train_split(config: TrainConfig, train: datasets.ImageData, test: datasets.ImageData,
                run: Run | None = None, progress: bool = True) -> TrainedSplit:
    """Train with the explicit protocol; test accuracy after every epoch."""
    device = resolve_device(config.device)
    generator = seeded_generator(config.seed)
    client, server = build_parties(config, device, train.images)
    images, labels = train.images.to(device), train.labels.to(device)
    on_device = datasets.ImageData(train.name, train.split, images, labels, train.provenance)
    steps_per_epoch = -(-len(train) // config.batch_size)
    history = []
    start = time.perf_counter()
    with progress_bar(config.epochs * steps_per_epoch, f"train {config.arch} cut {config.cut_layer}",
                      enabled=progress) as bar:
        step = 0
        for epoch in range(config.epochs):
            stats = train_epoch(client, server, on_device.batches(config.batch_size, generator), device,
                                first_step=step, on_step=lambda _: bar.advance())
            step = stats.pop("steps")
            stats.update(epoch=epoch + 1, test_accuracy=evaluate(client, server, test.images, test.labels, device))
            history.append(stats)
            bar.describe(f"train {config.arch} cut {config.cut_layer} "
                         f"epoch {epoch + 1} acc {stats['test_accuracy']:.4f}")
            if run is not None:
                run.log(f"epoch {epoch + 1}: loss {stats['loss']:.4f} test accuracy {stats['test_accuracy']:.4f}")
    seconds = time.perf_counter() - start
    return TrainedSplit(config, client, server, history[-1]["test_accuracy"], history, seconds, train.provenance)


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
    return {"accuracy": trained.accuracy, "seconds": trained.seconds, "history": trained.history}


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
        if data_root is not None:
            saved["data_root"] = str(data_root)
        try:
            config = TrainConfig(**saved)           # checked when built
        except SplitlabError as exc:
            raise SplitlabError(f"checkpoint {path} holds a training config splitlab refuses ({exc}); {retrain}") from None
        needs_data = any(item.name == "input-dp" for item in parse_spec(config.defence))
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
    return TrainedSplit(config, client, server, accuracy)

"""The kinds of client `splitlab client` can be (`--kind`): what each holds, builds and tells the server, which
frames start its rounds and queries, and what it answers them with. The session loop (`client.py`) is the same.

- `split`: feature party k of split learning (`SplitParty`): its strip of every image and its bottom model,
  built as in process (`vfl.training.build_client`). The server names the samples of each round (BATCH: sample
  indices) and of each query (QUERY_REQUEST); epochs end with EPOCH_END, and it can resume.
- `fsha`: FSHA's honest victim (`FshaParty`): its private images and its network, built as in the attack's
  own process (`vfl.fsha_victim.honest_client`). It draws its own private batches in its own order (each
  PRIVATE_ROUND: its next batch) and holds its evaluation targets (TARGET_REQUEST: their smashed data); the
  server never names a private sample. It trains what the gradients it receives say, like any honest client:
  nothing in it knows of an attack. No epochs, so no checkpoints.

Each kind checks the server's terms against what it knows itself before using them (`accept_terms`): its
sample counts and classes, a batch bound within its data, an epoch to start from that it saved (a resume
never starts over a party's saved epochs), so every bound its frames are checked against is its own.
"""
from __future__ import annotations

from typing import Any

import torch

from vfl import data as datasets
from vfl.fsha_victim import honest_client
from vfl.parties import take_strip
from vfl.protocol import Client
from vfl.training import TrainConfig, build_client
from vfl.wire.frames import Allow, Frame, Kind
from vfl.errors import SplitlabError
from vfl.wire.remote import QUERY_ROWS, Limits
from vfl.wire.settings import ClientSettings

MAX_EPOCHS = 1_000_000
MAX_ROUNDS = 10**9
ROUND_FRAMES = (Kind.BATCH, Kind.PRIVATE_ROUND)
QUERY_FRAMES = (Kind.QUERY_REQUEST, Kind.TARGET_REQUEST)


def _count(terms: dict[str, Any], key: str, high: int) -> int:
    value = terms.get(key)
    if type(value) is not int or not 0 <= value <= high:
        raise SplitlabError(f"the server's terms give {key} {value!r}; refused (run the same splitlab on both sides)")
    return value


def _refuse_terms(what: str) -> SplitlabError:
    return SplitlabError(f"the server's terms {what}; refused before any tensor was exchanged")


def _features(config: TrainConfig, party: int, split: str) -> torch.Tensor:
    """This party's strip of every image of the split (contiguous, as a party holding only it would)."""
    images = datasets.load(config.dataset, split, config.data_root, seed=config.seed,
                           draw=config.data_draw).images   # labels not kept
    if config.parties == 1:
        return images
    return take_strip(images, config.parties, party, config.partition, config.seed, config.dataset,
                      config.data_root).contiguous()


def _whole_images(config: TrainConfig) -> torch.Tensor:
    """The training images `build_client` takes (it cuts the party's strip; DP estimates its noise there)."""
    return datasets.load(config.dataset, "train", config.data_root, seed=config.seed, draw=config.data_draw).images


def introduction(config: TrainConfig, party: int, train_size: int, test_size: int,
                 saved_epochs: list[int] | None = None) -> dict[str, Any]:
    """What a split-learning client tells the server in the handshake (`saved_epochs`: None unless it resumes)."""
    shape = config.cut_shapes()[party]
    return {"kind": "split", "dataset": config.dataset, "arch": config.arch, "cut_layer": config.cut_layer,
            "party": party, "activation_shape": list(shape), "train_size": train_size, "test_size": test_size,
            "resume": saved_epochs is not None, "epochs": saved_epochs or [], "partition": config.partition,
            "aggregate": config.aggregate,
            "data_seed": datasets.split_seed(config.dataset, config.seed, config.data_draw)}


class SplitParty:
    """Feature party `settings.party` of split learning."""

    def __init__(self, settings: ClientSettings, device: torch.device):
        config = self.config = settings.train
        self.party, self.parties, self.device = settings.party, config.parties, device
        self.client: Client = build_client(config, device, _whole_images(config), self.party)
        self.train, self.test = _features(config, self.party, "train"), _features(config, self.party, "test")
        self.title = f"party {self.party}: {config.arch} cut {config.cut_layer}"

    def introduction(self, saved_epochs: list[int] | None) -> dict[str, Any]:
        return introduction(self.config, self.party, len(self.train), len(self.test), saved_epochs)

    def expected(self, limits: Limits, epoch: int, rounds: int) -> tuple[Allow, ...]:
        return (Allow(Kind.BATCH, torch.int64, (), rows=(1, limits.batch_size), values=(0, limits.train_size)),
                Allow(Kind.QUERY_REQUEST, torch.int64, (), rows=(1, limits.query_rows), values=(0, limits.test_size)),
                Allow(Kind.EPOCH_END, step=epoch + 1))

    def check_round(self, epoch: int, rounds: int) -> None:
        """Refuse a training round the terms do not hold: past the epoch's `rounds_per_epoch` or past the last
        epoch agreed (`rounds`: this epoch's rounds so far)."""
        if epoch >= self.epochs:
            raise SplitlabError(f"the server sent a training round after the {self.epochs} epochs its terms agreed; "
                                "refused")
        if rounds >= self.rounds_per_epoch:
            raise SplitlabError(f"the server sent round {rounds + 1} of epoch {epoch + 1}, which has "
                                f"{self.rounds_per_epoch} by its terms; refused")

    def check_epoch_end(self, epoch: int, rounds: int) -> None:
        """Refuse an epoch's end before the epoch's rounds were all taken: a checkpoint holds a whole epoch, so
        a saved later epoch is never replaced by an earlier model on the server's word."""
        if rounds != self.rounds_per_epoch:
            raise SplitlabError(f"the server ended epoch {epoch + 1} after {rounds} of its {self.rounds_per_epoch} "
                                "rounds; refused (no checkpoint was written)")

    def round_input(self, frame: Frame) -> torch.Tensor:
        return self.train[frame.tensor].to(self.device)

    def query_input(self, frame: Frame) -> torch.Tensor:
        return self.test[frame.tensor].to(self.device)

    def accept_terms(self, terms: dict[str, Any], saved: list[int] | None) -> tuple[Limits, int, int]:
        """(limits, the epoch to start after, rounds to expect) from the server's terms, once they agree with
        this party's data and its saved epochs (`saved`: None unless it resumes)."""
        limits = Limits.from_terms(terms.get("limits"))
        own = (len(self.train), len(self.test), self.config.classes)
        if (limits.train_size, limits.test_size, limits.classes) != own:
            raise _refuse_terms(f"say {limits.train_size}/{limits.test_size} train/test samples of {limits.classes} "
                                f"classes; this party holds {own[0]}/{own[1]} of {own[2]}")
        if not 1 <= limits.batch_size <= limits.train_size or not 1 <= limits.query_rows <= QUERY_ROWS:
            raise _refuse_terms(f"allow batches of {limits.batch_size} and queries of {limits.query_rows} rows; "
                                f"this party takes 1 to {limits.train_size} and 1 to {QUERY_ROWS}")
        epochs, start = _count(terms, "epochs", MAX_EPOCHS), _count(terms, "start_epoch", MAX_EPOCHS)
        if start > epochs:
            raise _refuse_terms(f"start after epoch {start} of {epochs}")
        if saved is None and start:
            raise _refuse_terms(f"resume after epoch {start}, but this party starts afresh (no --resume)")
        if saved and start not in saved:
            raise _refuse_terms(f"resume after epoch {start}, but this party saved epochs {saved}; nothing was "
                                "deleted (start both sides again without --resume, into new --out folders)")
        self.epochs, self.rounds_per_epoch = epochs, -(-limits.train_size // limits.batch_size)
        return limits, start, (epochs - start) * self.rounds_per_epoch


class FshaParty:
    """FSHA's honest victim, the one party of its session."""
    party, parties = 0, 1

    def __init__(self, settings: ClientSettings, device: torch.device):
        config = self.config = settings.fsha
        private = datasets.load(config.dataset, "train", config.data_root, seed=config.seed, draw=config.data_draw)
        self.honest = honest_client(config, private, device)
        self.client: Client = self.honest.client
        self.title = f"fsha victim: {config.arch} level {config.cut_layer}"

    def introduction(self, saved_epochs: list[int] | None) -> dict[str, Any]:
        c = self.config
        return {"kind": "fsha", "dataset": c.dataset, "arch": c.arch, "cut_layer": c.cut_layer, "batch_size": c.batch_size,
                "activation_shape": list(c.feature_shape), "targets": len(self.honest.targets),
                "data_seed": datasets.split_seed(c.dataset, c.seed, c.data_draw),
                "resume": saved_epochs is not None, "epochs": saved_epochs or []}

    def expected(self, limits: Limits, epoch: int, rounds: int) -> tuple[Allow, ...]:
        return Allow(Kind.PRIVATE_ROUND, step=rounds), Allow(Kind.TARGET_REQUEST, step=rounds)

    def check_round(self, epoch: int, rounds: int) -> None:
        """Its rounds are its own batches, in its own order: any number of them is a session's."""

    def check_epoch_end(self, epoch: int, rounds: int) -> None:     # never asked: it takes no EPOCH_END
        raise SplitlabError("the server ended an epoch; FSHA's victim keeps none; refused")

    def round_input(self, frame: Frame) -> torch.Tensor:
        return next(self.honest.batches)

    def query_input(self, frame: Frame) -> torch.Tensor:
        return self.honest.targets

    def accept_terms(self, terms: dict[str, Any], saved: list[int] | None) -> tuple[Limits, int, int]:
        """(limits, 0, rounds to expect) from the server's terms, once they agree with this victim's classes and
        batch size; it keeps no epochs."""
        limits = Limits.from_terms(terms.get("limits"))
        classes = datasets.dataset_spec(self.config.dataset).num_classes
        if (limits.classes, limits.batch_size) != (classes, self.config.batch_size):
            raise _refuse_terms(f"say {limits.classes} classes and batches of {limits.batch_size}; this victim has "
                                f"{classes} and {self.config.batch_size}")
        if _count(terms, "start_epoch", 0) or _count(terms, "epochs", 0):
            raise _refuse_terms("name epochs; FSHA's victim keeps none")
        return limits, 0, _count(terms, "rounds", MAX_ROUNDS)


def party_of(settings: ClientSettings, device: torch.device) -> SplitParty | FshaParty:
    """The client `settings.kind` names, built (its data loaded, its model initialised)."""
    return FshaParty(settings, device) if settings.kind == "fsha" else SplitParty(settings, device)

"""FSHA's victim side: the honest client under attack, its private data and its session with the server (the case's
training in the malicious role, `vfl.training.malicious_session`). Not the attack: nothing here imports its folder;
the size of the attacker's networks, which a width is checked against, is asked of the registered spec's attack."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from attacks.registry import spec as registered
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.fsha_victim import BatchStream, FshaClientConfig, honest_client
from vfl.models.fsha import build_client, feature_shape
from vfl.options import integer, option, text
from vfl.protocol import Client, ClientSession, Transcript
from vfl.training import malicious_session
from vfl.runtime import resolve_device
from vfl.validate import check_int, check_number

__all__ = ["FshaVictim", "VictimSide", "load_split", "victim_side", "MAX_PARAMETERS"]

MAX_PARAMETERS = 2**28
"""Parameters of client, pilot, decoder and critic together (1 GiB of float32, about 4 GiB with gradients and
Adam's moments): a width beyond it is refused before anything is allocated."""


@dataclass(frozen=True, kw_only=True)
class FshaVictim(FshaClientConfig):
    """The honest client under attack and its data (`vfl.fsha_victim.FshaClientConfig`, which a client process
    takes too), with what the evaluation scores; checked when built, before anything is written. Its seed
    initialises the client and orders its private batches (the attack has its own)."""
    dataset: str = option("mnist5k", "Dataset: private = its train split (the client's), public = its test split "
                          "(the server's); disjoint.", text())
    batch_size: int = 64
    """Private images per protocol round (the attack's batch size)."""
    width: float = 1.0
    """Multiplier on the client's channel counts and hidden widths (the attack's width)."""
    eval_images: int = option(1000, "Private images scored after training (client inference mode), and the "
                              "control on them.", integer(low=1, high=10_000_000))

    send_back: str = option("none", "none only: FSHA's server is the attacker and sends back the gradients it "
                            "chooses.", text())

    def check(self) -> None:
        if self.send_back.strip().lower() != "none":
            raise SplitlabError("FSHA's server is the attacker: it sends back the gradients it chooses, so no honest "
                                "label party is there to run --send-back "
                                f"{self.send_back}; give the client's defences with --defence")
        check_int("--batch-size", self.batch_size, low=1, high=1_000_000)
        check_number("--width", self.width, low=0, low_open=True, high=16)
        super().check()
        count = parameter_count(self.arch, self.level, self.width)
        if count > MAX_PARAMETERS:
            raise SplitlabError(f"--width {self.width:g} gives the {self.arch} client and the server's networks "
                                f"{count:,} parameters, more than the {MAX_PARAMETERS:,} this lab allocates; "
                                "lower --width")


def parameter_count(arch: str, level: int, width: float) -> int:
    """Parameters of the client and the attacker's three networks, counted on the meta device (nothing allocated)."""
    with torch.device("meta"):
        client = build_client(arch, level, width)
        nets = registered("fsha").attack.networks(arch, feature_shape(level, width), width)
    modules = (client, nets.pilot, nets.decoder, nets.discriminator)
    return sum(p.numel() for m in modules for p in m.parameters())


def load_split(victim: FshaVictim, public_batch: int | None = None) -> tuple[datasets.ImageData, datasets.ImageData]:
    """Private (train) and public (test) split of the victim's dataset, checked against the batch sizes."""
    private, public = datasets.private_public_split(victim.dataset, victim.data_root, victim.seed, victim.data_draw)
    for name, split, batch in (("private", private, victim.batch_size), ("public", public, public_batch)):
        if batch is not None and len(split) < batch:
            raise SplitlabError(f"the {name} split of {victim.dataset} has {len(split)} images, fewer than "
                                f"--batch-size {batch}; use a smaller batch")
    return private, public


@dataclass(eq=False)
class VictimSide:
    """The victim side of one FSHA run, built and seeded from the victim, and the attacker's session with it."""
    victim: FshaVictim
    device: torch.device
    private: datasets.ImageData
    public: datasets.ImageData
    client: Client
    batches: BatchStream
    """The client's private batches (its `last` is the batch of the latest round: ground truth)."""
    targets: torch.Tensor
    """The first private image of each class, [0,1], the dataset's shape: what the attack is scored on."""
    transcript: Transcript
    session: ClientSession


def victim_side(victim: FshaVictim, private: datasets.ImageData, public: datasets.ImageData,
                transcript: Transcript | None = None) -> VictimSide:
    """The honest client (`vfl.fsha_victim.honest_client`: initialised from `victim.seed`, Adam on f), its private
    batch stream (order from `victim.seed`) and its session with the malicious server, the case's training in the
    malicious role (`vfl.training.malicious_session`), holding the targets."""
    device = resolve_device(victim.device)
    honest = honest_client(victim, private, device)
    targets, _ = datasets.first_of_each_class(private)
    transcript = transcript if transcript is not None else Transcript()
    session = malicious_session(honest.client, honest.batches, honest.targets, transcript)
    return VictimSide(victim, device, private, public, honest.client, honest.batches, targets, transcript, session)

"""What `splitlab serve` and `splitlab client` run with, each option declared once on its field (the training
options they share with `splitlab train` are `TrainConfig`'s)."""
from __future__ import annotations

from dataclasses import dataclass, field

from vfl.defences import parse_spec
from vfl.errors import SplitlabError
from vfl.fsha_victim import FshaCase
from vfl.options import Validated, choice, integer, number, option, optional, text
from vfl.training import TrainConfig
from vfl.wire.handshake import parse_address
from vfl.wire.keys import read_secret
from vfl.wire.lifecycle import MAX_TIMEOUT
from vfl.wire.roles import ROLES, check_role
from vfl.wire.tls import TlsFiles, client_context, server_context
from vfl.validate import check_int

__all__ = ["Peer", "ServeSettings", "ClientSettings", "SERVER_TRAIN", "CLIENT_TRAIN", "CLIENT_KINDS", "FSHA_CLIENT",
           "FSHA_SHARED"]

SERVER_TRAIN = ("dataset", "task", "positive", "arch", "cut_layer", "epochs", "batch_size", "lr", "optimizer",
                "send_back", "parties", "partition", "aggregate")
"""The training options the server takes (the epochs and batch size are the server's to set for every party; its
send-back defences are its own)."""
CLIENT_TRAIN = ("dataset", "task", "positive", "arch", "cut_layer", "lr", "optimizer", "defence", "parties",
                "partition", "aggregate")
"""The training options a client takes (its defence is its own; the task tells it how many classes to expect)."""
CLIENT_KINDS = ("split", "fsha")
FSHA_CLIENT = ("batch_size", "width")
"""The options only FSHA's victim takes (`--kind fsha`): its own batch size and its model family's width. The
training options it shares with a split client (`FSHA_SHARED`) mean for it what `vfl.fsha_victim.FSHA_MEANING`
says, with FSHA's defaults (`vfl.fsha_victim.FSHA_DEFAULTS`)."""
FSHA_SHARED = ("dataset", "arch", "cut_layer", "lr", "optimizer", "defence")
"""The training options of a client that FSHA's victim takes too (the case's fields; its cut layer is its level)."""


@dataclass(frozen=True, kw_only=True)
class Peer(Validated):
    """What both programs take beside the training configuration."""
    train: TrainConfig = field(default_factory=TrainConfig)
    secret_file: str | None = option(None, "The server's: the shared secret (at least 32 bytes, e.g. `head -c 32 "
                                     "/dev/urandom | base64`, in a file only you can read). A client's: its party's "
                                     "key (`splitlab keys`) or the shared secret. A peer that cannot prove it is "
                                     "refused before any tensor is exchanged.", optional(text()))
    timeout: float = option(60.0, "Seconds to wait for the peer (to join, or to send its next message) before giving "
                            "up with an error.", number(low=0, low_open=True, high=MAX_TIMEOUT))
    resume: bool = option(False, "Continue the run in --out from its last finished epoch (model, optimiser, random "
                          "streams and data order): give it to both sides.")
    tls_cert: str | None = option(None, "TLS: this side's certificate (PEM); the server's turns TLS on, a client's is "
                                  "shown where the server asks for one.", optional(text()))
    tls_key: str | None = option(None, "TLS: the private key of --tls-cert (PEM, a file only you can read).",
                                 optional(text()))
    tls_ca: str | None = option(None, "TLS: the CA certificate (PEM) the peer's certificate must be signed by; a "
                                "client's turns TLS on (and checks the server's name), the server's asks every "
                                "client for a certificate.", optional(text()))

    @property
    def tls(self) -> TlsFiles:
        return TlsFiles(self.tls_cert, self.tls_key, self.tls_ca)


@dataclass(frozen=True, kw_only=True)
class ServeSettings(Peer):
    """`splitlab serve`: the training configuration (its `defence` is the clients' business, unused here), where
    to listen, the secret, the role and whether to resume."""
    listen: str = option("127.0.0.1:29500", "HOST:PORT to listen on. 127.0.0.1 (the default) admits clients of this "
                         "machine only; port 0 picks a free one.", text())
    role: str = option("honest", "honest (trains the task), curious (also keeps every activation it receives, "
                       "inference queries included, with tensors in transcript/) or malicious (returns the gradients "
                       "--choose-gradient picks).", choice(ROLES))
    choose_gradient: str | None = option(None, "MODULE:FUNCTION: called with the run's context, returns "
                                         "choose_gradient(H, step) -> G (--role malicious; e.g. "
                                         "vfl.wire.roles:shrink_activations).", optional(text()))

    def check(self) -> None:
        parse_address(self.listen, "--listen")
        check_role(self.role, self.choose_gradient)
        read_secret(self.secret_file).shared()
        server_context(self.tls)


@dataclass(frozen=True, kw_only=True)
class ClientSettings(Peer):
    """`splitlab client`: which kind of client (`vfl.wire.kinds`), its configuration (a feature party's training
    configuration, its epochs and batch size the server's to set; or FSHA's victim's, `fsha`), which party this
    is, where the server is, the secret and whether to resume."""
    connect: str = option("127.0.0.1:29500", "HOST:PORT of `splitlab serve`.", text())
    party: int = option(0, "Which feature party this is, 0 to --parties - 1 (its strip).", integer(low=0, high=63))
    kind: str = option("split", "split (a feature party of split learning, an architecture of `splitlab models`) or "
                       "fsha (FSHA's honest victim: --arch resnet or mlp, its own private batches; the options of "
                       "its panel).", choice(CLIENT_KINDS))
    fsha: FshaCase | None = None
    """FSHA's victim's configuration (`--kind fsha`)."""
    keep_received: bool = option(False, "Also write what this party received and knows of each round (the sample ids "
                                 "the server named, the cut gradient it returned) to received.pt: a curious feature "
                                 "party's record, which the label attacks read over TCP.")

    def check(self) -> None:
        check_int("--party", self.party, low=0, high=self.train.parties - 1)
        parse_address(self.connect, "--connect")
        if (self.kind == "fsha") != (self.fsha is not None):
            raise SplitlabError("--kind fsha takes FSHA's victim configuration, --kind split none")
        if self.kind == "fsha" and self.resume:
            raise SplitlabError("--resume is for --kind split: FSHA's victim keeps no checkpoints")
        if self.keep_received and (self.kind == "fsha" or self.resume):
            raise SplitlabError("--keep-received records one whole session of a feature party: not with --kind fsha "
                                "or --resume")
        if self.kind == "split":                    # over TCP the label party holds the labels: none are sent
            parse_spec(self.train.defence, labels_sent=False)
        read_secret(self.secret_file).for_party(self.party)
        client_context(self.tls)

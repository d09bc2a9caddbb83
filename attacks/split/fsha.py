"""FSHA, the Feature-Space Hijacking Attack (Pasquini et al., CCS'21), as the JAST paper runs it (section 4.2).

The adversary is a malicious server that owns public data X_pub from the client's domain and, as the
server, chooses the gradient it returns for the client's smashed data. It trains three networks: a
pilot encoder f~, a decoder f~^-1 and a critic D on the feature space. Every protocol round:

    client:  H = f(x_priv)                                    sent across the cut (vfl.protocol)
    server:  z_pub = f~(x_pub)
             L_ae = MSE(f~^-1(z_pub), x_pub)                  encoder-decoder (invertibility) loss, JAST Eq. 3
             WGAN:  L_f = mean D(H)                           the client's adversarial loss
                    L_D = mean D(z_pub) - mean D(H) + w * GP
             BCE:   L_f = BCE(1, D(H))                        (non-WGAN variant, logits)
                    L_D = (BCE(1, D(z_pub)) + BCE(0, D(H))) / 2 + w * GP
             GP = mean((||grad_z D(z)|| - 1)^2) at z = e*H + (1-e)*z_pub, e ~ U[0,1] per example
             send G = dL_f/dH instead of a task gradient; Adam steps on (f~, f~^-1) and on D
    client:  H.backward(G); Adam step on f                    (the same honest client as in training)

so f is pushed into the pilot's feature space, where the decoder inverts it: X~ = f~^-1(f(x_priv)).
The client only ever receives `CutGradient` messages shaped like its activations; this module never
hands the attacker the client's model or private images. The private images enter only the
evaluation (`_Evaluator`), which scores the attacker's reconstruction of each batch it received.

Numbers (FSHA code, unchanged by JAST): Adam 1e-5 for f, 1e-5 for pilot + decoder (one optimiser),
1e-4 for D, TF's Adam epsilon 1e-7; WGAN with gradient-penalty weight 500; batch 64 + 64; images
3x32x32 in [-1, 1]. All three networks step once per round from the same forward pass.

Deviations from the original, each a setting: the penalty's norm is over the whole feature
(`gp_norm="full"`, standard WGAN-GP) by default, the original's per-channel norm over H and W only as
`gp_norm="spatial"`; the penalty applies to the BCE variant too, as in the original code.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.nn import functional as F

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.models.fsha import DISCRIMINATOR_ENTRIES, INPUT_SHAPE, LEVELS, SETUPS, build_fsha
from vfl.progress import progress_bar
from vfl.protocol import Client, MaliciousServer, Transcript, exchange
from vfl.runs import Run, atomic_torch_save
from vfl.runtime import resolve_device

LOSSES = ("wgan", "bce")
GP_NORMS = ("full", "spatial")


# --- settings and presets ----------------------------------------------------------------------------

@dataclass(frozen=True)
class FshaSettings:
    """One FSHA run. Defaults are the paper's (see `paper`)."""
    dataset: str = "mnist5k"          # private = its train split, public = its test split
    arch: str = "resnet"              # client setup: resnet (FSHA's CNN) or mlp (JAST's dense client)
    level: int = 4                    # split level 1-4: how much of the network the client holds
    iterations: int = 3000            # protocol rounds; each uses one private and one public batch
    batch_size: int = 64              # private batch and public batch size
    lr_client: float = 1e-5           # client's Adam learning rate
    lr_pilot: float = 1e-5            # Adam learning rate of pilot encoder + decoder (one optimiser)
    lr_discriminator: float = 1e-4    # critic's Adam learning rate
    adam_eps: float = 1e-7            # Adam epsilon of all three optimisers (TF/Keras default; torch's is 1e-8)
    loss: str = "wgan"                # wgan (critic scores) or bce (non-WGAN, BCE with logits)
    gp_weight: float = 500.0          # gradient-penalty weight; 0 turns the penalty off
    gp_norm: str = "full"             # full: norm over the whole feature; spatial: original's per-channel H,W norm
    width: float = 1.0                # multiplier on every channel count and hidden width (1 = the paper's)
    discriminator_entry: str = "tf"   # tf: stride-1 entry at every level (what the TF code runs); strided: intended
    log_every: int = 100              # log interval; logged values are means over the interval
    eval_images: int = 1000           # private images scored after training (client inference mode)
    seed: int = 0                     # seeds initialisation, data order and interpolation draws
    device: str = "auto"              # auto (CUDA if present), cpu or cuda[:N]
    data_root: str | None = None      # torchvision data root (mnist5k needs none)
    preset: str = "paper"             # the preset these settings started from (recorded, not used)

    def validate(self) -> None:
        """Check every name and number before any data is loaded or a run directory exists."""
        datasets.dataset_spec(self.dataset)
        if self.arch not in SETUPS:
            raise SplitlabError(f"unknown FSHA client {self.arch!r}; use --arch resnet or mlp")
        if self.level not in LEVELS:
            raise SplitlabError(f"FSHA has no split level {self.level}; use --level 1, 2, 3 or 4")
        if self.loss not in LOSSES:
            raise SplitlabError(f"unknown FSHA loss {self.loss!r}; use --loss wgan or bce")
        if self.gp_norm not in GP_NORMS:
            raise SplitlabError(f"unknown gradient-penalty norm {self.gp_norm!r}; use --gp-norm full or spatial")
        if self.discriminator_entry not in DISCRIMINATOR_ENTRIES:
            raise SplitlabError(f"unknown discriminator entry {self.discriminator_entry!r}; use tf or strided")
        for name in ("iterations", "batch_size", "log_every", "eval_images"):
            if getattr(self, name) < 1:
                raise SplitlabError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("lr_client", "lr_pilot", "lr_discriminator", "adam_eps", "width"):
            if not getattr(self, name) > 0:
                raise SplitlabError(f"--{name.replace('_', '-')} must be positive")
        if self.gp_weight < 0:
            raise SplitlabError("--gp-weight must be at least 0")
        shape = datasets.dataset_spec(self.dataset).image_shape
        if shape[0] not in (1, INPUT_SHAPE[0]):
            raise SplitlabError(f"FSHA takes grey or RGB images; dataset {self.dataset} has {shape[0]} channels")
        resolve_device(self.device)


def paper() -> FshaSettings:
    """The JAST paper's FSHA runs on MNIST (Figures 3 and 5): 3000 iterations at level 4.

    Sources: iterations from Figure 5 (MNIST curves end near 3000); level 4 from the JAST FSHA
    notebook (`split_layer = 4`) and the FSHA notebooks (`id_setup = 4`); batch 64, Adam 1e-5 / 1e-5 /
    1e-4, WGAN, gradient penalty 500 from the FSHA code's hparams, which JAST keeps; log every 100
    from the JAST notebook (`log_frequency=100`). Dataset: the lab's embedded mnist5k (4,000 private /
    1,000 public images) in place of MNIST's 60,000 / 10,000; pass --dataset mnist for the paper's.
    """
    return FshaSettings(preset="paper")


def paper_fashion() -> FshaSettings:
    """The JAST paper's Fashion-MNIST runs (Figures 4 and 5; the JAST notebook's `fsha(5000, ...)`):
    5000 iterations, otherwise as `paper`. Needs torchvision's Fashion-MNIST in the data root."""
    return FshaSettings(dataset="fashion-mnist", iterations=5000, preset="paper-fashion")


def quick() -> FshaSettings:
    """A 2-core CPU preset that shows the paper's ordering (ResNet client leaks, MLP client does not).

    Changes from `paper`, each to fit minutes of CPU: 1000 iterations instead of 3000; batch 32
    instead of 64; every network at a quarter of the width (the level-4 feature is 64x4x4 instead of
    256x4x4; dense layers 768 and 1024 wide); all three learning rates ten times the paper's (1e-4
    client, 1e-4 pilot + decoder, 1e-3 critic, keeping the paper's critic/client ratio of 10), so the
    shorter run gets as far; log every 50. Loss, gradient penalty and level are the paper's.
    Tuning on mnist5k (ResNet client, reconstruction MSE on [-1, 1] at iteration 600): a critic rate
    of 2e-4 left the error oscillating between 0.16 and 0.38; 1e-3 brought it smoothly to 0.17-0.18.
    """
    return FshaSettings(iterations=1000, batch_size=32, width=0.25, lr_client=1e-4, lr_pilot=1e-4,
                        lr_discriminator=1e-3, log_every=50, preset="quick")


PRESETS: dict[str, Callable[[], FshaSettings]] = {"quick": quick, "paper": paper, "paper-fashion": paper_fashion}


def settings_from(preset: str = "paper", **overrides: Any) -> FshaSettings:
    """A preset with some fields replaced (`None` keeps the preset's value), validated."""
    try:
        base = PRESETS[preset]()
    except KeyError:
        raise SplitlabError(f"unknown FSHA preset {preset!r}; choose one of: {', '.join(PRESETS)}") from None
    settings = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    settings.validate()
    return settings


def load_split(settings: FshaSettings) -> tuple[datasets.ImageData, datasets.ImageData]:
    """Private (train) and public (test) split of the settings' dataset, checked against the batch size."""
    private, public = datasets.private_public_split(settings.dataset, settings.data_root)
    for name, split in (("private", private), ("public", public)):
        if len(split) < settings.batch_size:
            raise SplitlabError(f"the {name} split of {settings.dataset} has {len(split)} images, fewer than "
                                f"--batch-size {settings.batch_size}; use a smaller batch")
    return private, public


# --- data ----------------------------------------------------------------------------------------------

def to_fsha_images(x: torch.Tensor) -> torch.Tensor:
    """[0,1] images (N, 1 or 3, H, W) -> FSHA's inputs (N, 3, 32, 32) in [-1, 1].

    Grey images are resized bilinearly to 32x32 (half-pixel centres, as TF's `tf.image.resize`) and
    tiled to three channels; values are scaled by 2x - 1 and clipped to [-1, 1], as the FSHA data
    pipeline does with x / 127.5 - 1.
    """
    if tuple(x.shape[-2:]) != INPUT_SHAPE[1:]:
        x = F.interpolate(x, size=INPUT_SHAPE[1:], mode="bilinear", align_corners=False)
    if x.shape[1] == 1:
        x = x.expand(-1, INPUT_SHAPE[0], -1, -1)
    return (x * 2 - 1).clamp(-1, 1)


def from_fsha_images(x: torch.Tensor) -> torch.Tensor:
    """FSHA's [-1, 1] scale back to the lab's [0, 1] reporting scale."""
    return (x + 1) / 2


class BatchStream:
    """Endless batches of one split on the device: reshuffled every pass, the last partial batch
    dropped (the FSHA pipeline's `batch(drop_remainder=True).repeat()`), converted by `to_fsha_images`."""

    def __init__(self, images: torch.Tensor, batch_size: int, generator: torch.Generator, device: torch.device):
        if len(images) < batch_size:
            raise SplitlabError(f"a split has {len(images)} images, fewer than --batch-size {batch_size}")
        self.images = images.to(device)
        self.batch_size = batch_size
        self.generator = generator
        self._order = torch.empty(0, dtype=torch.long, device=device)
        self._position = 0

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        if self._position + self.batch_size > len(self._order):
            self._order = torch.randperm(len(self.images), generator=self.generator).to(self.images.device)
            self._position = 0
        index = self._order[self._position:self._position + self.batch_size]
        self._position += self.batch_size
        return to_fsha_images(self.images[index])


# --- the gradient penalty ------------------------------------------------------------------------------

def penalty_from_gradient(grad: torch.Tensor, norm: str = "full") -> torch.Tensor:
    """mean((||g|| - 1)^2) for critic gradients g (N, C, H, W).

    `full`: one norm per example over all of C, H, W (WGAN-GP). `spatial`: one norm per example and
    channel over H, W only, then the mean over examples and channels: the FSHA TF code's
    `reduce_sum(g**2, axis=[1, 2])` on NHWC tensors.
    """
    if norm == "full":
        norms = grad.flatten(1).norm(dim=1)
    elif norm == "spatial":
        norms = grad.flatten(2).norm(dim=2)
    else:
        raise SplitlabError(f"unknown gradient-penalty norm {norm!r}; use full or spatial")
    return ((norms - 1) ** 2).mean()


def gradient_penalty(critic: nn.Module, real: torch.Tensor, fake: torch.Tensor, norm: str = "full") -> torch.Tensor:
    """The penalty at random interpolates e*real + (1-e)*fake, e ~ U[0,1] per example; differentiable
    in the critic's parameters (double backpropagation)."""
    e = torch.rand((real.shape[0],) + (1,) * (real.dim() - 1), device=real.device, dtype=real.dtype)
    mixed = (e * real + (1 - e) * fake).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    return penalty_from_gradient(grad, norm)


# --- the malicious server --------------------------------------------------------------------------------

@dataclass(frozen=True)
class FshaObservation:
    """What FSHA's adversary owns besides the messages it receives: public images of the client's
    domain ([0,1], any grey or RGB size) and the shape of the smashed data it will be sent."""
    public_images: torch.Tensor
    feature_shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.public_images.dim() != 4 or len(self.public_images) == 0:
            raise SplitlabError("FSHA needs a non-empty batch of public images shaped (N, C, H, W)")


def _adam(params, lr: float, eps: float, device: torch.device) -> torch.optim.Adam:
    """Adam with TF's epsilon; the fused kernel on CUDA (one launch per step for all parameters)."""
    return torch.optim.Adam(list(params), lr=lr, eps=eps, fused=device.type == "cuda")


class FshaAttacker:
    """The malicious server's state: pilot, decoder, critic, their optimisers and its public data.

    `choose_gradient(H, step)` is the callback of `vfl.protocol.MaliciousServer`: it trains the
    three networks one step and returns the gradient of the client's adversarial loss w.r.t. H.
    After each round `reconstruction` holds the attack's output for the batch just received,
    f~^-1(H), and `losses` the round's (client loss, encoder-decoder MSE, critic loss), all on the
    device (read them at log points only).
    """

    def __init__(self, observation: FshaObservation, pilot: nn.Module, decoder: nn.Module,
                 discriminator: nn.Module, settings: FshaSettings, generator: torch.Generator,
                 device: torch.device):
        self.pilot, self.decoder, self.discriminator = pilot.to(device), decoder.to(device), discriminator.to(device)
        self.settings = settings
        self.public = BatchStream(observation.public_images, settings.batch_size, generator, device)
        self.autoencoder_optimizer = _adam([*self.pilot.parameters(), *self.decoder.parameters()],
                                           settings.lr_pilot, settings.adam_eps, device)
        self.discriminator_optimizer = _adam(self.discriminator.parameters(), settings.lr_discriminator,
                                             settings.adam_eps, device)
        self._trained = [*self.pilot.parameters(), *self.decoder.parameters(), *self.discriminator.parameters()]
        self.reconstruction: torch.Tensor | None = None
        self.losses: torch.Tensor | None = None

    def choose_gradient(self, smashed: torch.Tensor, step: int) -> torch.Tensor:
        s = self.settings
        h = smashed.detach().requires_grad_(True)
        x_pub = next(self.public)

        # The attack's output: decode the smashed data just received (before this round's updates).
        with torch.no_grad():
            self.reconstruction = self.decoder(h)

        # Pilot + decoder on public data: the encoder-decoder error (JAST Eq. 3).
        z_pub = self.pilot(x_pub)
        autoencoder_loss = F.mse_loss(self.decoder(z_pub), x_pub)

        # The critic scores the client's smashed data and the pilot's features in one batch.
        z_pub = z_pub.detach()
        d_priv, d_pub = self.discriminator(torch.cat([h, z_pub])).split(len(h))
        if s.loss == "wgan":
            client_loss = d_priv.mean()
            critic_loss = d_pub.mean() - d_priv.mean()
        else:
            client_loss = F.binary_cross_entropy_with_logits(d_priv, torch.ones_like(d_priv))
            critic_loss = (F.binary_cross_entropy_with_logits(d_pub, torch.ones_like(d_pub))
                           + F.binary_cross_entropy_with_logits(d_priv, torch.zeros_like(d_priv))) / 2
        if s.gp_weight > 0:
            critic_loss = critic_loss + s.gp_weight * gradient_penalty(self.discriminator, h.detach(), z_pub,
                                                                       s.gp_norm)

        # What the client receives instead of a task gradient.
        (gradient,) = torch.autograd.grad(client_loss, h, retain_graph=True)

        # The server's own updates (pilot + decoder, critic) from the same forward pass.
        self.autoencoder_optimizer.zero_grad(set_to_none=True)
        self.discriminator_optimizer.zero_grad(set_to_none=True)
        (autoencoder_loss + critic_loss).backward(inputs=self._trained)
        self.autoencoder_optimizer.step()
        self.discriminator_optimizer.step()

        self.losses = torch.stack([client_loss, autoencoder_loss, critic_loss]).detach()
        return gradient

    @torch.no_grad()
    def decode(self, smashed: torch.Tensor) -> torch.Tensor:
        """Reconstruct inputs (on [-1, 1]) from smashed data the attacker received (the decoder has
        no BatchNorm or dropout, so there is no separate inference mode)."""
        return self.decoder(smashed)

    @torch.no_grad()
    def control(self, images: torch.Tensor) -> torch.Tensor:
        """decoder(pilot(x)) for FSHA inputs x: how well the attacker's own autoencoder reconstructs."""
        return self.decode(self.pilot(images))


# --- evaluation (ground truth enters only here) -----------------------------------------------------------

LOG_FIELDS = ("client_loss", "encoder_decoder_mse", "discriminator_loss", "reconstruction_mse",
              "reconstruction_mse01")
"""Logged per interval (means over the interval). MSEs without suffix are on FSHA's [-1, 1] scale
(as the paper's Figure 5), `...01` on [0, 1] after converting back (a quarter of the former)."""


class _Evaluator:
    """Sums the round values on the device and reads them once per log interval."""

    def __init__(self, device: torch.device):
        self._sum = torch.zeros(len(LOG_FIELDS), device=device)
        self._count = 0
        self.rows: list[dict[str, float]] = []

    def add(self, attacker: FshaAttacker, x_private: torch.Tensor) -> None:
        rec = attacker.reconstruction
        errors = torch.stack([F.mse_loss(rec, x_private),
                              F.mse_loss(from_fsha_images(rec), from_fsha_images(x_private))])
        self._sum += torch.cat([attacker.losses, errors])
        self._count += 1

    @property
    def pending(self) -> bool:
        return self._count > 0

    def flush(self, iteration: int) -> dict[str, float]:
        values = (self._sum / self._count).tolist()
        row = {"iteration": iteration, **dict(zip(LOG_FIELDS, values))}
        self.rows.append(row)
        self._sum.zero_()
        self._count = 0
        return row


@dataclass(frozen=True)
class FshaResult:
    """What `run_fsha` returns; `metrics()` is what `metrics.json` holds.

    Reconstruction errors are MSE(f~^-1(H), x_priv) over the private batches the attacker received,
    averaged over each log interval (the paper's "reconstruction error"); `final` is the last
    interval, `best` the lowest. `eval` scores the trained client in inference mode on the first
    `eval_images` private images.
    """
    settings: FshaSettings
    device: str
    log: tuple[dict[str, float], ...]
    iterations_run: int
    diverged_at: int | None            # iteration of the first non-finite logged value, else None
    seconds: float                     # training loop wall time (data on device, networks built)
    evaluation: dict[str, float]
    originals: torch.Tensor            # first private image of each class, [0, 1], 3x32x32
    reconstructions: torch.Tensor      # the attack's reconstructions of them, [0, 1]
    controls: torch.Tensor             # decoder(pilot(x)) for them, [0, 1]
    transcript: Transcript = field(repr=False)
    interrupted: bool = False          # stopped by hand (Ctrl-C) before `settings.iterations`

    def _column(self, name: str) -> list[float]:
        return [row[name] for row in self.log]

    def _final(self, name: str) -> float | None:
        return None if self.diverged_at is not None or not self.log else self.log[-1][name]

    def _best(self, name: str) -> float | None:
        values = [v for v in self._column(name) if math.isfinite(v)]
        return min(values) if values else None

    @property
    def reconstruction_mse_final(self) -> float | None:
        return self._final("reconstruction_mse")

    @property
    def reconstruction_mse_best(self) -> float | None:
        return self._best("reconstruction_mse")

    @property
    def iterations_per_second(self) -> float:
        return self.iterations_run / self.seconds if self.seconds > 0 else float("nan")

    def metrics(self) -> dict[str, Any]:
        best_row = min((r for r in self.log if math.isfinite(r["reconstruction_mse"])),
                       key=lambda r: r["reconstruction_mse"], default=None)
        received = self.transcript.received_by_client()
        return {
            "arch": self.settings.arch,
            "level": self.settings.level,
            "dataset": self.settings.dataset,
            "iterations": self.iterations_run,
            "reconstruction_mse_final": self.reconstruction_mse_final,
            "reconstruction_mse_best": self.reconstruction_mse_best,
            "reconstruction_mse01_final": self._final("reconstruction_mse01"),
            "reconstruction_mse01_best": self._best("reconstruction_mse01"),
            "best_iteration": None if best_row is None else best_row["iteration"],
            "image_mse": self._final("reconstruction_mse01"),
            "encoder_decoder_mse_final": self._final("encoder_decoder_mse"),
            "discriminator_loss_final": self._final("discriminator_loss"),
            "client_loss_final": self._final("client_loss"),
            "eval": self.evaluation,
            "seconds": self.seconds,
            "iterations_per_second": self.iterations_per_second,
            "device": self.device,
            "diverged_at": self.diverged_at,
            "interrupted": self.interrupted,
            "scale": "reconstruction_mse*/encoder_decoder_mse on FSHA's [-1,1] scale; *_mse01 and image_mse on [0,1]",
            "transcript": {"sent_by_client": len(self.transcript.sent_by_client()),
                           "received_by_client": len(received),
                           "received_kinds": sorted({e.kind for e in received})},
            "log": list(self.log),
        }


def _is_finite(row: dict[str, float]) -> bool:
    return all(math.isfinite(v) for k, v in row.items() if k != "iteration")


@torch.no_grad()
def _evaluate(client: Client, attacker: FshaAttacker, private: datasets.ImageData, count: int,
              device: torch.device) -> dict[str, float]:
    """Score the trained client in inference mode on the first `count` private images, in chunks."""
    sums = torch.zeros(4, device=device)
    n = min(count, len(private))
    for start in range(0, n, 500):
        x = to_fsha_images(private.images[start:min(start + 500, n)].to(device))
        rec, ctl = attacker.decode(client.infer(x)), attacker.control(x)
        sums += torch.stack([((rec - x) ** 2).flatten(1).mean(1).sum(),
                             ((from_fsha_images(rec) - from_fsha_images(x)) ** 2).flatten(1).mean(1).sum(),
                             ((ctl - x) ** 2).flatten(1).mean(1).sum(),
                             ((from_fsha_images(ctl) - from_fsha_images(x)) ** 2).flatten(1).mean(1).sum()])
    values = (sums / n).tolist()
    return {"n_images": n, "reconstruction_mse": values[0], "reconstruction_mse01": values[1],
            "control_mse": values[2], "control_mse01": values[3]}


# --- the run ------------------------------------------------------------------------------------------------

@dataclass
class FshaParties:
    """Everything one run needs, built and seeded: the honest client, the malicious server and its
    state, and the private batch stream (the client's data)."""
    settings: FshaSettings
    device: torch.device
    client: Client
    attacker: FshaAttacker
    server: MaliciousServer
    private: datasets.ImageData
    public: datasets.ImageData
    private_batches: BatchStream

    def round(self, step: int, transcript: Transcript | None = None) -> torch.Tensor:
        """One protocol round; returns the private batch (for evaluation only)."""
        x_private = next(self.private_batches)
        exchange(self.client, self.server, x_private, None, step, transcript)
        return x_private


def build_parties(settings: FshaSettings) -> FshaParties:
    """Load the split, seed, and build the client (Adam on f) and the attacker (pilot, decoder, critic)."""
    settings.validate()
    device = resolve_device(settings.device)
    private, public = load_split(settings)
    torch.manual_seed(settings.seed)                 # (temporary: moves to the attack's own streams)
    generator = torch.Generator().manual_seed(settings.seed)
    nets = build_fsha(settings.arch, settings.level, settings.width, settings.discriminator_entry)
    client = Client(nets.client.to(device), _adam(nets.client.parameters(), settings.lr_client,
                                                  settings.adam_eps, device))
    attacker = FshaAttacker(FshaObservation(public.images, nets.feature_shape), nets.pilot, nets.decoder,
                            nets.discriminator, settings, generator, device)
    private_batches = BatchStream(private.images, settings.batch_size, generator, device)
    return FshaParties(settings, device, client, attacker, MaliciousServer(attacker.choose_gradient),
                       private, public, private_batches)


def run_fsha(settings: FshaSettings, run: Run | None = None, progress: bool = True,
             transcript: Transcript | None = None, interruptible: bool = False) -> FshaResult:
    """Train the honest client against the malicious server for `settings.iterations` rounds.

    Library entry point for `splitlab attack fsha` and `splitlab compare`: returns the log, final and
    best reconstruction errors and timing (`FshaResult.metrics()` has them as plain numbers). With a
    `run`, also writes `metrics.json`, `curves.png` (Figure 5), `reconstruction.png` (Figures 3-4:
    private images above their reconstructions) and `reconstruction.pt` (those images as tensors);
    the caller writes `config.json` (`Run.create`).

    `interruptible`: Ctrl-C ends the training loop early and the result (marked `interrupted`) is
    still evaluated and written, for a long run stopped by hand. Otherwise Ctrl-C propagates, so a
    caller running several jobs (`splitlab compare`) stops as a whole.
    """
    parties = build_parties(settings)
    client, attacker, device = parties.client, parties.attacker, parties.device
    transcript = transcript if transcript is not None else Transcript()
    evaluator = _Evaluator(device)
    log = run.log if run is not None else (lambda line: None)

    def log_row(row: dict[str, float]) -> None:
        log(" ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))

    log(f"fsha {settings.arch} level {settings.level} on {settings.dataset} ({parties.private.provenance}); "
        f"{len(parties.private)} private / {len(parties.public)} public images; device {device}")
    diverged_at, done, interrupted = None, 0, False
    start = time.perf_counter()

    with progress_bar(settings.iterations, f"fsha {settings.arch} L{settings.level}", enabled=progress) as bar:
        try:
            for step in range(settings.iterations):
                x_private = parties.round(step, transcript)
                evaluator.add(attacker, x_private)          # evaluation only: never fed back to the attacker
                done = step + 1
                bar.advance()
                if done % settings.log_every == 0 or done == settings.iterations:
                    row = evaluator.flush(done)
                    bar.describe(f"fsha {settings.arch} L{settings.level} rec {row['reconstruction_mse']:.4f}")
                    log_row(row)
                    if not _is_finite(row):
                        diverged_at = done
                        log(f"diverged (non-finite value) by iteration {done}; stopping")
                        break
        except KeyboardInterrupt:
            if not interruptible:
                raise
            interrupted = True
            if evaluator.pending:
                log_row(evaluator.flush(done))
            log(f"interrupted after {done} of {settings.iterations} iterations; writing what was reached")
    seconds = time.perf_counter() - start

    evaluation = _evaluate(client, attacker, parties.private, settings.eval_images, device)
    originals, _ = datasets.first_of_each_class(parties.private)
    x = to_fsha_images(originals.to(device))
    with torch.no_grad():
        grid = [from_fsha_images(t).cpu() for t in (x, attacker.decode(client.infer(x)), attacker.control(x))]
    result = FshaResult(settings, str(device), tuple(evaluator.rows), done, diverged_at, seconds, evaluation,
                        *grid, transcript=transcript, interrupted=interrupted)
    if run is not None:
        write_outputs(result, run)
    return result


# --- outputs -----------------------------------------------------------------------------------------------

def write_outputs(result: FshaResult, run: Run) -> None:
    """metrics.json, curves.png, reconstruction.png and reconstruction.pt in the run directory."""
    run.write_metrics(result.metrics())
    run.save_figure("curves.png", curves_figure([(result.settings.arch, result.log)]))
    run.save_figure("reconstruction.png", grid_figure(result.originals, [
        ("reconstruction", result.reconstructions), ("control f~^-1(f~(x))", result.controls)]))
    atomic_torch_save({"originals": result.originals, "reconstructions": result.reconstructions,
                       "controls": result.controls}, run.file("reconstruction.pt"))


def curves_figure(series: list[tuple[str, list[dict[str, float]] | tuple[dict[str, float], ...]]]):
    """Figure 5: encoder-decoder and reconstruction error (MSE on [-1,1]) per iteration; losses beside."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    errors, losses = fig.subplots(1, 2)
    for label, log in series:
        its = [r["iteration"] for r in log]
        line, = errors.plot(its, [r["reconstruction_mse"] for r in log], label=f"{label}: reconstruction error")
        errors.plot(its, [r["encoder_decoder_mse"] for r in log], "--", color=line.get_color(),
                    label=f"{label}: encoder-decoder error")
        line, = losses.plot(its, [r["discriminator_loss"] for r in log], label=f"{label}: discriminator loss")
        losses.plot(its, [r["client_loss"] for r in log], ":", color=line.get_color(), label=f"{label}: client loss")
    errors.set(xlabel="iteration", ylabel="MSE on [-1, 1]", yscale="log", title="FSHA errors")
    losses.set(xlabel="iteration", ylabel="loss", title="critic and client losses")
    for ax in (errors, losses):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def grid_figure(originals: torch.Tensor, rows: list[tuple[str, torch.Tensor]]):
    """Figures 3-4: private images (top) above each row of reconstructions, on [0, 1]."""
    from matplotlib.figure import Figure

    all_rows = [("private", originals), *rows]
    n = len(originals)
    fig = Figure(figsize=(1.1 * n, 1.2 * len(all_rows)))
    axes = fig.subplots(len(all_rows), n, squeeze=False)
    for r, (label, images) in enumerate(all_rows):
        for c in range(n):
            ax = axes[r][c]
            ax.imshow(images[c].detach().float().cpu().clamp(0, 1).permute(1, 2, 0).numpy())
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r][0].set_ylabel(label, fontsize=7)
    fig.tight_layout()
    return fig


def settings_record(settings: FshaSettings) -> dict[str, Any]:
    """The resolved settings as a plain dict (for config.json)."""
    return asdict(settings)

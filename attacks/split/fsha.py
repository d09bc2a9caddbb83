"""FSHA, the Feature-Space Hijacking Attack (Pasquini et al., CCS'21), as the JAST paper runs it (section 4.2).

The adversary is a malicious server that owns public data X_pub from the client's domain and, as the
server, chooses the gradient it returns for the client's smashed data. It trains three networks
(`attacks.split.fsha_networks`): a pilot encoder f~, a decoder f~^-1 and a critic D on the feature
space. Every protocol round:

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

Two halves, split by what each may see:

- The attack, `FSHA` (the malicious server itself): frozen `FshaSettings`, `__call__(observation, *,
  seed) -> attacks.result.Reconstruction`. Its `FshaObservation` holds the public images, the shape of
  the smashed data and a `vfl.protocol.ClientSession`, through which it can only run protocol rounds
  (receive H, return G) and, at the end, receive the smashed data of the evaluation targets. The
  reconstruction is f~^-1 of those, converted back to the dataset's [0,1] scale and shape. Its
  networks, public batch order and penalty draws come from streams of the attack seed only.
- The experiment, `run_fsha(victim, attack, run)`: builds the victim (`FshaVictim`: the honest client
  on the private train split; public = the test split, disjoint), runs the attack through the one
  driver (`attacks.driver`), scores it with `attacks.metrics.score`, and adds the ground-truth
  quantities the attack cannot compute: the per-round error of its reconstruction of each received
  batch (the paper's Figure 5, logged as interval means through `monitor`) and the error on
  `eval_images` private images, beside the control decoder(pilot(x)).

Numbers (FSHA code, unchanged by JAST): Adam 1e-5 for f, 1e-5 for pilot + decoder (one optimiser),
1e-4 for D, TF's Adam epsilon 1e-7; WGAN with gradient-penalty weight 500; batch 64 + 64; images
3x32x32 in [-1, 1]. All three networks step once per round from the same forward pass.

Deviations from the original, each a setting: the penalty's norm is over the whole feature
(`gp_norm="full"`, standard WGAN-GP) by default, the original's per-channel norm over H and W only as
`gp_norm="spatial"`; the penalty applies to the BCE variant too, as in the original code.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Protocol

import torch
from torch import nn
from torch.nn import functional as F

from attacks.driver import Outcome, attack_and_score, write_outputs
from attacks.figures import image_grid
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, image_mse
from attacks.result import Reconstruction
from attacks.split.fsha_networks import DISCRIMINATOR_ENTRIES, AttackerNetworks, build_attacker
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.models.fsha import INPUT_SHAPE, LEVELS, SETUPS, build_client, feature_shape
from vfl.progress import progress_bar
from vfl.protocol import Client, ClientSession, Transcript
from vfl.runs import Run, atomic_torch_save
from vfl.runtime import adam, generator, resolve_device, stream_seed, wait_for
from vfl.validate import check_choice, check_int, check_number

__all__ = ["FSHA", "FshaSettings", "FshaObservation", "TrainedServer", "FshaVictim", "victim_for", "load_split",
           "prepare", "FshaSetup", "run_fsha", "paper", "paper_fashion", "quick", "LOG_FIELDS", "HISTORY_FIELDS", "curves_figure",
           "settings_record"]

LOSSES = ("wgan", "bce")
GP_NORMS = ("full", "spatial")
MODES = ("own loop", "batched", "sequential")
"""FSHA has one loop of protocol rounds; the engine's mode names are accepted and mean that loop."""


# --- the attack's settings and presets -----------------------------------------------------------------

@dataclass(frozen=True)
class FshaSettings:
    """The malicious server's settings (the victim's are `FshaVictim`). Defaults are the paper's (`paper`)."""
    preset: str = "fsha.paper"
    """The dotted preset these settings started from (recorded, not used)."""
    iterations: int = 3000
    """Protocol rounds; each uses one private batch (the client's) and one public batch (the server's)."""
    batch_size: int = 64
    """Public images per round (the server's own batch, beside the client's private batch)."""
    lr_pilot: float = 1e-5
    """Adam learning rate of pilot encoder + decoder (one optimiser)."""
    lr_discriminator: float = 1e-4
    """The critic's Adam learning rate."""
    adam_eps: float = 1e-7
    """Adam epsilon of the server's optimisers (TF/Keras default; torch's is 1e-8)."""
    loss: str = "wgan"
    """wgan (critic scores) or bce (non-WGAN, BCE with logits)."""
    gp_weight: float = 500.0
    """Gradient-penalty weight; 0 turns the penalty off."""
    gp_norm: str = "full"
    """full: norm over the whole feature (WGAN-GP); spatial: the original's per-channel norm over H, W."""
    width: float = 1.0
    """Multiplier on every channel count and hidden width of pilot, decoder and critic (1 = the paper's)."""
    discriminator_entry: str = "tf"
    """tf: stride-1 critic entry at every level (what the TF code runs); strided: the intended entries."""
    log_every: int = 100
    """Interval (rounds) at which the server checks its losses for divergence and logged values are means."""

    def __post_init__(self) -> None:
        check_int("--iterations", self.iterations, low=1, high=10_000_000)
        check_int("--batch-size", self.batch_size, low=1, high=1_000_000)
        check_number("--lr-pilot", self.lr_pilot, low=0, low_open=True, high=10)
        check_number("--lr-discriminator", self.lr_discriminator, low=0, low_open=True, high=10)
        check_number("adam_eps", self.adam_eps, low=0, low_open=True, high=1)
        check_choice("--loss", self.loss, LOSSES)
        check_number("--gp-weight", self.gp_weight, low=0, high=1e9)
        check_choice("--gp-norm", self.gp_norm, GP_NORMS)
        check_number("--width", self.width, low=0, low_open=True, high=16)
        check_choice("--discriminator-entry", self.discriminator_entry, DISCRIMINATOR_ENTRIES)
        check_int("--log-every", self.log_every, low=1, high=10_000_000)


def paper() -> FshaSettings:
    """The JAST paper's FSHA runs on MNIST (Figures 3 and 5): 3000 iterations at level 4.

    Sources: iterations from Figure 5 (MNIST curves end near 3000); level 4 from the JAST FSHA
    notebook (`split_layer = 4`) and the FSHA notebooks (`id_setup = 4`); batch 64, Adam 1e-5 / 1e-5 /
    1e-4, WGAN, gradient penalty 500 from the FSHA code's hparams, which JAST keeps; log every 100
    from the JAST notebook (`log_frequency=100`). Dataset: the lab's embedded mnist5k (4,000 private /
    1,000 public images) in place of MNIST's 60,000 / 10,000; pass --dataset mnist for the paper's.
    The victim side of this preset (level 4, client Adam 1e-5) is `victim_for("fsha.paper")`.
    """
    return FshaSettings(preset="fsha.paper")


def paper_fashion() -> FshaSettings:
    """The JAST paper's Fashion-MNIST runs (Figures 4 and 5; the JAST notebook's `fsha(5000, ...)`):
    5000 iterations, otherwise as `paper`; its victim holds Fashion-MNIST (needs torchvision's copy)."""
    return FshaSettings(preset="fsha.paper-fashion", iterations=5000)


def quick() -> FshaSettings:
    """A 2-core CPU preset that shows the paper's ordering (ResNet client leaks, MLP client does not).

    Changes from `paper`, each to fit minutes of CPU: 1000 iterations instead of 3000; batch 32
    instead of 64; every network at a quarter of the width (the level-4 feature is 64x4x4 instead of
    256x4x4; dense layers 768 and 1024 wide); all three learning rates ten times the paper's (1e-4
    client, 1e-4 pilot + decoder, 1e-3 critic, keeping the paper's critic/client ratio of 10), so the
    shorter run gets as far; log every 50. Loss, gradient penalty and level are the paper's. The
    client's batch, width and rate are the victim side (`victim_for("fsha.quick")`).
    Tuning on mnist5k (ResNet client, reconstruction MSE on [-1, 1] at iteration 600): a critic rate
    of 2e-4 left the error oscillating between 0.16 and 0.38; 1e-3 brought it smoothly to 0.17-0.18.
    """
    return FshaSettings(preset="fsha.quick", iterations=1000, batch_size=32, width=0.25, lr_pilot=1e-4,
                        lr_discriminator=1e-3, log_every=50)


# --- images -----------------------------------------------------------------------------------------------

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
    """FSHA's [-1, 1] scale back to the lab's [0, 1] reporting scale (still 3x32x32)."""
    return (x + 1) / 2


def to_dataset_images(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """FSHA images (N, 3, 32, 32) on [-1, 1] -> the dataset's own scale and shape: [0, 1], the channel
    mean when the dataset is grey, bilinearly resized to its (H, W). Undoes `to_fsha_images` up to the
    resampling; not clamped (scoring clamps)."""
    channels, height, width = shape
    x = from_fsha_images(x)
    if channels == 1:
        x = x.mean(dim=1, keepdim=True)
    if tuple(x.shape[-2:]) != (height, width):
        x = F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False)
    return x


class BatchStream:
    """Endless batches of one split on the device: reshuffled every pass, the last partial batch
    dropped (the FSHA pipeline's `batch(drop_remainder=True).repeat()`), converted by `to_fsha_images`.
    `last` is the batch handed out most recently."""

    def __init__(self, images: torch.Tensor, batch_size: int, order: torch.Generator, device: torch.device):
        if len(images) < batch_size:
            raise SplitlabError(f"a split has {len(images)} images, fewer than --batch-size {batch_size}")
        self.images = images.to(device)
        self.batch_size = batch_size
        self.order = order
        self._order = torch.empty(0, dtype=torch.long, device=device)
        self._position = 0
        self.last: torch.Tensor | None = None

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        if self._position + self.batch_size > len(self._order):
            self._order = torch.randperm(len(self.images), generator=self.order).to(self.images.device)
            self._position = 0
        index = self._order[self._position:self._position + self.batch_size]
        self._position += self.batch_size
        self.last = to_fsha_images(self.images[index])
        return self.last


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


def gradient_penalty(critic: nn.Module, real: torch.Tensor, fake: torch.Tensor, *, draws: torch.Generator,
                     norm: str = "full") -> torch.Tensor:
    """The penalty at random interpolates e*real + (1-e)*fake, e ~ U[0,1] per example drawn from the
    CPU generator `draws` (the same numbers on every device); differentiable in the critic's
    parameters (double backpropagation)."""
    e = torch.rand((real.shape[0],) + (1,) * (real.dim() - 1), generator=draws, dtype=real.dtype)
    e = e.to(real.device, non_blocking=True)
    mixed = (e * real + (1 - e) * fake).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    return penalty_from_gradient(grad, norm)


# --- the observation ----------------------------------------------------------------------------------------

class Session(Protocol):
    """What FSHA's server can do with the client (`vfl.protocol.ClientSession` is the real one)."""

    def round(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor]) -> int: ...
    def target_activations(self) -> torch.Tensor: ...


@dataclass(frozen=True)
class FshaObservation:
    """Everything FSHA's adversary has: public images of the client's domain ([0,1], the dataset's
    own shape; disjoint from the private ones), the shape of the smashed data it is sent, the client
    family it faces (`resnet` or `mlp`; it picks the matching pilot and critic, JAST section 4.2),
    and the session with the client (protocol rounds and the targets' smashed data only)."""
    public_images: torch.Tensor
    feature_shape: tuple[int, int, int]
    session: Session
    client_arch: str = "resnet"

    def __post_init__(self) -> None:
        if self.public_images.dim() != 4 or len(self.public_images) == 0:
            raise SplitlabError("FSHA needs a non-empty batch of public images shaped (N, C, H, W)")
        if self.public_images.shape[1] not in (1, INPUT_SHAPE[0]):
            raise SplitlabError(f"FSHA takes grey or RGB images, got {self.public_images.shape[1]} channels")
        if len(self.feature_shape) != 3:
            raise SplitlabError(f"FSHA's smashed data is shaped (C, H, W), got {tuple(self.feature_shape)}")
        check_choice("client architecture", self.client_arch, SETUPS)


# --- the attack: the malicious server ---------------------------------------------------------------------

HISTORY_FIELDS = ("client_loss", "encoder_decoder_mse", "discriminator_loss")
"""The server's per-round losses (`Reconstruction.history`); the MSE is on FSHA's [-1, 1] scale."""

class _Server:
    """The malicious server's state during one attack: networks, optimisers, public stream, draws.

    `choose_gradient(H, step)` is the `MaliciousServer` callback: it trains the three networks one
    step and returns the gradient of the client's adversarial loss w.r.t. H. After each round,
    `reconstruction` holds f~^-1(H) for the batch just received (before the round's updates) and
    `losses` the round's (client loss, encoder-decoder MSE, critic loss), on the device.
    """

    def __init__(self, settings: FshaSettings, nets: AttackerNetworks, public_images: torch.Tensor, seed: int,
                 device: torch.device):
        s = self.settings = settings
        self.pilot, self.decoder = nets.pilot.to(device), nets.decoder.to(device)
        self.discriminator = nets.discriminator.to(device)
        self.public = BatchStream(public_images, s.batch_size, generator(stream_seed(seed, "public order")), device)
        self.draws = generator(stream_seed(seed, "penalty"))
        fused = device.type == "cuda"          # one kernel per step on CUDA, torch's loop on the CPU (as before)
        self.autoencoder_optimizer = adam([*self.pilot.parameters(), *self.decoder.parameters()], s.lr_pilot,
                                          eps=s.adam_eps, fused=fused)
        self.discriminator_optimizer = adam(self.discriminator.parameters(), s.lr_discriminator, eps=s.adam_eps,
                                            fused=fused)
        self._trained = [*self.pilot.parameters(), *self.decoder.parameters(), *self.discriminator.parameters()]
        self.reconstruction: torch.Tensor | None = None
        self.losses: torch.Tensor | None = None

    def client_loss(self, critic_scores: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        """L_f on critic scores of smashed data: the mean score (WGAN) or BCE(1, D) (logits)."""
        if self.settings.loss == "wgan":
            return critic_scores.mean() if reduction == "mean" else critic_scores.flatten()
        values = F.binary_cross_entropy_with_logits(critic_scores, torch.ones_like(critic_scores), reduction="none")
        return values.mean() if reduction == "mean" else values.flatten()

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
        client_loss = self.client_loss(d_priv)
        if s.loss == "wgan":
            critic_loss = d_pub.mean() - d_priv.mean()
        else:
            critic_loss = (F.binary_cross_entropy_with_logits(d_pub, torch.ones_like(d_pub))
                           + F.binary_cross_entropy_with_logits(d_priv, torch.zeros_like(d_priv))) / 2
        if s.gp_weight > 0:
            critic_loss = critic_loss + s.gp_weight * gradient_penalty(self.discriminator, h.detach(), z_pub,
                                                                       draws=self.draws, norm=s.gp_norm)

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


@dataclass(frozen=True, eq=False)
class TrainedServer:
    """The malicious server after its rounds: the Reconstruction it returns, and its networks (for the
    experiment's ground-truth evaluation: decoding more smashed data, the control decoder(pilot(x)))."""
    reconstruction: Reconstruction
    pilot: nn.Module
    decoder: nn.Module
    discriminator: nn.Module

    @torch.no_grad()
    def decode(self, smashed: torch.Tensor) -> torch.Tensor:
        """f~^-1(H) on FSHA's [-1, 1] 3x32x32 scale (the decoder has no BatchNorm or dropout)."""
        return self.decoder(smashed)

    @torch.no_grad()
    def control(self, images: torch.Tensor) -> torch.Tensor:
        """decoder(pilot(x)) for FSHA inputs x: how well the server's own autoencoder reconstructs."""
        return self.decoder(self.pilot(images))


Monitor = Callable[[int, torch.Tensor, torch.Tensor], Any]
"""`monitor(step, reconstruction, losses)` after every round: `step` rounds done (1-based), the server's
f~^-1(H) of the batch it just received ([-1, 1], 3x32x32) and its (client, encoder-decoder, critic)
losses on the device. A true return value stops the attack as diverged (the experiment's check)."""


@dataclass(frozen=True)
class FSHA:
    """The malicious server of the Feature-Space Hijacking Attack, as one attack object.

    Its Reconstruction is per target (trial t is target t): `trials` = f~^-1 of the targets' smashed
    data after the rounds, converted to the dataset's [0,1] scale and shape (`to_dataset_images`);
    `initial` = the same through the decoder as it was before the first round (the attack's initial
    guess); `loss` = each target's client loss under the trained critic; `history` = the server's
    losses per round (`HISTORY_FIELDS`, each (rounds, 1), on the device); `extras` = the server's own
    quantities (rounds, interrupted, diverged_at, iterations_per_second, last-interval loss means).
    """
    settings: FshaSettings = field(default_factory=quick)
    name = "fsha"
    observes = "public same-domain images, the smashed-data shape and a live session with the client"

    def __call__(self, observation: FshaObservation, *, seed: int = 0, mode: str = "own loop", progress: bool = False,
                 monitor: Monitor | None = None, interruptible: bool = False) -> Reconstruction:
        """Hijack the client for `settings.iterations` rounds, then decode the targets' smashed data.

        `interruptible`: Ctrl-C ends the rounds early and the reconstruction (extras `interrupted`)
        is still made; otherwise Ctrl-C propagates. Ground truth never enters here."""
        return self.train(observation, seed=seed, mode=mode, progress=progress, monitor=monitor,
                          interruptible=interruptible).reconstruction

    def train(self, observation: FshaObservation, *, seed: int = 0, mode: str = "own loop", progress: bool = False,
              monitor: Monitor | None = None, interruptible: bool = False) -> TrainedServer:
        """`__call__`, also returning the trained networks (`TrainedServer`)."""
        s = self.settings
        check_int("attack seed", seed, low=0, high=2**63 - 1)
        check_choice("FSHA mode", mode, MODES)
        device = observation.public_images.device
        if len(observation.public_images) < s.batch_size:
            raise SplitlabError(f"the public split has {len(observation.public_images)} images, fewer than "
                                f"--batch-size {s.batch_size}; use a smaller batch")
        nets = build_attacker(observation.client_arch, observation.feature_shape, s.width, s.discriminator_entry,
                              seed=stream_seed(seed, "networks"))
        server = _Server(s, nets, observation.public_images, seed, device)
        initial_decoder = copy.deepcopy(server.decoder)      # the attack's initial guess decodes with this
        history = torch.full((s.iterations, len(HISTORY_FIELDS)), float("nan"), device=device)
        done, diverged_at, interrupted = 0, None, False
        wait_for(device)
        start = time.perf_counter()
        with progress_bar(s.iterations, f"fsha {observation.client_arch}", enabled=progress) as bar:
            try:
                for step in range(s.iterations):
                    observation.session.round(server.choose_gradient)
                    history[step] = server.losses
                    done = step + 1
                    bar.advance()
                    if monitor is not None and monitor(done, server.reconstruction, server.losses):
                        diverged_at = done
                        break
                    if done % s.log_every == 0 or done == s.iterations:
                        means = _interval_means(history, done, s.log_every)
                        if not all(math.isfinite(v) for v in means):
                            diverged_at = done
                            break
                        bar.describe(f"fsha {observation.client_arch} encoder-decoder {means[1]:.4f}")
            except KeyboardInterrupt:
                if not interruptible:
                    raise
                interrupted = True
        wait_for(device)
        seconds = time.perf_counter() - start

        smashed = observation.session.target_activations()
        with torch.no_grad():
            decoded, initial = server.decoder(smashed), initial_decoder(smashed)
            target_loss = server.client_loss(server.discriminator(smashed), reduction="none")
        shape = tuple(observation.public_images.shape[1:])
        trials = to_dataset_images(decoded, shape).unsqueeze(1)
        diverged = ~torch.isfinite(target_loss) | ~torch.isfinite(trials.flatten(1)).all(1)
        if diverged_at is not None:
            diverged = torch.ones_like(diverged)
        finals = (dict(zip(HISTORY_FIELDS, _interval_means(history, done, s.log_every)))
                  if done and diverged_at is None else dict.fromkeys(HISTORY_FIELDS))
        reconstruction = Reconstruction(
            attack=self.name, preset=s.preset, trials=trials, loss=target_loss, per_target=True,
            history={name: history[:done, i:i + 1] for i, name in enumerate(HISTORY_FIELDS)},
            diverged=diverged, seconds=seconds, steps=done, initial=to_dataset_images(initial, shape).unsqueeze(1),
            mode="own loop",
            extras={"rounds": done, "iterations_asked": s.iterations, "interrupted": interrupted,
                    "diverged_at": diverged_at,
                    "iterations_per_second": done / seconds if seconds > 0 else None,
                    "encoder_decoder_mse_pm1_final": finals["encoder_decoder_mse"],
                    "client_loss_final": finals["client_loss"],
                    "discriminator_loss_final": finals["discriminator_loss"],
                    "target_loss": f"per-target {s.loss} client loss of the critic on the target's smashed data",
                    "client_arch": observation.client_arch, "feature_shape": list(observation.feature_shape),
                    "device": str(device)})
        return TrainedServer(reconstruction, server.pilot, server.decoder, server.discriminator)


def settings_record(settings: FshaSettings | FshaVictim) -> dict[str, Any]:
    """Attack or victim settings as a plain dict (for config.json)."""
    return asdict(settings)


def _interval_means(history: torch.Tensor, done: int, every: int) -> list[float]:
    """Means of the history rows of the log interval that ends at round `done` (one host read)."""
    start = ((done - 1) // every) * every
    return history[start:done].mean(0).tolist()


# --- the victim ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FshaVictim:
    """The honest client under attack and its data; checked when built, before anything is written."""
    dataset: str = "mnist5k"
    """Private = its train split (the client's), public = its test split (the server's); disjoint."""
    arch: str = "resnet"
    """Client setup: resnet (FSHA's CNN) or mlp (JAST's dense client)."""
    level: int = 4
    """Split level 1-4: how much of the network the client holds."""
    lr_client: float = 1e-5
    """The client's Adam learning rate."""
    batch_size: int = 64
    """Private images per protocol round."""
    width: float = 1.0
    """Multiplier on the client's channel counts and hidden widths (1 = the paper's)."""
    adam_eps: float = 1e-7
    """The client's Adam epsilon (TF/Keras default, as in the FSHA code)."""
    eval_images: int = 1000
    """Private images scored after training (client inference mode), and the control on them."""
    seed: int = 0
    """Seeds the client's initialisation and the private batch order (the attack has its own seed)."""
    device: str = "auto"
    """auto (CUDA if present), cpu or cuda[:N]."""
    data_root: str | None = None
    """torchvision data root (mnist5k needs none)."""

    def __post_init__(self) -> None:
        spec = datasets.dataset_spec(self.dataset)
        if spec.image_shape[0] not in (1, INPUT_SHAPE[0]):
            raise SplitlabError(f"FSHA takes grey or RGB images; dataset {self.dataset} has "
                                f"{spec.image_shape[0]} channels")
        check_choice("--arch", self.arch, SETUPS)
        check_int("--level", self.level, low=min(LEVELS), high=max(LEVELS))
        check_number("--lr-client", self.lr_client, low=0, low_open=True, high=10)
        check_int("--batch-size", self.batch_size, low=1, high=1_000_000)
        check_number("--width", self.width, low=0, low_open=True, high=16)
        check_number("client adam_eps", self.adam_eps, low=0, low_open=True, high=1)
        check_int("--eval-images", self.eval_images, low=1, high=10_000_000)
        check_int("--seed", self.seed, low=0, high=2**63 - 1)
        resolve_device(self.device)

    @property
    def feature_shape(self) -> tuple[int, int, int]:
        return feature_shape(self.level, self.width)


VICTIMS: dict[str, dict[str, Any]] = {
    "fsha.paper": {},
    "fsha.paper-fashion": {"dataset": "fashion-mnist"},
    "fsha.quick": {"batch_size": 32, "width": 0.25, "lr_client": 1e-4},
}
"""The victim side of each FSHA preset (see the preset factories for the sources)."""


def victim_for(preset: str, **overrides: Any) -> FshaVictim:
    """The victim an FSHA preset was written against, with fields replaced where an override is not
    None (a preset of another name starts from `FshaVictim()`); validated."""
    base = VICTIMS.get(preset, {})
    return FshaVictim(**{**base, **{k: v for k, v in overrides.items() if v is not None}})


def load_split(victim: FshaVictim, public_batch: int | None = None) -> tuple[datasets.ImageData, datasets.ImageData]:
    """Private (train) and public (test) split of the victim's dataset, checked against the batch sizes."""
    private, public = datasets.private_public_split(victim.dataset, victim.data_root)
    for name, split, batch in (("private", private, victim.batch_size), ("public", public, public_batch)):
        if batch is not None and len(split) < batch:
            raise SplitlabError(f"the {name} split of {victim.dataset} has {len(split)} images, fewer than "
                                f"--batch-size {batch}; use a smaller batch")
    return private, public


# --- the experiment: observe -> attack -> score -> write --------------------------------------------------

LOG_FIELDS = ("client_loss", "encoder_decoder_mse", "discriminator_loss", "reconstruction_mse",
              "reconstruction_mse01")
"""Logged per interval (means over the interval). MSEs without suffix are on FSHA's [-1, 1] scale
(as the paper's Figure 5), `...01` on [0, 1] after converting back (a quarter of the former). The
reconstruction errors compare the server's f~^-1(H) with the private batch H came from (ground truth,
computed on the victim side)."""


class _RoundLog:
    """The experiment's monitor: the error of the server's reconstruction of each received batch
    against that batch, summed on the device with the server's losses and read once per interval."""

    def __init__(self, batches: BatchStream, every: int, total: int, device: torch.device,
                 log: Callable[[str], None], label: str):
        self.batches, self.every, self.total, self.log, self.label = batches, every, total, log, label
        self._sum = torch.zeros(len(LOG_FIELDS), device=device)
        self._count = 0
        self.rows: list[dict[str, float]] = []

    def __call__(self, step: int, reconstruction: torch.Tensor, losses: torch.Tensor) -> bool:
        x = self.batches.last                                   # the private batch of this round
        errors = torch.stack([image_mse(reconstruction, x).mean(),
                              image_mse(from_fsha_images(reconstruction), from_fsha_images(x)).mean()])
        self._sum += torch.cat([losses, errors])
        self._count += 1
        if step % self.every == 0 or step == self.total:
            return not _is_finite(self.flush(step))
        return False

    @property
    def pending(self) -> bool:
        return self._count > 0

    def flush(self, iteration: int) -> dict[str, float]:
        values = (self._sum / self._count).tolist()
        row = {"iteration": iteration, **dict(zip(LOG_FIELDS, values))}
        self.rows.append(row)
        self._sum.zero_()
        self._count = 0
        self.log(" ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        if not _is_finite(row):
            self.log(f"diverged (non-finite value) by iteration {iteration}; stopping")
        return row


def _is_finite(row: dict[str, float]) -> bool:
    return all(math.isfinite(v) for k, v in row.items() if k != "iteration")


@torch.no_grad()
def evaluate_private(client: Client, server: TrainedServer, private: datasets.ImageData, count: int,
                     device: torch.device) -> dict[str, float]:
    """Ground truth: the server's reconstruction f~^-1(f(x)) of the first `count` private images (client
    inference mode) and the control decoder(pilot(x)), as per-image MSE means on [-1, 1] (`_pm1`), on
    [0, 1] at 3x32x32 (`01`), and `image_mse` as `attacks.metrics.score` means it (the dataset's scale and
    shape, clamped)."""
    n = min(count, len(private))
    sums = torch.zeros(5, device=device)
    shape = tuple(private.images.shape[1:])
    for start in range(0, n, 500):
        original = private.images[start:min(start + 500, n)].to(device)
        x = to_fsha_images(original)
        rec, ctl = server.decode(client.infer(x)), server.control(x)
        sums += torch.stack([image_mse(rec, x).sum(), image_mse(from_fsha_images(rec), from_fsha_images(x)).sum(),
                             image_mse(ctl, x).sum(), image_mse(from_fsha_images(ctl), from_fsha_images(x)).sum(),
                             image_mse(to_dataset_images(rec, shape).clamp(0, 1), original).sum()])
    values = (sums / n).tolist()
    return {"n_images": n, "reconstruction_mse_pm1": values[0], "reconstruction_mse01": values[1],
            "control_mse_pm1": values[2], "control_mse01": values[3], "image_mse": values[4]}


def _interval_summary(rows: list[dict[str, float]], diverged: bool) -> dict[str, Any]:
    """Final (last interval; None after divergence) and best (lowest finite) training-interval errors."""
    def final(name: str) -> float | None:
        return None if diverged or not rows else rows[-1][name]

    def best(name: str) -> float | None:
        values = [r[name] for r in rows if math.isfinite(r[name])]
        return min(values) if values else None

    best_row = min((r for r in rows if math.isfinite(r["reconstruction_mse"])), key=lambda r: r["reconstruction_mse"],
                   default=None)
    return {"training_interval_mse_pm1_final": final("reconstruction_mse"),
            "training_interval_mse_pm1_best": best("reconstruction_mse"),
            "training_interval_mse01_final": final("reconstruction_mse01"),
            "training_interval_mse01_best": best("reconstruction_mse01"),
            "best_iteration": None if best_row is None else best_row["iteration"]}


@dataclass(eq=False)
class FshaSetup:
    """The victim side of one FSHA run, built and seeded from the victim, and the attacker's view of it."""
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
    observation: FshaObservation


def prepare(victim: FshaVictim, attack: FSHA, transcript: Transcript | None = None) -> FshaSetup:
    """Load the split, build the honest client (initialised from `victim.seed`, Adam on f) and its private
    batch stream (order from `victim.seed`), and the attacker's observation: the public split, the
    feature shape, the client family and a `ClientSession` holding the targets."""
    private, public = load_split(victim, attack.settings.batch_size)
    device = resolve_device(victim.device)
    model = build_client(victim.arch, victim.level, victim.width, seed=victim.seed).to(device)
    client = Client(model, adam(model.parameters(), victim.lr_client, eps=victim.adam_eps,
                                fused=device.type == "cuda"))
    batches = BatchStream(private.images, victim.batch_size, generator(victim.seed), device)
    targets, _ = datasets.first_of_each_class(private)
    transcript = transcript if transcript is not None else Transcript()
    session = ClientSession(client, batches, to_fsha_images(targets.to(device)), transcript)
    observation = FshaObservation(public.images.to(device), victim.feature_shape, session, victim.arch)
    return FshaSetup(victim, device, private, public, client, batches, targets, transcript, observation)


def run_fsha(victim: FshaVictim, attack: FSHA, run: Run | None = None, *, seed: int = 0,
             lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
             progress: bool = True, interruptible: bool = False, transcript: Transcript | None = None) -> Outcome:
    """FSHA against an honest client: observe -> attack -> score (the one driver) -> write.

    The victim (client initialisation and private batch order from `victim.seed`) trains with the
    malicious server `attack` (its networks, public batch order and penalty draws from `seed`). The
    targets are the first private image of each class. Metrics are `attacks.metrics.score`'s on [0,1]
    against them (`image_mse` etc.), plus `arch`, `level`, `dataset` and, under `extras`, the
    attack's own quantities and the ground-truth ones: `log` (interval means of `LOG_FIELDS`), the
    training-interval reconstruction errors (`training_interval_mse_pm1_final`/`_best`, `..._mse01_...`),
    `best_iteration`, `eval` (private images incl. the control) and the `transcript` summary.

    With a `run`, writes metrics.json, reconstruction.png and loss_curve.png (the driver), curves.png
    (Figure 5), reconstruction_control.png (Figures 3-4: targets, reconstructions, control) and
    reconstruction.pt; the caller writes config.json (`Run.create`). `interruptible`: Ctrl-C ends the
    rounds early and what was reached is scored and written (`extras.interrupted`); otherwise Ctrl-C
    propagates, so a caller running several jobs (`splitlab compare`) stops as a whole.
    """
    side = prepare(victim, attack, transcript)
    private, public, device, client = side.private, side.public, side.device, side.client
    log = run.log if run is not None else (lambda line: None)
    s = attack.settings
    targets, observation, transcript = side.targets, side.observation, side.transcript

    label = f"fsha {victim.arch} L{victim.level}"
    rounds = _RoundLog(side.batches, s.log_every, s.iterations, device, log, label)
    trained: list[TrainedServer] = []

    def hijack(obs: FshaObservation, *, seed: int, mode: str, progress: bool) -> Reconstruction:
        trained.append(attack.train(obs, seed=seed, mode=mode, progress=progress, monitor=rounds,
                                    interruptible=interruptible))
        return trained[-1].reconstruction

    log(f"{label} on {victim.dataset} ({private.provenance}); {len(private)} private / {len(public)} public images; "
        f"device {device}; preset {s.preset}")
    outcome = attack_and_score(hijack, observation, targets, run=None, seed=seed, mode="own loop",
                               progress=progress, lpips=lpips, fid=fid)
    server, rec, m = trained[-1], outcome.reconstruction, outcome.metrics
    if rec.extras["interrupted"]:
        if rounds.pending:
            rounds.flush(rec.steps)
        log(f"interrupted after {rec.steps} of {s.iterations} iterations; writing what was reached")

    evaluation = evaluate_private(client, server, private, victim.eval_images, device)
    x = to_fsha_images(targets.to(device))
    controls = to_dataset_images(server.control(x), tuple(targets.shape[1:])).cpu()
    received = transcript.received_by_client()
    m.update({"arch": victim.arch, "level": victim.level, "dataset": victim.dataset})
    m["extras"].update({
        **_interval_summary(rounds.rows, rec.extras["diverged_at"] is not None),
        "eval": evaluation,
        "transcript": {"sent_by_client": len(transcript.sent_by_client()), "received_by_client": len(received),
                       "received_kinds": sorted({e.kind for e in received})},
        "scale": "*_pm1 and encoder_decoder_* on FSHA's [-1,1] 3x32x32 scale; *_mse01 on [0,1] at 3x32x32; "
                 "image_mse (top level and eval) on the dataset's [0,1] scale and shape, clamped",
        "log": list(rounds.rows),
    })
    if run is not None:
        write_fsha_outputs(run, outcome, controls)
    return outcome


# --- outputs -----------------------------------------------------------------------------------------------

def write_fsha_outputs(run: Run, outcome: Outcome, controls: torch.Tensor) -> None:
    """The driver's files (metrics.json, reconstruction.png, loss_curve.png) plus curves.png (Figure 5),
    reconstruction_control.png (targets, reconstructions, control) and reconstruction.pt."""
    m, rec = outcome.metrics, outcome.reconstruction
    label = f"{m['arch']} client, level {m['level']}, {m['dataset']}"
    write_outputs(run, outcome, title=f"FSHA, {label}")
    run.save_figure("curves.png", curves_figure([(m["arch"], m["extras"]["log"])]))
    run.save_figure("reconstruction_control.png", image_grid(
        [("private", outcome.targets), ("reconstruction", outcome.shown), ("control f~^-1(f~(x))", controls.clamp(0, 1))],
        title=f"FSHA, {label}, after {rec.steps} iterations"))
    atomic_torch_save({"originals": outcome.targets, "reconstructions": rec.images.detach().cpu(),
                       "controls": controls}, run.file("reconstruction.pt"))
    e = m["extras"]
    if e["training_interval_mse_pm1_final"] is not None:
        run.log(f"fsha: training-interval reconstruction MSE on [-1,1] final {e['training_interval_mse_pm1_final']:.4f} "
                f"best {e['training_interval_mse_pm1_best']:.4f}; eval {e['eval']['reconstruction_mse_pm1']:.4f}, "
                f"control {e['eval']['control_mse_pm1']:.4f}")


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

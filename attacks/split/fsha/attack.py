"""FSHA, the Feature-Space Hijacking Attack (Pasquini et al., CCS'21), as the JAST paper runs it (section 4.2):
the malicious server itself.

The adversary owns public data X_pub from the client's domain and, as the server, chooses the gradient it
returns for the client's smashed data. It trains three networks (`networks.py`): a pilot encoder f~, a
decoder f~^-1 and a critic D on the feature space. Every protocol round:

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

`FSHA(settings)(observation, *, seed)` returns the Reconstruction: f~^-1 of the targets' smashed data after the
rounds, on the dataset's [0,1] scale and shape; its `artefacts` hold the trained networks for the evaluation
(the control decoder(pilot(x)), more private images). Its `FshaObservation` holds the public images, the
shape of the smashed data and a `vfl.protocol.ClientSession`, through which it can only run protocol rounds
(receive H, return G) and, at the end, receive the smashed data of the evaluation targets. Its networks,
public batch order and penalty draws come from streams of the attack seed only.

Numbers (FSHA code, unchanged by JAST): Adam 1e-5 for f, 1e-5 for pilot + decoder (one optimiser), 1e-4 for
D, TF's Adam epsilon 1e-7; WGAN with gradient-penalty weight 500; batch 64 + 64; images 3x32x32 in [-1, 1].
All three networks step once per round from the same forward pass. Deviations from the original, each a
setting: the penalty's norm is over the whole feature (`gp_norm="full"`, standard WGAN-GP) by default, the
original's per-channel norm over H and W only as `gp_norm="spatial"`; the penalty applies to the BCE variant
too, as in the original code.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

from attacks.kit import (QUIET, EngineOptions, FshaObservation, Reconstruction, SplitlabError, adam_optimizer,
                         check_int, generator, stream_seed, wait_for)
from attacks.split.fsha.images import BatchStream, to_dataset_images
from attacks.split.fsha.networks import AttackerNetworks, build_attacker
from attacks.split.fsha.settings import FshaSettings

__all__ = ["FSHA", "FshaObservation", "TrainedServer", "HISTORY_FIELDS", "Monitor", "penalty_from_gradient",
           "gradient_penalty"]

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
        self.autoencoder_optimizer = adam_optimizer([*self.pilot.parameters(), *self.decoder.parameters()], s.lr_pilot,
                                                    eps=s.adam_eps, fused=fused)
        self.discriminator_optimizer = adam_optimizer(self.discriminator.parameters(), s.lr_discriminator,
                                                      eps=s.adam_eps, fused=fused)
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
    """The malicious server's networks after its rounds (`Reconstruction.artefacts["server"]`), for the
    evaluation's ground-truth measures: decoding more smashed data, the control decoder(pilot(x))."""
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
    quantities (rounds, interrupted, diverged_at, iterations_per_second, last-interval loss means);
    `artefacts["server"]` = the trained networks (`TrainedServer`).
    """
    settings: FshaSettings = FshaSettings(preset="fsha.paper")
    name = "fsha"
    networks = staticmethod(build_attacker)
    """The pilot, decoder and critic for a client family, feature shape and width (the victim side counts their
    parameters on the meta device to refuse a width too large before anything is allocated)."""

    def __call__(self, observation: FshaObservation, *, seed: int = 0, engine: EngineOptions = QUIET,
                 monitor: Monitor | None = None, interruptible: bool = False) -> Reconstruction:
        """Hijack the client for `settings.iterations` rounds, then decode the targets' smashed data.

        `interruptible`: Ctrl-C ends the rounds early and the reconstruction (extras `interrupted`)
        is still made; otherwise Ctrl-C propagates. Ground truth never enters here."""
        s = self.settings
        check_int("attack seed", seed, low=0, high=2**63 - 1)
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
        with engine.bar(s.iterations, f"fsha {observation.client_arch}") as bar:
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
        return Reconstruction(
            attack=self.name, preset=s.preset, trials=trials, loss=target_loss, per_target=True,
            history={name: history[:done, i:i + 1] for i, name in enumerate(HISTORY_FIELDS)},
            diverged=diverged, seconds=seconds, steps=done, initial=to_dataset_images(initial, shape).unsqueeze(1),
            artefacts={"server": TrainedServer(server.pilot, server.decoder, server.discriminator)},
            extras={"rounds": done, "iterations_asked": s.iterations, "interrupted": interrupted,
                    "diverged_at": diverged_at,
                    "iterations_per_second": done / seconds if seconds > 0 else None,
                    "encoder_decoder_mse_pm1_final": finals["encoder_decoder_mse"],
                    "client_loss_final": finals["client_loss"],
                    "discriminator_loss_final": finals["discriminator_loss"],
                    "target_loss": f"per-target {s.loss} client loss of the critic on the target's smashed data",
                    "client_arch": observation.client_arch, "feature_shape": list(observation.feature_shape),
                    "device": str(device)})


def _interval_means(history: torch.Tensor, done: int, every: int) -> list[float]:
    """Means of the history rows of the log interval that ends at round `done` (one host read)."""
    start = ((done - 1) // every) * every
    return history[start:done].mean(0).tolist()



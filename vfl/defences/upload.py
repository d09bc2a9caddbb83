"""Defences a client applies to what it uploads (a FedSGD gradient or a FedAvg update).

Each defence maps the list of per-parameter tensors the client would send to the list it does send.
The server sees only the result; the observation records the spec string (defence metadata), so an
attacker may know which defence was used but not its randomness.

- `gaussian:sigma=S[,clip=C]`: clip the whole upload to global L2 norm C (if given),
  u <- u * min(1, C / ||u||_2), then add independent N(0, S^2) noise to every entry (the Gaussian
  mechanism of DP-SGD / DP-FedAvg applied once to the client's upload; S is absolute, not a
  multiple of C).
- `topk:keep=F`: gradient pruning / sparsification: per tensor, keep the fraction F of entries with
  the largest magnitude and zero the rest (DLG, Section 5, "gradient pruning"; per-layer threshold).
- `quant:bits=N`: uniform symmetric quantisation per tensor to 2^(N-1) - 1 levels either side of 0,
  u <- round(u / s) * s with s = max|u| / (2^(N-1) - 1) (deterministic rounding; N >= 2).
- `upload-dp:epsilon=E[,delta=D]`: DP-SGD's Gaussian mechanism calibrated from a privacy budget as FedLeak
  evaluates it (Sec. 5): clip to C = 1, then `gaussian` noise of sigma = C sqrt(2 ln(1/delta)) / E,
  delta = 1e-5 by default.
- `none`: upload as computed.

Each is declared by a `DefenceSpec` at the upload point (`vfl.defences.registry`: one parser for every defence);
one upload defence per run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from vfl.defences.spec import DefenceSettings, DefenceSpec, Deviation, Where
from vfl.errors import SplitlabError
from vfl.options import integer, number, option, optional

__all__ = ["Defence", "NoDefence", "GaussianNoise", "TopK", "Quantise", "DPGaussian", "parse_defence", "GAUSSIAN",
           "TOPK", "QUANT", "UPLOAD_DP"]

Tensors = Sequence[torch.Tensor]


@dataclass(frozen=True)
class NoDefence:
    def __call__(self, upload: Tensors, generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        return tuple(t.detach().clone() for t in upload)

    @property
    def spec(self) -> str:
        return "none"


@dataclass(frozen=True)
class GaussianNoise:
    """u <- clip_C(u) + N(0, sigma^2 I); clip_C(u) = u * min(1, C / ||u||_2) over all tensors jointly."""
    sigma: float
    clip: float | None = None

    def __call__(self, upload: Tensors, generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        out = [t.detach().clone() for t in upload]
        if self.clip is not None:
            norm = torch.sqrt(sum(t.double().pow(2).sum() for t in out))
            scale = torch.clamp(self.clip / norm.clamp_min(1e-30), max=1.0)
            out = [t * scale.to(t.dtype) for t in out]
        if self.sigma > 0:
            # noise is drawn on the CPU from the caller's generator, so a seed gives the same upload anywhere
            out = [t + self.sigma * torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device)
                   for t in out]
        return tuple(out)

    @property
    def spec(self) -> str:
        return f"gaussian:sigma={self.sigma:g}" + (f",clip={self.clip:g}" if self.clip is not None else "")


@dataclass(frozen=True)
class TopK:
    """Per tensor, zero all but the ceil(keep * numel) entries of largest magnitude."""
    keep: float

    def __call__(self, upload: Tensors, generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        out = []
        for t in upload:
            flat = t.detach().flatten()
            k = max(1, math.ceil(self.keep * flat.numel()))
            mask = torch.zeros_like(flat, dtype=torch.bool)
            mask[torch.topk(flat.abs(), k).indices] = True
            out.append(torch.where(mask, flat, torch.zeros_like(flat)).view_as(t))
        return tuple(out)

    @property
    def spec(self) -> str:
        return f"topk:keep={self.keep:g}"


@dataclass(frozen=True)
class Quantise:
    """Per tensor, u <- round(u / s) * s with s = max|u| / (2^(bits-1) - 1); one bit is the sign, u <- sign(u) *
    mean|u| (signSGD's compression with the tensor's mean magnitude, so the upload keeps its scale)."""
    bits: int

    def __call__(self, upload: Tensors, generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        if self.bits == 1:
            return tuple(t.detach().sign() * t.detach().abs().mean() for t in upload)
        levels = 2 ** (self.bits - 1) - 1
        out = []
        for t in upload:
            t = t.detach()
            step = t.abs().amax() / levels
            out.append(torch.where(step > 0, torch.round(t / step.clamp_min(1e-30)) * step, t))
        return tuple(out)

    @property
    def spec(self) -> str:
        return f"quant:bits={self.bits}"


@dataclass(frozen=True)
class DPGaussian(GaussianNoise):
    """GaussianNoise with clip C and sigma = C sqrt(2 ln(1/delta)) / epsilon (FedLeak's DP-SGD setting);
    build it with `DPGaussian.of(epsilon, delta, clip)`."""
    epsilon: float = 1.0
    delta: float = 1e-5

    @classmethod
    def of(cls, epsilon: float, delta: float = 1e-5, clip: float = 1.0) -> "DPGaussian":
        return cls(clip * math.sqrt(-2 * math.log(delta)) / epsilon, clip, epsilon, delta)     # log(1/delta) overflows

    @property
    def spec(self) -> str:
        return f"upload-dp:epsilon={self.epsilon:g}" + (f",delta={self.delta:g}" if self.delta != 1e-5 else "")


Defence = NoDefence | GaussianNoise | TopK | Quantise | DPGaussian

@dataclass(frozen=True, kw_only=True)
class GaussianSettings(DefenceSettings):
    sigma: float = option(help="Standard deviation of the noise added to every entry (absolute, not a multiple of "
                          "clip).", check=number(low=0))
    clip: float | None = option(None, "Clip the whole upload to this global L2 norm first.",
                                optional(number(low=0, low_open=True)))


@dataclass(frozen=True, kw_only=True)
class TopKSettings(DefenceSettings):
    keep: float = option(help="Fraction of each tensor's entries kept (those of largest magnitude).",
                         check=number(low=0, high=1, low_open=True))


@dataclass(frozen=True, kw_only=True)
class QuantSettings(DefenceSettings):
    bits: int = option(help="Bits per entry (1: the sign times the mean magnitude).", check=integer(low=1, high=32))


@dataclass(frozen=True, kw_only=True)
class UploadDPSettings(DefenceSettings):
    epsilon: float = option(help="Privacy budget epsilon (sigma = sqrt(2 ln(1/delta)) / epsilon at clip 1).",
                            check=number(low=0, low_open=True))
    delta: float | None = option(None, "Privacy budget delta (default 1e-5).",
                                 optional(number(low=0, high=1, low_open=True, high_open=True)))


DLG = "Zhu, Liu, Han, Deep Leakage from Gradients (NeurIPS 2019), Sec. 5"
FEDLEAK = "Fan, Chen, Wang, Zhou, Boosting Gradient Leakage Attacks (FedLeak), Sec. 5's DP-SGD evaluation"

GAUSSIAN = DefenceSpec(
    name="gaussian", point="upload", title="clip the whole upload to a global L2 norm (if given), then add "
    "N(0, sigma^2) to every entry", paper=f"{DLG} (noisy gradients)", settings=GaussianSettings,
    build=lambda s, where: GaussianNoise(s.sigma, s.clip), example="gaussian:sigma=1e-3,clip=4",
    zero={"sigma": 0.0}, strengths=({"sigma": 1e-4}, {"sigma": 1e-3}, {"sigma": 1e-2}, {"sigma": 1e-1}))

TOPK = DefenceSpec(
    name="topk", point="upload", title="per tensor, keep the entries of largest magnitude and zero the rest "
    "(gradient pruning)", paper=f"{DLG} (gradient pruning)", settings=TopKSettings,
    build=lambda s, where: TopK(s.keep), example="topk:keep=0.1", zero={"keep": 1.0},
    strengths=({"keep": 0.9}, {"keep": 0.4}, {"keep": 0.1}))

QUANT = DefenceSpec(
    name="quant", point="upload", title="uniform symmetric quantisation of each tensor (1 bit: signSGD's sign "
    "times the mean magnitude)", paper="the gradient-compression defence as FedLeak evaluates it", settings=QuantSettings,
    build=lambda s, where: Quantise(s.bits), example="quant:bits=4", strengths=({"bits": 4}, {"bits": 2}, {"bits": 1}))

UPLOAD_DP = DefenceSpec(
    name="upload-dp", point="upload", title="DP-SGD's Gaussian mechanism on the whole upload: clip to 1, noise "
    "sigma = sqrt(2 ln(1/delta)) / epsilon", paper=FEDLEAK, settings=UploadDPSettings,
    build=lambda s, where: DPGaussian.of(s.epsilon, 1e-5 if s.delta is None else s.delta),
    example="upload-dp:epsilon=100", strengths=({"epsilon": 1000.0}, {"epsilon": 100.0}, {"epsilon": 10.0}),
    deviations=(Deviation("clipping", "DP-SGD clips each sample's gradient", "the whole upload is clipped once",
                          "the server sees one upload; per-sample clipping gives up to B times more signal"),))


def parse_defence(spec: str) -> Defence:
    """`gaussian:sigma=1e-3,clip=4`, `topk:keep=0.1`, `quant:bits=4` or `none` (one defence per run); bad specs
    raise SplitlabError."""
    from vfl.defences.registry import build, chain

    chosen = chain(spec or "none", ("upload",), "--defence")
    if len(chosen) > 1:
        raise SplitlabError(f"splitlab hfl takes one upload defence a run; {spec!r} has {len(chosen)}")
    return build(chosen, Where())[0] if chosen else NoDefence()

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
- `none`: upload as computed.

Specs are `name[:key=value,...]`, one defence per run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from vfl.errors import SplitlabError

__all__ = ["Defence", "NoDefence", "GaussianNoise", "TopK", "Quantise", "parse_defence"]

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
    """Per tensor, u <- round(u / s) * s with s = max|u| / (2^(bits-1) - 1)."""
    bits: int

    def __call__(self, upload: Tensors, generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
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


Defence = NoDefence | GaussianNoise | TopK | Quantise

_FIELDS = {"gaussian": {"sigma": float, "clip": float}, "topk": {"keep": float}, "quant": {"bits": int}, "none": {}}
_REQUIRED = {"gaussian": ("sigma",), "topk": ("keep",), "quant": ("bits",), "none": ()}
_EXAMPLES = "none, gaussian:sigma=1e-3,clip=4, topk:keep=0.1 or quant:bits=4"


def parse_defence(spec: str) -> Defence:
    """`gaussian:sigma=1e-3,clip=4`, `topk:keep=0.1`, `quant:bits=4` or `none`; bad specs raise SplitlabError."""
    text = (spec or "none").strip()
    name, _, rest = text.partition(":")
    name = name.strip().lower()
    if name not in _FIELDS:
        raise SplitlabError(f"unknown defence {name!r} in {spec!r}; use {_EXAMPLES}")
    values: dict[str, float | int] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in _FIELDS[name]:
            allowed = ", ".join(_FIELDS[name]) or "no options"
            raise SplitlabError(f"defence {name} takes {allowed}; got {item!r} in {spec!r}")
        try:
            values[key] = _FIELDS[name][key](value.strip())
        except ValueError:
            kind = "an integer" if _FIELDS[name][key] is int else "a number"
            raise SplitlabError(f"defence {name}: {key}={value.strip()!r} is not {kind}") from None
    missing = [k for k in _REQUIRED[name] if k not in values]
    if missing:
        raise SplitlabError(f"defence {name} needs {', '.join(missing)}, e.g. {_EXAMPLES}")
    if name == "none":
        return NoDefence()
    if name == "gaussian":
        sigma, clip = float(values["sigma"]), values.get("clip")
        if not math.isfinite(sigma) or sigma < 0 or (clip is not None and not clip > 0):
            raise SplitlabError(f"defence gaussian needs sigma >= 0 and clip > 0; got {spec!r}")
        return GaussianNoise(sigma, None if clip is None else float(clip))
    if name == "topk":
        keep = float(values["keep"])
        if not 0 < keep <= 1:
            raise SplitlabError(f"defence topk needs 0 < keep <= 1; got {spec!r}")
        return TopK(keep)
    bits = int(values["bits"])
    if not 2 <= bits <= 32:
        raise SplitlabError(f"defence quant needs 2 <= bits <= 32; got {spec!r}")
    return Quantise(bits)

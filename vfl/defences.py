"""Client-side defences at the protocol's typed hook points (input, activations, received gradients).

`parse_defences("none")` gives no defence. Each defence is a small object whose hooks default to the
identity; a spec string names it on the command line.
"""
from __future__ import annotations

import torch

from vfl.errors import SplitlabError


class ClientDefence:
    """Base class: every hook is the identity unless a defence overrides it."""

    name = "none"

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x

    def on_activations(self, h: torch.Tensor, training: bool) -> torch.Tensor:
        return h

    def on_gradient(self, g: torch.Tensor) -> torch.Tensor:
        return g


class ActivationNoise(ClientDefence):
    """Gaussian noise N(0, sigma^2) added to the activations the client sends (training and inference)."""

    name = "activation-noise"

    def __init__(self, sigma: float):
        self.sigma = sigma

    def on_activations(self, h: torch.Tensor, training: bool) -> torch.Tensor:
        return h + self.sigma * torch.randn_like(h)


class GradientNoise(ClientDefence):
    """Gaussian noise on the cut-layer gradient the client receives before it backpropagates it."""

    name = "gradient-noise"

    def __init__(self, sigma: float):
        self.sigma = sigma

    def on_gradient(self, g: torch.Tensor) -> torch.Tensor:
        return g + self.sigma * torch.randn_like(g)


def _parse_options(text: str) -> dict[str, float]:
    options = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SplitlabError(f"defence option {item!r} is not key=value (example: activation-noise:sigma=0.1)")
        try:
            options[key.strip()] = float(value)
        except ValueError:
            raise SplitlabError(f"defence option {key}={value!r} is not a number") from None
    return options


def parse_defences(spec: str) -> list[ClientDefence]:
    """`none`, or `+`-joined items `name[:key=value,...]`, e.g. `activation-noise:sigma=0.1`."""
    defences: list[ClientDefence] = []
    for item in filter(None, spec.split("+")):
        name, _, rest = item.partition(":")
        options = _parse_options(rest)
        try:
            if name == "none":
                continue
            if name == "activation-noise":
                defences.append(ActivationNoise(options.pop("sigma")))
            elif name == "gradient-noise":
                defences.append(GradientNoise(options.pop("sigma")))
            else:
                raise SplitlabError(f"unknown defence {name!r}; choose none, activation-noise, gradient-noise")
        except KeyError as exc:
            raise SplitlabError(f"defence {name} needs option {exc.args[0]}=<value>") from None
        if options:
            raise SplitlabError(f"defence {name} does not take option(s) {', '.join(options)}")
    return defences

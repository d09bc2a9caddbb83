"""What the feature party's defences share: the hooks they override, and seeded noise of their own."""
from __future__ import annotations

import torch

from vfl.options import integer, option

__all__ = ["ClientDefence", "SeededNoise", "seed_option"]


def seed_option(what: str = "its random stream"):
    """The `seed` option of every defence that draws: a generator of its own, never torch's global one."""
    return option(0, f"Seed of {what} (a generator of its own).", integer(low=0, high=2**63 - 1))


class ClientDefence:
    """Base class of the feature party's defences: every hook is the identity unless a defence overrides it."""

    name = "none"
    secret_transform = False
    """A fixed secret transform of the input (the orthogonal family): the party applies it to its own computations
    too, where noise (input-dp) is only what it adds to what it sends."""

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x

    def on_activations(self, h: torch.Tensor, training: bool) -> torch.Tensor:
        return h

    def on_gradient(self, g: torch.Tensor) -> torch.Tensor | None:
        """The gradient to backpropagate; None: discard the round (no step on it)."""
        return g

    def on_labels(self, y: torch.Tensor | None, step: int) -> torch.Tensor | None:
        """The labels that go with round `step`'s activations (a detector's fake batch changes them)."""
        return y

    def on_loss(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None:
        """An extra term of the client's training loss from its input `x` (as given, before the input defences) and
        its activations `h` (attached to its graph); None: none. The client backpropagates the received gradient
        and this term together."""
        return None

    def report(self) -> dict:
        """What the defence did over the run, for metrics.json."""
        return {}

    def input_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of one example after `on_input` (what the client model must take)."""
        return shape

    def state_dict(self) -> dict[str, torch.Tensor]:
        """What changes as the defence is used (a noise stream's position), for a checkpoint to resume from."""
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        pass


class SeededNoise:
    """Gaussian noise N(0, sigma^2) from a generator of its own, seeded with `seed` and made lazily on
    each device it meets (a CUDA tensor needs a CUDA generator): the same seed gives the same draws, and
    the caller's global RNG stream is left alone."""

    def __init__(self, sigma: float, seed: int = 0):
        self.sigma, self.seed = sigma, seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def _generator(self, x: torch.Tensor) -> torch.Generator:
        g = self._generators.get(x.device)
        if g is None:
            g = self._generators[x.device] = torch.Generator(device=x.device).manual_seed(self.seed)
        return g

    def noise_like(self, x: torch.Tensor) -> torch.Tensor:
        g = self._generator(x)
        return self.sigma * torch.randn(x.shape, generator=g, device=x.device, dtype=x.dtype)

    def laplace_like(self, x: torch.Tensor) -> torch.Tensor:
        """Laplace noise of scale `sigma` (by the inverse CDF of a uniform draw from the same generator)."""
        g = self._generator(x)
        u = torch.rand(x.shape, generator=g, device=x.device, dtype=x.dtype) - 0.5
        tail = (1 - 2 * u.abs()).clamp_min(torch.finfo(x.dtype).tiny)     # a draw of exactly -0.5: finite
        return -self.sigma * u.sign() * tail.log()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {str(device): g.get_state() for device, g in self._generators.items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for name, generator_state in state.items():
            device = torch.device(name)
            self._generators[device] = torch.Generator(device=device)
            self._generators[device].set_state(generator_state)

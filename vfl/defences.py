"""Client-side defences at the protocol's typed hook points (input, activations, received gradients).

Input transforms (JAST, arXiv 2412.11689, Lemmas 1-3): a secret, fixed orthogonal matrix U applied to
the flattened input, x -> xU. A dense first layer absorbs it exactly (W -> U^T W), so accuracy is
unchanged and an attacker that knows only the architecture can at best recover xU; a convolution
cannot absorb a dense U, so for CNN clients the transform scrambles the pixel layout the
convolution relies on.

- `orthogonal`: dense U (d x d) from the QR decomposition of a Gaussian matrix, signs fixed so the
  draw is Haar-distributed; the input keeps its shape.
- `semi-orthogonal`: U (d x d') with d' >= d and orthonormal rows (U U^T = I_d); the client then takes
  d' features, so only clients with a flat dense input (mlp, small-mlp) can use it.
- `patch-orthogonal`: one U (p*p*C square) applied to every non-overlapping p x p patch, which the
  Mixer's patch embedding absorbs.
- `dp`: Gaussian noise on every input the client sends (training batches and attacked inputs),
  sigma from the analytic Gaussian mechanism (Balle & Wang 2018, via `autodp`) for (epsilon, delta)
  and an L2 sensitivity estimated as the JAST code does (below).
- `activation-noise`, `gradient-noise`: Gaussian noise on the activations sent / gradients received.

Specs: `none`, or `+`-joined items `name[:key=value,...]`, e.g. `orthogonal:seed=3`,
`dp:epsilon=6,delta=0.5`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

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

    def input_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of one example after `on_input` (what the client model must take)."""
        return shape


# --- orthogonal transforms ---------------------------------------------------------------------------

def random_orthogonal(rows: int, cols: int | None = None, seed: int = 0) -> torch.Tensor:
    """A Haar-random matrix with orthonormal rows (rows <= cols) or columns, in float64.

    QR of a Gaussian matrix, with the signs of R's diagonal moved into Q so the law is uniform.
    """
    cols = rows if cols is None else cols
    g = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(max(rows, cols), min(rows, cols), generator=g, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    q = q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, torch.ones(()))
    return q if rows >= cols else q.T


class _SecretMatrix(ClientDefence):
    """A defence that multiplies by a fixed secret `matrix` (float64, as drawn)."""

    matrix: torch.Tensor
    _converted: tuple[tuple[torch.device, torch.dtype], torch.Tensor] | None = None

    def matrix_like(self, x: torch.Tensor) -> torch.Tensor:
        """The matrix on x's device and dtype, converted once rather than at every batch."""
        key = (x.device, x.dtype)
        if self._converted is None or self._converted[0] != key:
            self._converted = (key, self.matrix.to(device=x.device, dtype=x.dtype))
        return self._converted[1]


class OrthogonalTransform(_SecretMatrix):
    """x -> flatten(x) U, reshaped back; U is d x d orthogonal (square) and kept secret by the client."""

    name = "orthogonal"

    def __init__(self, input_shape: tuple[int, ...], seed: int = 0):
        self.shape = tuple(input_shape)
        self.matrix = random_orthogonal(math.prod(self.shape), seed=seed)

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return (x.flatten(1) @ self.matrix_like(x)).view(x.shape)


class SemiOrthogonalTransform(_SecretMatrix):
    """x -> flatten(x) U with U d x d' (d' >= d, U U^T = I_d): the client sees d' features."""

    name = "semi-orthogonal"

    def __init__(self, input_shape: tuple[int, ...], dim: int, seed: int = 0):
        _check_semi_orthogonal(dim, input_shape)
        self.dim = dim
        self.matrix = random_orthogonal(math.prod(input_shape), dim, seed=seed)

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x.flatten(1) @ self.matrix_like(x)

    def input_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (self.dim,)


DEFAULT_PATCH = 4
"""The Mixer's patch size (4 x 4 on CIFAR-10)."""


class PatchOrthogonalTransform(_SecretMatrix):
    """The same orthogonal U (p*p*C square) applied to every non-overlapping p x p patch of an image."""

    name = "patch-orthogonal"

    def __init__(self, input_shape: tuple[int, ...], patch: int = DEFAULT_PATCH, seed: int = 0):
        _check_patch(patch, input_shape)
        self.patch = patch
        self.matrix = random_orthogonal(input_shape[0] * patch * patch, seed=seed)

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        n, c, h, w = x.shape
        p = self.patch
        patches = x.view(n, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(n, h // p, w // p, c * p * p)
        mixed = patches @ self.matrix_like(x)
        return mixed.view(n, h // p, w // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(n, c, h, w)


# --- differential privacy on the input ---------------------------------------------------------------

DP_EPSILON, DP_DELTA = 6.0, 0.5
"""dp's defaults when the spec gives none: the JAST DP experiments (epsilon 6, delta 0.5)."""


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise scale of the analytic Gaussian mechanism (Balle & Wang 2018, Alg. 1) for L2 sensitivity."""
    _check_privacy(epsilon, delta)
    from autodp.calibrator_zoo import ana_gaussian_calibrator
    from autodp.mechanism_zoo import ExactGaussianMechanism

    unit = ana_gaussian_calibrator()(ExactGaussianMechanism, epsilon, delta, [[0, 1000]]).params["sigma"]
    return float(unit) * sensitivity


def estimate_sensitivity(images: torch.Tensor, batch_size: int = 64, seed: int = 0) -> float:
    """The JAST code's L2 "sensitivity": the element-wise mean of all full training batches (in a
    seeded shuffled order) is the "average batch" X; X' is X with one random row zeroed; the
    estimate is ||X - X'||_F, the norm of that row. (This is a heuristic, not a bound on the true
    global sensitivity; it is what the paper's sigma values come from.)"""
    g = torch.Generator().manual_seed(seed)
    flat = images.flatten(1).double()
    order = torch.randperm(len(flat), generator=g)
    full = len(flat) // batch_size * batch_size
    average_batch = flat[order[:full]].view(-1, batch_size, flat.shape[1]).mean(0)
    row = int(torch.randint(batch_size, (1,), generator=g))
    return float(average_batch[row].norm())


class DPInputNoise(ClientDefence):
    """x -> x + N(0, sigma^2) per input element, on every input the client sends."""

    name = "dp"

    def __init__(self, sigma: float, epsilon: float | None = None, delta: float | None = None,
                 sensitivity: float | None = None):
        self.sigma, self.epsilon, self.delta, self.sensitivity = sigma, epsilon, delta, sensitivity

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x + self.sigma * torch.randn_like(x)


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


# --- value checks (shared by the constructors and `parse_spec`, so bad input fails before any work) ---

def _check_semi_orthogonal(dim: float, shape: tuple[int, ...]) -> None:
    if dim < math.prod(shape):
        raise SplitlabError(f"semi-orthogonal dim={dim:g} must be at least the input size {math.prod(shape)}")


def _check_patch(patch: float, shape: tuple[int, ...]) -> None:
    if len(shape) != 3:
        raise SplitlabError("patch-orthogonal needs image inputs (C, H, W)")
    if patch < 1 or shape[1] % patch or shape[2] % patch:
        raise SplitlabError(f"patch-orthogonal patch={patch:g} must divide the image size {shape[1]}x{shape[2]}")


def _check_privacy(epsilon: float, delta: float) -> None:
    if epsilon <= 0 or not 0 < delta < 1:
        raise SplitlabError(f"dp needs epsilon > 0 and 0 < delta < 1 (got epsilon={epsilon:g}, delta={delta:g})")


# --- specs -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DefenceSpec:
    name: str
    options: dict[str, float]


_OPTIONS = {
    "none": set(), "orthogonal": {"seed"}, "semi-orthogonal": {"dim", "seed"},
    "patch-orthogonal": {"patch", "seed"}, "dp": {"epsilon", "delta", "sigma", "sensitivity", "seed"},
    "activation-noise": {"sigma"}, "gradient-noise": {"sigma"},
}
_REQUIRED = {"activation-noise": {"sigma"}, "gradient-noise": {"sigma"}, "semi-orthogonal": {"dim"}}


def split_specs(text: str) -> list[str]:
    """A comma-separated list of defence specs, where a spec's own options are comma-separated too:
    "none,dp:epsilon=6,delta=0.5" -> ["none", "dp:epsilon=6,delta=0.5"] (an item that starts with
    key=value belongs to the spec before it)."""
    specs: list[str] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        if specs and "=" in item.split(":")[0]:
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def parse_spec(spec: str, input_shape: tuple[int, ...] | None = None) -> list[DefenceSpec]:
    """Check names, options and values of a defence spec without building anything; with
    `input_shape`, also that each defence fits the inputs it gets (a semi-orthogonal `dim` at
    least the input size, a patch size dividing the image)."""
    shape = None if input_shape is None else tuple(input_shape)
    items = []
    for item in filter(None, spec.split("+")):
        name, _, rest = item.partition(":")
        if name not in _OPTIONS:
            raise SplitlabError(f"unknown defence {name!r}; choose one of: {', '.join(_OPTIONS)}")
        options = _options(name, rest)
        shape = _check_values(name, options, shape)
        if name != "none":
            items.append(DefenceSpec(name, options))
    return items


def _options(name: str, text: str) -> dict[str, float]:
    options = {}
    for pair in filter(None, text.split(",")):
        key, sep, value = pair.partition("=")
        if not sep:
            raise SplitlabError(f"defence option {pair!r} is not key=value (example: dp:epsilon=6,delta=0.5)")
        if key not in _OPTIONS[name]:
            raise SplitlabError(f"defence {name} does not take option {key!r}; it takes "
                                f"{', '.join(sorted(_OPTIONS[name])) or 'no options'}")
        try:
            options[key] = float(value)
        except ValueError:
            raise SplitlabError(f"defence option {key}={value!r} is not a number") from None
    missing = _REQUIRED.get(name, set()) - set(options)
    if missing:
        raise SplitlabError(f"defence {name} needs option {', '.join(sorted(missing))}=<value>")
    return options


def _check_values(name: str, options: dict[str, float], shape: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """Raise on values the defence cannot take; return the input shape after it (None: unknown)."""
    if options.get("sigma", 0) < 0:
        raise SplitlabError(f"defence {name} needs sigma >= 0 (got {options['sigma']:g})")
    if name == "dp" and "sigma" not in options:
        _check_privacy(options.get("epsilon", DP_EPSILON), options.get("delta", DP_DELTA))
    if shape is not None and name == "patch-orthogonal":
        _check_patch(options.get("patch", DEFAULT_PATCH), shape)
    if shape is not None and name == "semi-orthogonal":
        _check_semi_orthogonal(options["dim"], shape)
        return (int(options["dim"]),)
    return shape


def parse_defences(spec: str, input_shape: tuple[int, ...] = (1, 28, 28),
                   train_images: torch.Tensor | None = None) -> list[ClientDefence]:
    """Build the defences of a spec for inputs of `input_shape` (DP may estimate its sensitivity on
    `train_images`)."""
    defences: list[ClientDefence] = []
    shape = tuple(input_shape)
    for item in parse_spec(spec, shape):
        o = item.options
        seed = int(o.get("seed", 0))
        if item.name == "orthogonal":
            defence = OrthogonalTransform(shape, seed)
        elif item.name == "semi-orthogonal":
            defence = SemiOrthogonalTransform(shape, int(o["dim"]), seed)
        elif item.name == "patch-orthogonal":
            defence = PatchOrthogonalTransform(shape, int(o.get("patch", DEFAULT_PATCH)), seed)
        elif item.name == "dp":
            defence = _dp(o, train_images, seed)
        elif item.name == "activation-noise":
            defence = ActivationNoise(o["sigma"])
        else:
            defence = GradientNoise(o["sigma"])
        shape = defence.input_shape(shape)
        defences.append(defence)
    return defences


def _dp(options: dict[str, float], train_images: torch.Tensor | None, seed: int) -> DPInputNoise:
    if "sigma" in options:
        return DPInputNoise(options["sigma"])
    epsilon, delta = options.get("epsilon", DP_EPSILON), options.get("delta", DP_DELTA)
    sensitivity = options.get("sensitivity")
    if sensitivity is None:
        if train_images is None:
            raise SplitlabError("dp needs training images to estimate its sensitivity, or sensitivity=<value>")
        sensitivity = estimate_sensitivity(train_images, seed=seed)
    return DPInputNoise(analytic_gaussian_sigma(epsilon, delta, sensitivity), epsilon, delta, sensitivity)


def transformed_shape(defences: list[ClientDefence], shape: tuple[int, ...]) -> tuple[int, ...]:
    for d in defences:
        shape = d.input_shape(shape)
    return tuple(shape)

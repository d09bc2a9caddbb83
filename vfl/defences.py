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
- `input-dp`: Gaussian noise on every input the client sends (training batches and attacked inputs),
  sigma from the analytic Gaussian mechanism (Balle & Wang 2018, via `autodp`) for (epsilon, delta)
  and an L2 sensitivity estimated as the JAST code does (below).
- `activation-noise`, `gradient-noise`: Gaussian noise on the activations sent / gradients received.

Specs: `none`, or `+`-joined items `name[:key=value,...]`, e.g. `orthogonal:seed=3`,
`input-dp:epsilon=6,delta=0.5`. `parse_item` is the one parser of `name[:key=value,...]` against a schema
(defence name -> option name -> `SpecKey`), shared with the HFL upload defences (attacks/hfl/defences.py).
The noise defences draw from generators of their own (option `seed`, default 0), never torch's global one.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Mapping

import torch

from vfl.errors import SplitlabError, lookup
from vfl.validate import SpecKey


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

    def state_dict(self) -> dict[str, torch.Tensor]:
        """What changes as the defence is used (a noise stream's position), for a checkpoint to resume from."""
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        pass


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
        dim = CLIENT_DEFENCES[self.name]["dim"].check(f"defence {self.name}", dim, "dim")
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
        patch = CLIENT_DEFENCES[self.name]["patch"].check(f"defence {self.name}", patch, "patch")
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
"""input-dp's defaults when the spec gives none: the JAST DP experiments (epsilon 6, delta 0.5)."""

CALIBRATION_SECONDS = 10.0
"""The calibration takes milliseconds where its inputs are bounded (below); past this it is stuck."""


def _unit_sigma(epsilon: float, delta: float) -> float:
    """autodp's analytic Gaussian calibration for sensitivity 1. Its bisection stops only within 1e-12
    of delta, so it loops forever on nan/inf, on some larger epsilons (15 with delta 0.99, 20 with 0.9)
    and overflows above epsilon ~700; below delta ~1e-10 that tolerance makes sigma wrong. The schema
    keeps it to epsilon in [1e-3, 10] and delta in [1e-10, 0.99], where a dense grid converged in
    milliseconds and the inverse (autodp's get_eps_ana_gaussian) gave epsilon back within 0.04%."""
    from autodp.calibrator_zoo import ana_gaussian_calibrator
    from autodp.mechanism_zoo import ExactGaussianMechanism

    return float(ana_gaussian_calibrator()(ExactGaussianMechanism, epsilon, delta, [[0, 1000]]).params["sigma"])


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise scale of the analytic Gaussian mechanism (Balle & Wang 2018, Alg. 1) for L2 sensitivity.

    Runs the calibration in a daemon thread bounded by `CALIBRATION_SECONDS`: a stuck search cannot be
    interrupted, but it no longer hangs the command (the process exits with the error)."""
    dp = CLIENT_DEFENCES["input-dp"]
    epsilon = dp["epsilon"].check("defence input-dp", epsilon, "epsilon")
    delta = dp["delta"].check("defence input-dp", delta, "delta")
    sensitivity = dp["sensitivity"].check("defence input-dp", sensitivity, "sensitivity")
    result: list = []
    worker = threading.Thread(target=lambda: result.append(_calibrate_or_error(epsilon, delta)), daemon=True)
    worker.start()
    worker.join(CALIBRATION_SECONDS)
    if not result:
        raise SplitlabError(f"input-dp calibration for epsilon={epsilon:g}, delta={delta:g} did not finish in "
                            f"{CALIBRATION_SECONDS:g} s; give the noise scale directly with input-dp:sigma=S")
    if isinstance(result[0], Exception):
        raise SplitlabError(f"input-dp calibration for epsilon={epsilon:g}, delta={delta:g} failed "
                            f"({type(result[0]).__name__}); give the noise scale directly with input-dp:sigma=S")
    return result[0] * sensitivity


def _calibrate_or_error(epsilon: float, delta: float) -> float | Exception:
    try:
        return _unit_sigma(epsilon, delta)
    except Exception as exc:            # reported in the caller's thread as a SplitlabError
        return exc


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


class _SeededNoise:
    """Gaussian noise N(0, sigma^2) from a generator of its own, seeded with `seed` and made lazily on
    each device it meets (a CUDA tensor needs a CUDA generator): the same seed gives the same draws, and
    the caller's global RNG stream is left alone."""

    def __init__(self, sigma: float, seed: int = 0):
        self.sigma, self.seed = sigma, seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def noise_like(self, x: torch.Tensor) -> torch.Tensor:
        g = self._generators.get(x.device)
        if g is None:
            g = self._generators[x.device] = torch.Generator(device=x.device).manual_seed(self.seed)
        return self.sigma * torch.randn(x.shape, generator=g, device=x.device, dtype=x.dtype)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {str(device): g.get_state() for device, g in self._generators.items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for name, generator_state in state.items():
            device = torch.device(name)
            self._generators[device] = torch.Generator(device=device)
            self._generators[device].set_state(generator_state)


class DPInputNoise(_SeededNoise, ClientDefence):
    """x -> x + N(0, sigma^2) per input element, on every input the client sends."""

    name = "input-dp"

    def __init__(self, sigma: float, epsilon: float | None = None, delta: float | None = None,
                 sensitivity: float | None = None, seed: int = 0):
        super().__init__(sigma, seed)
        self.epsilon, self.delta, self.sensitivity = epsilon, delta, sensitivity

    def on_input(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return x + self.noise_like(x)


class ActivationNoise(_SeededNoise, ClientDefence):
    """Gaussian noise N(0, sigma^2) added to the activations the client sends (training and inference)."""

    name = "activation-noise"

    def on_activations(self, h: torch.Tensor, training: bool) -> torch.Tensor:
        return h + self.noise_like(h)


class GradientNoise(_SeededNoise, ClientDefence):
    """Gaussian noise on the cut-layer gradient the client receives before it backpropagates it."""

    name = "gradient-noise"

    def on_gradient(self, g: torch.Tensor) -> torch.Tensor:
        return g + self.noise_like(g)


# --- specs: one parser for every defence setting --------------------------------------------------

SEED = SpecKey(integer=True, low=0, high=2**63 - 1)

MAX_MATRIX_BYTES = 256 * 2**20
"""semi-orthogonal's secret matrix is d x dim float64 (and QR costs d^2 * dim); dim is bounded by this."""

CLIENT_DEFENCES: dict[str, dict[str, SpecKey]] = {
    "none": {},
    "orthogonal": {"seed": SEED},
    "semi-orthogonal": {"dim": SpecKey(integer=True, low=1, high=MAX_MATRIX_BYTES // 8, required=True), "seed": SEED},
    "patch-orthogonal": {"patch": SpecKey(integer=True, low=1, high=4096), "seed": SEED},
    "input-dp": {"epsilon": SpecKey(low=1e-3, high=10), "delta": SpecKey(low=1e-10, high=0.99),
           "sigma": SpecKey(low=0), "sensitivity": SpecKey(low=0, low_open=True), "seed": SEED},
    "activation-noise": {"sigma": SpecKey(low=0, required=True), "seed": SEED},
    "gradient-noise": {"sigma": SpecKey(low=0, required=True), "seed": SEED},
}
"""Split-learning client defences: name -> option -> type and range (input-dp's bounds: `_unit_sigma`)."""


@dataclass(frozen=True)
class DefenceSpec:
    name: str
    options: dict[str, int | float]


def parse_item(text: str, schema: Mapping[str, Mapping[str, SpecKey]], example: str) -> DefenceSpec:
    """One `name[:key=value,...]` checked against `schema`: a known name, known keys, each value of its
    type and in its range, required keys present. `example` is shown when the text is not key=value."""
    name, _, rest = text.strip().partition(":")
    name = name.strip().lower()
    options_schema = lookup(schema, name, "defence")
    options: dict[str, int | float] = {}
    for pair in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not sep:
            raise SplitlabError(f"defence option {pair!r} is not key=value (example: {example})")
        if key not in options_schema:
            raise SplitlabError(f"defence {name} does not take option {key!r}; it takes "
                                f"{', '.join(options_schema) or 'no options'}")
        if key in options:
            raise SplitlabError(f"defence {name} has option {key} twice; give it once")
        options[key] = options_schema[key].parse(f"defence {name}", value, key)
    missing = [key for key, option in options_schema.items() if option.required and key not in options]
    if missing:
        raise SplitlabError(f"defence {name} needs option {', '.join(f'{k}=<value>' for k in missing)}")
    return DefenceSpec(name, options)


def _check_semi_orthogonal(dim: int, shape: tuple[int, ...]) -> None:
    size = math.prod(shape)
    if dim < size:
        raise SplitlabError(f"semi-orthogonal dim={dim} must be at least the input size {size}")
    if size * dim * 8 > MAX_MATRIX_BYTES:
        raise SplitlabError(f"semi-orthogonal dim={dim} needs a {size} x {dim} float64 matrix of "
                            f"{size * dim * 8 / 2**20:.0f} MiB; use dim <= {MAX_MATRIX_BYTES // (8 * size)}")


def _check_patch(patch: int, shape: tuple[int, ...]) -> None:
    if len(shape) != 3:
        raise SplitlabError("patch-orthogonal needs image inputs (C, H, W)")
    if shape[1] % patch or shape[2] % patch:
        raise SplitlabError(f"patch-orthogonal patch={patch} must divide the image size {shape[1]}x{shape[2]}")


_EXAMPLE = "input-dp:epsilon=6,delta=0.5"


def split_specs(text: str) -> list[str]:
    """A comma-separated list of defence specs, where a spec's own options are comma-separated too:
    "none,input-dp:epsilon=6,delta=0.5" -> ["none", "input-dp:epsilon=6,delta=0.5"] (an item that starts with
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
    items = spec.split("+")
    if not all(item.strip() for item in items):
        raise SplitlabError(f"defence spec {spec!r} has an empty item; use none or name[:key=value] items "
                            "joined by +, e.g. orthogonal+input-dp:epsilon=6")
    shape = None if input_shape is None else tuple(input_shape)
    parsed = []
    for item in items:
        defence = parse_item(item, CLIENT_DEFENCES, _EXAMPLE)
        if shape is not None and defence.name == "patch-orthogonal":
            _check_patch(defence.options.get("patch", DEFAULT_PATCH), shape)
        if shape is not None and defence.name == "semi-orthogonal":
            _check_semi_orthogonal(defence.options["dim"], shape)
            shape = (defence.options["dim"],)
        if defence.name != "none":
            parsed.append(defence)
    return parsed


def parse_defences(spec: str, input_shape: tuple[int, ...] = (1, 28, 28),
                   train_images: torch.Tensor | None = None) -> list[ClientDefence]:
    """Build the defences of a spec for inputs of `input_shape` (DP may estimate its sensitivity on
    `train_images`)."""
    defences: list[ClientDefence] = []
    shape = tuple(input_shape)
    for item in parse_spec(spec, shape):
        o = item.options
        seed = o.get("seed", 0)
        if item.name == "orthogonal":
            defence = OrthogonalTransform(shape, seed)
        elif item.name == "semi-orthogonal":
            defence = SemiOrthogonalTransform(shape, o["dim"], seed)
        elif item.name == "patch-orthogonal":
            defence = PatchOrthogonalTransform(shape, o.get("patch", DEFAULT_PATCH), seed)
        elif item.name == "input-dp":
            defence = _dp(o, train_images, seed)
        elif item.name == "activation-noise":
            defence = ActivationNoise(o["sigma"], seed)
        else:
            defence = GradientNoise(o["sigma"], seed)
        shape = defence.input_shape(shape)
        defences.append(defence)
    return defences


def _dp(options: dict[str, int | float], train_images: torch.Tensor | None, seed: int) -> DPInputNoise:
    if "sigma" in options:
        return DPInputNoise(options["sigma"], seed=seed)
    epsilon, delta = options.get("epsilon", DP_EPSILON), options.get("delta", DP_DELTA)
    sensitivity = options.get("sensitivity")
    if sensitivity is None:
        if train_images is None:
            raise SplitlabError("input-dp needs training images to estimate its sensitivity, or sensitivity=<value>")
        sensitivity = estimate_sensitivity(train_images, seed=seed)
    return DPInputNoise(analytic_gaussian_sigma(epsilon, delta, sensitivity), epsilon, delta, sensitivity, seed)


def transformed_shape(defences: list[ClientDefence], shape: tuple[int, ...]) -> tuple[int, ...]:
    for d in defences:
        shape = d.input_shape(shape)
    return tuple(shape)

"""UnSplit (Erdogan et al., WPES'22) as the JAST paper runs it: model inversion plus model stealing.

The adversary is an honest-but-curious server. It knows the client's architecture, not its weights,
and sees the cut-layer activations H = f(X) of a target. It optimises a dummy input X~ (initialised
to the constant 0.5) and a randomly initialised clone f~ of the client, alternating

    input steps:  min_X~  MSE(f~(X~), H) + lambda_tv * TV(X~) + lambda_l2 * mean(X~^2)    (JAST Eq. 1)
    clone steps:  min_f~  MSE(f~(X~), H)                                                   (JAST Eq. 2)

each with Adam(lr, amsgrad=True), for `rounds` rounds of `input_steps` + `clone_steps`. TV is the
squared form of the UnSplit code (see `attacks.engine.priors.tv_squared`). The reconstruction is the
final X~; the paper scores it after per-image min-max normalisation ("MSE X") and reports the final
clone-fit MSE ("MSE Z").

Clone modes:
- `shared`: one clone carried across the targets in turn (the UnSplit/JAST code); each target gets
  fresh optimisers. Targets run one after the other.
- `per-target`: every target has its own clone (seeded per target); all targets run together as
  engine trials.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from attacks.engine import (Adam, Block, CutActivations, EngineResult, MeanSquared, Objective, Prior, Schedule, l2, run,
                            tv_squared)
from vfl.errors import SplitlabError
from vfl.models import arch_spec, build_split

CLONE_MODES = ("shared", "per-target")


@dataclass(frozen=True)
class UnsplitPreset:
    """The attack's settings. Sources are given per preset in `PRESETS`."""
    rounds: int               # outer rounds ("main_iters")
    input_steps: int          # input steps per round ("input_iters")
    clone_steps: int          # clone steps per round ("model_iters")
    lambda_tv: float          # weight of the squared TV prior
    lambda_l2: float          # weight of mean(x^2)
    lr: float = 1e-3          # Adam learning rate, input and clone (amsgrad)
    init: float = 0.5         # constant initial value of the dummy input
    source: str = ""

    @property
    def steps(self) -> int:
        return self.rounds * (self.input_steps + self.clone_steps)


PRESETS: dict[str, UnsplitPreset] = {
    "jast": UnsplitPreset(200, 20, 20, 1.0, 0.1, source=(
        "JAST notebooks and README (github.com/Andron00e/JAST): main_iters 200, input_iters 20, "
        "model_iters 20, lambda_tv 1.0, lambda_l2 0.1, Adam 1e-3 amsgrad")),
    "original": UnsplitPreset(1000, 100, 100, 0.1, 1.0, source=(
        "UnSplit repository defaults (github.com/ege-erdogan/unsplit attacks.py): 1000 x (100 + 100), "
        "lambda_tv 0.1, lambda_l2 1")),
    "quick": UnsplitPreset(50, 20, 20, 1.0, 0.1, source=(
        "CPU smoke preset: the jast weights with a quarter of the rounds (2,000 steps per target)")),
}


def preset(name: str, **overrides) -> UnsplitPreset:
    try:
        chosen = PRESETS[name]
    except KeyError:
        raise SplitlabError(f"unknown UnSplit preset {name!r}; choose one of: {', '.join(PRESETS)}") from None
    return replace(chosen, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class CutObservation:
    """What the honest-but-curious server has: the client's architecture and the activations it sent."""
    arch: str
    cut_layer: int
    input_shape: tuple[int, ...]
    activations: torch.Tensor          # (targets, *activation shape), one row per target


@dataclass
class UnsplitResult:
    reconstructions: torch.Tensor      # final X~ per target, (targets, C, H, W), unclamped
    activation_mse: torch.Tensor       # final clone-fit MSE per target
    activation_mse_mean: torch.Tensor  # trajectory mean of the clone-fit MSE per target (JAST Figure 8)
    diverged: torch.Tensor             # (targets,) bool
    seconds: float
    steps: int


def observe(client, images: torch.Tensor, arch: str, cut_layer: int) -> CutObservation:
    """The activations the client sends for `images` at inference (through its defences)."""
    return CutObservation(arch, cut_layer, tuple(images.shape[1:]), client.infer(images).detach())


def _clone(observation: CutObservation, seed: int) -> nn.Module:
    """A fresh, randomly initialised client of the known architecture (weights unknown to the attacker)."""
    client, _ = build_split(observation.arch, observation.cut_layer, seed=seed)
    return client.to(device=observation.activations.device, dtype=observation.activations.dtype)


def _schedule(settings: UnsplitPreset) -> Schedule:
    optimizer = Adam(settings.lr, amsgrad=True)
    return Schedule((
        Block(("x",), optimizer, settings.input_steps),
        Block(("clone",), optimizer, settings.clone_steps, select=False, terms=("match",)),
    ), rounds=settings.rounds)


def unsplit(observation: CutObservation, settings: UnsplitPreset, clone_mode: str = "per-target",
            seed: int = 0, progress: bool = True) -> UnsplitResult:
    """Reconstruct every target of the observation. Ground truth never enters here."""
    if clone_mode not in CLONE_MODES:
        raise SplitlabError(f"unknown clone mode {clone_mode!r}; use {' or '.join(CLONE_MODES)}")
    spec = arch_spec(observation.arch)
    activations = observation.activations
    device, n = activations.device, activations.shape[0]
    objective = Objective(CutActivations(_clone(observation, seed)), MeanSquared(),
                          priors=(Prior("tv", "x", tv_squared, settings.lambda_tv), Prior("l2", "x", l2, settings.lambda_l2)))
    schedule = _schedule(settings)
    x0 = torch.full((n, 1, *spec.input_shape), settings.init, device=device, dtype=activations.dtype)
    observed = activations.unsqueeze(1)                     # each target is a batch of one

    def clone_params(module: nn.Module, trials: int) -> dict[str, torch.Tensor]:
        return {k: v.detach().unsqueeze(0).expand(trials, *v.shape).clone() for k, v in module.named_parameters()}

    if clone_mode == "per-target":
        clones = [clone_params(_clone(observation, seed + r), 1) for r in range(n)]
        variables = {"x": x0, "clone": {k: torch.cat([c[k] for c in clones]) for k in clones[0]}}
        result = run(objective, variables, {"observed": [observed]}, schedule, per_trial_target=True,
                     progress=progress, description=f"unsplit {observation.arch} per-target")
        return _result(result)

    carried = clone_params(_clone(observation, seed), 1)
    parts: list[EngineResult] = []
    for r in range(n):                                     # one clone, carried from target to target
        result = run(objective, {"x": x0[r:r + 1], "clone": carried}, {"observed": [observed[r:r + 1]]},
                     schedule, per_trial_target=True, progress=progress,
                     description=f"unsplit {observation.arch} shared, target {r + 1}/{n}")
        carried = result.final["clone"]
        parts.append(result)
    merged = EngineResult(
        best={}, final={"x": torch.cat([p.final["x"] for p in parts])}, best_loss=torch.cat([p.best_loss for p in parts]),
        final_terms={k: torch.cat([p.final_terms[k] for p in parts]) for k in parts[0].final_terms},
        diverged=torch.cat([p.diverged for p in parts]),
        trace={k: torch.cat([p.trace[k] for p in parts], dim=1) for k in parts[0].trace},
        steps=schedule.steps, seconds=sum(p.seconds for p in parts), mode="sequential")
    return _result(merged)


def _result(result: EngineResult) -> UnsplitResult:
    return UnsplitResult(
        reconstructions=result.final["x"][:, 0],
        activation_mse=result.final_terms["match"],
        activation_mse_mean=result.trace["match"].mean(0),
        diverged=result.diverged, seconds=result.seconds, steps=result.steps)

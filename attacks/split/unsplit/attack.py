"""UnSplit (Erdogan et al., WPES'22) as the JAST paper runs it: model inversion plus model stealing.

The adversary is an honest-but-curious server. It knows the client's architecture, not its weights,
and sees the cut-layer activations H = f(X) of a target. It optimises a dummy input X~ (initialised
to the constant 0.5) and a randomly initialised clone f~ of the client, alternating

    input steps:  min_X~  MSE(f~(X~), H) + lambda_tv * TV(X~) + lambda_l2 * mean(X~^2)    (JAST Eq. 1)
    clone steps:  min_f~  MSE(f~(X~), H)                                                   (JAST Eq. 2)

each with Adam(lr, amsgrad=True), for `iterations` rounds of `input_steps` + `clone_steps`. TV is the
squared form of the UnSplit code (see `attacks.engine.priors.tv_squared`). The reconstruction is the
final X~; the paper scores it after per-image min-max normalisation ("MSE X") and reports the final
clone-fit MSE ("MSE Z").

Clone modes (`UnsplitSettings.clone`):
- `shared`: one clone carried across the targets in turn (the UnSplit/JAST code); each target gets
  fresh optimisers. Targets run one after the other.
- `per-target`: every target has its own clone (item r of the attacker's clone stream); all targets run
  together as engine trials.

On tabular samples (feature vectors) TV has no neighbouring pixels to smooth: it must be off (`lambda_tv` 0, the
preset `unsplit.tabular`), and a box prior keeps the standardised features to [-box, box] in its place; the
answer is a feature-inference one (trials (T, N, D)), scored per feature.

Against one of K feature parties (`attacks.split.observations.party_view`), the observation is that party's
slice of the joined activations, the clone that party's bottom model architecture on its strip, and X~ that strip only.

Settings: `settings.py`; presets in the spec (`attacks.split.unsplit`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from attacks.kit import (QUIET, Adam, Block, CutActivations, CutObservation, EngineOptions, EngineResult,
                         MeanSquared, Objective, Prior, Reconstruction, Schedule, arch_spec, bottom_model,
                         build_split, l2, outside_box, run, stream_seed, tv_squared)
from attacks.split.unsplit.settings import UnsplitSettings


def clone_of(observation: CutObservation, seed: int, index: int = 0) -> nn.Module:
    """Clone `index`: a fresh client of the known architecture, initialised from the attacker's own random
    stream. The threat model grants the architecture, not the weights: drawing from a stream derived from
    the attack seed (never the seed itself) keeps the clone from being the victim's own initialisation
    when both sides are given the same number. Against one of K parties it is that party's bottom model
    architecture on its strip (`vfl.parties.bottom_model`), from the same attacker stream."""
    clone_seed = stream_seed(seed, "unsplit clone", index)
    if observation.parties == 1:
        # a tabular architecture takes the dataset's width (and its one-hot groups), not its default's
        shape = {"input_shape": observation.input_shape, "groups": observation.groups} \
            if arch_spec(observation.arch).tabular else {}
        client, _ = build_split(observation.arch, observation.cut_layer, seed=clone_seed, **shape)
    else:
        client = bottom_model(observation.arch, observation.cut_layer, clone_seed, observation.parties,
                              observation.party, observation.input_shape, observation.groups)
    return client.to(device=observation.activations.device, dtype=observation.activations.dtype)


def _clone_params(module: nn.Module) -> dict[str, torch.Tensor]:
    """The clone's parameters as one engine trial (leading dimension 1)."""
    return {k: v.detach().unsqueeze(0).clone() for k, v in module.named_parameters()}


@dataclass(frozen=True)
class UnSplit:
    """Model inversion plus model stealing against the cut activations of each target."""
    settings: UnsplitSettings = UnsplitSettings(preset="unsplit.jast")
    name = "unsplit"

    def schedule(self) -> Schedule:
        s = self.settings
        optimizer = Adam(s.lr, amsgrad=True)
        return Schedule((
            Block(("x",), optimizer, s.input_steps),                                       # Eq. 1: match + priors
            Block(("clone",), optimizer, s.clone_steps, select=False, terms=("match",)),   # Eq. 2: match only
        ), rounds=s.iterations)

    def __call__(self, observation: CutObservation, *, seed: int = 0, engine: EngineOptions = QUIET) -> Reconstruction:
        """Reconstruct every target of the observation. Ground truth never enters here."""
        s = self.settings
        spec = arch_spec(observation.arch)
        activations = observation.activations
        n = activations.shape[0]
        tabular = spec.tabular and len(observation.input_shape) == 1
        if tabular:
            s.check_features("tabular samples")
        priors = (Prior("l2", "x", l2, s.lambda_l2),) if tabular else \
            (Prior("tv", "x", tv_squared, s.lambda_tv), Prior("l2", "x", l2, s.lambda_l2))
        if s.lambda_box:
            priors += (Prior("box", "x", functools.partial(outside_box, bound=s.box), s.lambda_box),)
        objective = Objective(CutActivations(clone_of(observation, seed)), MeanSquared(), priors=priors)
        # a party: its strip; a tabular sample: the dataset's width, not the architecture's default
        shape = observation.input_shape if observation.parties > 1 or tabular else spec.input_shape
        x0 = torch.full((n, 1, *shape), s.init, device=activations.device, dtype=activations.dtype)
        observed = activations.unsqueeze(1)                     # each target is a batch of one
        if s.clone == "per-target":
            clones = [_clone_params(clone_of(observation, seed, r)) for r in range(n)]
            variables = {"x": x0, "clone": {k: torch.cat([c[k] for c in clones]) for k in clones[0]}}
            parts = [run(objective, variables, {"observed": [observed]}, self.schedule(),
                         engine.labelled(f"{observation.arch} per-target"), per_trial_target=True, keep=())]
        else:
            carried, parts = _clone_params(clone_of(observation, seed)), []
            for r in range(n):                                 # one clone, carried from target to target
                parts.append(run(objective, {"x": x0[r:r + 1], "clone": carried}, {"observed": [observed[r:r + 1]]},
                                 self.schedule(), engine.labelled(f"{observation.arch} shared, target {r + 1}/{n}"),
                                 per_trial_target=True, keep=()))
                carried = parts[-1].final["clone"]
        return _reconstruction(s, parts, x0, features=tabular)


def _reconstruction(settings: UnsplitSettings, parts: list[EngineResult], x0: torch.Tensor,
                    features: bool = False) -> Reconstruction:
    """The final X~ of every target (the papers score the final iterate), with the clone-fit MSE."""
    def cat(values, dim=0):
        return torch.cat(list(values), dim=dim)

    fit = cat(p.final_terms["match"] for p in parts)
    trace = {k: cat((p.trace[k] for p in parts), dim=1) for k in parts[0].trace}
    return Reconstruction(
        attack="unsplit", preset=settings.preset, trials=cat(p.final["x"] for p in parts), loss=fit, history=trace,
        diverged=cat(p.diverged for p in parts), seconds=sum(p.seconds for p in parts), steps=settings.steps,
        per_target=True, initial=x0, mode=f"{settings.clone} ({parts[0].mode})", features=features,
        extras={"activation_mse_per_target": fit, "activation_mse_trajectory_per_target": trace["match"].mean(0)})

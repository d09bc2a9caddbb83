"""AGIC as the AWA paper's baseline: approximate the whole FedAvg update by one full-batch step.

    Algorithm (Xu et al. 2022, as described in AWA Section 5):
      given theta_0, the update u = theta_0 - theta_E and the labels y
      G(x, y) = eta * grad_theta CE(F(x; theta_0), y) over the client's whole batch (all mini-batches of all
                epochs combined; a multiple of the true first-order update, and scale-free under a cosine)
      x ~ U(0, 1); T Adam steps on  1 - cos_w(G(x, y), u),  w rising linearly over the conv and FC layers
      return x

Settings and their sources: `attacks.hfl.agic.settings.AGICSettings`; presets in `attacks.hfl.agic`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from attacks.kit import (QUIET, Adam, Block, Cosine, EngineOptions, FedAvgObservation, FedAvgUpdate, KnownLabelsFedAvg,
                         LayerGroups, Objective, Reconstruction, Schedule, Snapshots, engine_context, initial_variables,
                         ramp, run)
from attacks.hfl.agic.settings import AGICSettings

__all__ = ["AGIC", "agic_weights"]


def agic_weights(groups: LayerGroups, last_weight: float | None = None) -> list[float]:
    """Per parameter tensor: conv and FC layers k = 1..K weigh 1 + (last - 1)(k - 1)/(K - 1) (last = K by
    default, so k), BN layers and parameters outside any layer 1."""
    ramped = [g for g, kind in enumerate(groups.kinds) if kind in ("conv", "fc")]
    top = float(len(ramped)) if last_weight is None else last_weight
    weights = [1.0] * groups.n_params
    for g, w in zip(ramped, ramp(top, len(ramped))):     # AWA's eq. (24) ramp over them
        for i in groups.members[g]:
            weights[i] = w
    return weights


@dataclass(frozen=True)
class AGIC(KnownLabelsFedAvg):
    settings: AGICSettings = AGICSettings(preset="agic.quick", iterations=300)
    name = "agic"

    def __call__(self, observation: FedAvgObservation, *, seed: int = 0, engine: EngineOptions = QUIET,
                 init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        self.check(observation)
        s = self.settings
        network = observation.model.network
        weights = agic_weights(LayerGroups.of(network), s.last_weight)
        simulator = FedAvgUpdate(network, lr=observation.local_lr, epochs=1, batch_size=observation.batch_size)
        objective = Objective(simulator=simulator, match=Cosine(weights=weights))
        target = {"observed": list(observation.update), "context": engine_context(observation, observation.labels)}
        variables = initial_variables(observation, s.restarts, seed, label_logits=False, init=init,
                                  images=s.initial)
        snapshots = Snapshots(s.trajectory, s.iterations) if s.trajectory else None
        schedule = Schedule((Block(("x",), Adam(s.lr), s.iterations, hooks=(snapshots,) if snapshots else ()),))
        result = run(objective, variables, target, schedule, engine)
        return Reconstruction(attack=self.name, preset=s.preset, trials=result.best["x"], loss=result.best_loss,
                              history=result.trace, diverged=result.diverged, seconds=result.seconds,
                              steps=schedule.steps, initial=variables["x"],
                              labels=observation.labels.to(result.best["x"].device).expand(s.restarts, -1),
                              label_rule="known", extras={"layer_weights": weights},
                              artefacts={"trajectory": snapshots.record(s.restarts)} if snapshots else {})

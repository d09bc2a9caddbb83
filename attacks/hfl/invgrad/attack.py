"""Inverting Gradients: cosine gradient matching with a TV prior, signed Adam, box [0,1], step decay.

    Algorithm (Geiping et al. 2020, Sec. 4; `inversefed.GradientReconstructor`):
      given theta and the client's upload u (FedSGD gradient, or FedAvg update theta_0 - theta_E)
      labels y: known to the server, else recovered (iDLG at B = 1, counting rule above)
      for each restart: x ~ N(0, 1)
        for t in 1..T:  x <- clip_[0,1]( Adam_step( sign( grad_x [ 1 - cos(S(x, y), u) + alpha TV(x) ] ) ) )
                        lr <- 0.1 lr at t = 3T/8, 5T/8, 7T/8
      keep the restart with the lowest loss
    S is the FedSGD gradient, or for FedAvg the unrolled local SGD (`attacks.engine.FedAvgUpdate`,
    mini-batches in index order since the server does not know the client's shuffling).

Settings and their sources: `attacks.hfl.invgrad.settings.InvGradSettings`; presets in `attacks.hfl.invgrad`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from attacks.kit import (QUIET, Adam, Block, BoxClamp, Cosine, EngineOptions, FedAvgUpdate, FedSGDGradient, Objective,
                         Observation, Prior, Reconstruction, Schedule, SignedGradients, StepDecay, UploadAttack,
                         engine_context, initial_variables, recover_labels, run, tv_l1, upload_needs)
from attacks.hfl.invgrad.settings import DEFAULT_TV, InvGradSettings

__all__ = ["InvertingGradients"]


@dataclass(frozen=True)
class InvertingGradients(UploadAttack):
    settings: InvGradSettings = InvGradSettings(preset="invgrad.paper")
    name = "invgrad"
    requires = upload_needs("labels")                  # FedAvg: the unrolled steps need the labels

    def __call__(self, observation: Observation, *, seed: int = 0, engine: EngineOptions = QUIET,
                 init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        self.check(observation)
        s = self.settings
        network = observation.model.network
        if observation.kind == "fedavg":
            simulator = FedAvgUpdate(network, lr=observation.local_lr, epochs=observation.local_epochs,
                                     batch_size=observation.local_batch_size)
            observed, labels, rule = observation.update, observation.labels, "known"
        else:
            simulator, observed = FedSGDGradient(network), observation.gradient
            labels, rule = (observation.labels, "known") if observation.labels is not None \
                else recover_labels(observation)
        tv = DEFAULT_TV if s.tv is None else s.tv
        priors = (Prior("tv", "x", tv_l1, tv),) if tv > 0 else ()
        hooks = ((SignedGradients(),) if s.signed else ()) + ((BoxClamp(0.0, 1.0),) if s.boxed else ())
        decay = StepDecay(tuple(s.decay), s.gamma) if s.decay else None
        schedule = Schedule((Block(("x",), Adam(s.lr), s.iterations, hooks=hooks, decay=decay),))
        objective = Objective(simulator=simulator, match=Cosine(), priors=priors)
        target = {"observed": list(observed), "context": engine_context(observation, labels)}
        variables = initial_variables(observation, s.restarts, seed, label_logits=False, init=init)
        result = run(objective, variables, target, schedule, engine)
        return Reconstruction(attack=self.name, preset=s.preset, trials=result.best["x"], loss=result.best_loss,
                              history=result.trace, diverged=result.diverged, seconds=result.seconds,
                              steps=schedule.steps, initial=variables["x"],
                              labels=labels.to(result.best["x"].device).expand(s.restarts, -1), label_rule=rule)

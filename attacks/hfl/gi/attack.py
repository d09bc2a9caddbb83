"""GradInversion: gradient matching with BatchNorm-statistics, TV and L2 priors, Langevin updates and group
consistency across restarts.

    Algorithm (Yin et al. 2021, Sec. 3; settings and sources in `settings.py`):
      given theta (with its BN running statistics) and the client's FedSGD gradient g
      y  = known labels, or GI's rule on g's final layer (most negative row minima)
      x_r ~ N(0, 1) for each restart r
      for t in 1..T:
        R(x) = scale ||grad L(x, y) - g||^2 + a_tv TV(x) + a_l2 ||x||^2 + a_bn R_BN(x)
        x_r <- clip_[0,1]( Adam_step( grad R(x_r) + 2 a_group (x_r - mean_r x_r) ) ) + lang * lr_t * N(0, 1)
        lr_t: linear warm-up over 50 steps, then a cosine to 0
      return each restart's last iterate; the answer is the restart whose last iterate has the lowest loss
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn

from attacks.kit import (QUIET, Adam, BNStatistics, Block, BoxClamp, EngineOptions, FedSGDGradient, FedSGDObservation,
                         Objective, Prior, Reconstruction, Schedule, SplitlabError, SquaredL2, UploadAttack,
                         engine_context, initial_variables, l2, run, tv_l1, yin_labels)
from attacks.hfl.gi.parts import CosineDecay, GroupConsistency, Langevin
from attacks.hfl.gi.settings import GISettings

__all__ = ["GradInversion"]


@dataclass(frozen=True)
class GradInversion(UploadAttack):
    settings: GISettings = GISettings(preset="gi.paper")
    name = "gi"
    requires = {"fedsgd": ("gradient", "batch_size")}

    def check(self, observation) -> None:
        super().check(observation)
        network = observation.model.network
        if self.settings.bn > 0 and not any(isinstance(m, nn.modules.batchnorm._NormBase) for m in network.modules()):
            raise SplitlabError(f"gi's BatchNorm prior (--bn {self.settings.bn:g}) reads BatchNorm layers, and model "
                                f"{observation.model.arch} has none; use --bn 0 or a BN model (convnet, resnet10)")

    def __call__(self, observation: FedSGDObservation, *, seed: int = 0, engine: EngineOptions = QUIET,
                 init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        self.check(observation)
        s = self.settings
        model = observation.model
        if observation.labels is not None:
            labels, rule = observation.labels, "known"
        else:
            labels, rule = yin_labels(observation), "yin"
        labels = labels.to(model.device)
        priors = tuple(Prior(name, "x", fn, weight) for name, fn, weight in (
            ("tv", tv_l1, s.tv), ("l2", l2, s.l2), ("bn", BNStatistics(model.network, dict(model.params), s.first_bn),
                                                   s.bn)) if weight > 0)
        match = SquaredL2(weights=[s.scale] * len(model.param_names))
        objective = Objective(simulator=FedSGDGradient(model.network), match=match, priors=priors)
        group = s.group_weight > 0 and s.restarts > 1
        hooks = ((GroupConsistency(s.group_weight),) if group else ()) + (BoxClamp(0.0, 1.0),)
        if s.langevin > 0:
            hooks += (Langevin(s.langevin, s.lr, s.iterations, s.warmup, seed=seed + 1),)
        schedule = Schedule((Block(("x",), Adam(s.lr), s.iterations, hooks=hooks, decay=CosineDecay(s.warmup)),))
        variables = initial_variables(observation, s.restarts, seed, label_logits=False, init=init)
        target = {"observed": list(observation.gradient), "context": engine_context(observation, labels)}
        result = run(objective, variables, target, schedule, engine)
        # the last iterate, as GradInversion returns it (a prior that only grows keeps the lowest loss at the start)
        return Reconstruction(attack=self.name, preset=s.preset, trials=result.final["x"].detach(),
                              loss=result.final_loss(objective.weights()),
                              history=result.trace, diverged=result.diverged, seconds=result.seconds,
                              steps=schedule.steps, initial=variables["x"], labels=labels.expand(s.restarts, -1),
                              label_rule=rule)

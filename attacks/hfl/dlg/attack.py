"""DLG and iDLG: match the observed FedSGD gradient with L-BFGS on dummy data (and dummy labels).

    Algorithm (Zhu et al. 2019, Alg. 1; Zhao et al. 2020):
      given the global weights theta and the client's gradient g (one FedSGD upload)
      x' ~ N(0, 1), l' ~ N(0, 1)                       (iDLG: y' = argmin_i rowsum(g_W_last)_i)
      repeat `iterations` times: L-BFGS step on
          D(x', l') = sum_layers || grad_theta CE(F(x'; theta), softmax(l')) - g ||^2
      return x' (and argmax l')

Settings and their sources: `attacks.hfl.dlg.settings.DLGSettings`; presets in `attacks.hfl.dlg` (the spec).
Restarts are engine trials, run together or one after another as the engine options say.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from attacks.kit import (LBFGS, QUIET, Block, EngineOptions, FedSGDGradient, FedSGDObservation, Objective,
                         Reconstruction, Schedule, SquaredL2, check_requirements, engine_context, initial_variables,
                         recover_labels, run)
from attacks.hfl.dlg.settings import DLGSettings

__all__ = ["DLG"]


@dataclass(frozen=True)
class DLG:
    """DLG (labels optimised jointly) or iDLG (labels recovered analytically), by `settings.labels`."""
    settings: DLGSettings = DLGSettings(preset="dlg.original")

    @property
    def name(self) -> str:
        return self.settings.attack

    @property
    def requires(self) -> tuple[str, ...]:
        needs = ("gradient", "batch_size")
        return needs + ("final_linear",) if self.settings.labels == "analytic" else needs

    def check(self, observation) -> None:
        check_requirements(self.name, self.requires, observation)

    def __call__(self, observation: FedSGDObservation, *, seed: int = 0, engine: EngineOptions = QUIET,
                 init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        self.check(observation)
        s = self.settings
        joint = s.labels == "joint"
        labels, rule = (None, "joint") if joint else recover_labels(observation)
        variables = initial_variables(observation, s.restarts, seed, label_logits=joint, init=init)
        objective = Objective(simulator=FedSGDGradient(observation.model.network), match=SquaredL2())
        target = {"observed": list(observation.gradient), "context": engine_context(observation, labels)}
        update = ("x", "label_logits") if joint else ("x",)
        optimiser = LBFGS(lr=s.lr, max_iter=s.max_iter, history_size=s.history_size)
        schedule = Schedule((Block(update, optimiser, s.iterations),))
        result = run(objective, variables, target, schedule, engine, keep=update)
        if joint:
            restart_labels = result.best["label_logits"].argmax(-1)
        else:
            restart_labels = labels.to(result.best["x"].device).expand(s.restarts, -1)
        return Reconstruction(attack=self.name, preset=s.preset, trials=result.best["x"], loss=result.best_loss,
                              history=result.trace, diverged=result.diverged, seconds=result.seconds,
                              steps=schedule.steps, initial=variables["x"], labels=restart_labels, label_rule=rule)

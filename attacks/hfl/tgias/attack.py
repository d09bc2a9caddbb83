"""TGIAs-RO: gradient inversion from T temporal gradients of the same batch, with robust aggregation.

    Algorithm (Li et al., TGIAs-RO, Algorithm 1 and Eq. 5):
      given the uploads g_t = grad_{w_t} L(w_t, D) of one batch at the global weights w_t, t = 1..T
      Step I:  y <- known labels, or last-layer label optimisation on g_1..g_T (or g_1 alone)
      f_t(x) = sum_l omega_l || grad_{w_t^l} L(w_t; x, y) - g_t^l ||^2
      x^0: N(0, 1) on the pixels, in normalised-MNIST units, or zero (`start`)
      joint:        x ~ N(0, 1);  L-BFGS on sum_t f_t(x) / T  (+ tv * TV(x), Table IX)    (Eq. 5)
      Algorithm 1:  x^0 ~ N(0, 1)  (copy_starts="distinct": one draw per copy, Table VII's Single + RA)
                    for s = 1..R_g:
                      Step II  (all t at once): x_t <- x^{s-1};  R_l L-BFGS steps on f_t(x_t)
                      Step III: x^s <- RobustAgg(x_1, ..., x_T)    (mean, median, trimmed, Krum)
      return RobustAgg over the copies' best iterates (the joint form: its best iterate)

Algorithm 1 runs the T copies as engine trials, each with its own target (`per_trial_target=True`), and
Step III as the schedule's consensus between rounds. The joint form is one trial whose simulator
evaluates the T gradients together (`temporal.py`). Settings and sources: `settings.py`; presets in the spec
(`attacks.hfl.tgias`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from attacks.kit import (LBFGS, QUIET, Block, Consensus, EngineOptions, FedSGDGradient, Objective, Prior,
                         Reconstruction, RoundLog, Schedule, SplitlabError, SquaredL2, check_requirements,
                         initial_variables, run, tv_l1)
from attacks.hfl.tgias.aggregators import aggregator
from attacks.hfl.tgias.label_optimisation import LABEL_FEATURES, optimise_labels
from attacks.hfl.tgias.settings import MNIST_MEAN, MNIST_STD, TGIAsSettings
from attacks.hfl.tgias.temporal import TemporalFedSGDGradient, TemporalSquaredL2

__all__ = ["TGIAsRO", "layer_ramp", "start_images"]


def layer_ramp(network: torch.nn.Module) -> list[float]:
    """omega per parameter tensor: l / L for the l-th of the L modules that own parameters (input first)."""
    owners = [name.rpartition(".")[0] for name, _ in network.named_parameters()]
    order = list(dict.fromkeys(owners))
    return [(order.index(o) + 1) / len(order) for o in owners]


def _stack(tensors) -> torch.Tensor:
    return torch.stack(list(tensors))


@dataclass(frozen=True)
class TGIAsRO:
    settings: TGIAsSettings = TGIAsSettings(preset="tgias-ro.paper")
    name = "tgias-ro"

    @property
    def requires(self) -> tuple[str, ...]:
        return ("rounds", "gradient", "batch_size")

    def check(self, observation) -> None:
        check_requirements(self.name, self.requires, observation)
        if "labels" not in observation.provides:
            check_requirements(self.name, ("final_linear",), observation)
        if self.settings.start == "mnist-units" and observation.model.input_shape[0] != 1:
            raise SplitlabError(f"--start mnist-units draws in normalised-MNIST units, for one-channel images; "
                                f"these have {observation.model.input_shape[0]} channels")
        if len(observation.rounds) < self.settings.temporal:
            raise SplitlabError(f"attack {self.name} uses {self.settings.temporal} temporal gradients but the log "
                                f"holds {len(observation.rounds)}")

    def labels(self, log: RoundLog, seed: int) -> tuple[torch.Tensor, str]:
        """Known labels where the server has them, else last-layer label optimisation on the T uploads (Step I;
        `label_gradients="first"`: on the first alone)."""
        first = log.rounds[0]
        if first.labels is not None:
            return first.labels, "known"
        s = self.settings
        uploads = log.rounds[:s.temporal] if s.label_gradients == "all" else log.rounds[:1]
        return optimise_labels(uploads, steps=s.label_steps, seed=seed), "optimised"

    def __call__(self, observation: RoundLog, *, seed: int = 0, engine: EngineOptions = QUIET,
                 init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        self.check(observation)
        s = self.settings
        uploads = observation.rounds[:s.temporal]
        labels, rule = self.labels(observation, seed)
        network = observation.model.network
        labels = labels.to(observation.model.device)
        ramp = layer_ramp(network) if s.ramp else None
        optimiser = LBFGS(lr=s.lr, max_iter=s.max_iter, history_size=s.history_size)
        params = {k: _stack(u.model.params[k] for u in uploads) for k in observation.model.param_names}
        buffers = dict(observation.model.buffers)
        observed = [_stack(layer) for layer in zip(*(u.gradient for u in uploads))]
        distinct = s.copy_starts == "distinct" and s.aggregator != "joint"
        starts = initial_variables(observation, s.temporal if distinct else 1, seed, label_logits=False, init=init)
        if "x" not in (init or {}):
            starts = {"x": start_images(s.start, starts["x"])}
        first = {"x": starts["x"][:1]} if distinct else starts
        engine = engine.labelled(f"{s.aggregator} T={s.temporal}")
        priors = (Prior("tv", "x", tv_l1, s.tv),) if s.tv > 0 else ()
        joint_objective = Objective(TemporalFedSGDGradient(network, vectorised=not engine.sequential),
                                    TemporalSquaredL2([1.0 / s.temporal] * s.temporal, ramp), priors)
        joint_target = {"observed": observed, "context": {"params": params, "buffers": buffers, "labels": labels}}
        if s.aggregator == "joint":
            schedule = Schedule((Block(("x",), optimiser, s.local_steps),), rounds=s.iterations)
            result = run(joint_objective, first, joint_target, schedule, engine)      # one trial
            answer = result.best["x"]
        else:
            combine = aggregator(s.aggregator, beta=s.trim, f=s.f)
            copies = {"x": starts["x"].expand(s.temporal, *starts["x"].shape[1:]).clone()}
            target = {"observed": observed,
                      "context": {"params": params, "buffers": {k: _stack([v] * s.temporal) for k, v in buffers.items()},
                                  "labels": labels.expand(s.temporal, -1)}}
            consensus = Consensus(("x",), lambda v, alive: {"x": _agree(combine, v["x"], alive).expand_as(v["x"])},
                                  reset=s.reset)
            schedule = Schedule((Block(("x",), optimiser, s.local_steps),), rounds=s.iterations, consensus=consensus)
            objective = Objective(FedSGDGradient(network), SquaredL2(weights=ramp), priors)
            # the copies run together: the consensus needs every copy at once (the check refuses sequential)
            result = run(objective, copies, target, schedule, engine, per_trial_target=True)
            answer = _agree(combine, result.best["x"], ~result.diverged).unsqueeze(0)
        with torch.no_grad():
            loss = joint_objective({"x": answer[0]}, joint_target, ("match",))["match"].reshape(1)
        diverged = ~torch.isfinite(loss)
        return Reconstruction(attack=self.name, preset=s.preset, trials=answer, loss=loss, history=result.trace,
                              diverged=diverged, seconds=result.seconds, steps=schedule.steps, initial=first["x"],
                              labels=labels.expand(1, -1), label_rule=rule,
                              extras={"temporal": s.temporal, "aggregator": s.aggregator,
                                      "copies_diverged": int(result.diverged.sum()),
                                      **({"label_features": LABEL_FEATURES} if rule == "optimised" else {})})


def start_images(kind: str, z: torch.Tensor) -> torch.Tensor:
    """x^0 from the seeded N(0, 1) draw z: z itself, z in normalised-MNIST units read as pixels, or zeros."""
    if kind == "mnist-units":
        return MNIST_MEAN + MNIST_STD * z
    return torch.zeros_like(z) if kind == "zero" else z


def _agree(combine, points: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """RobustAgg over the copies that are alive and finite (a diverged copy holds no answer and does not
    vote). One host read per aggregation: the number of voters sets the aggregate's input shape."""
    chosen = points[alive & points.flatten(1).isfinite().all(1)]       # boolean indexing: the one read
    return combine(chosen) if len(chosen) else points[0]

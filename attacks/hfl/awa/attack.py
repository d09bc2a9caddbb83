"""AWA: the approximate and weighted attack on a FedAvg client's model update.

    Algorithm (Song, Wang, Zuazua, arXiv 2308.06822, Algorithm 2):
      given theta_0, the update u = theta_0 - theta_E, the client's E, mini-batch size M (B = N / M
      mini-batches per epoch), local lr eta, and the labels y
      1  replication: exact when E = 1 or B = 1 (unroll E epochs of B steps on the dummy batch, split in
         index order); else interpolate (eqs. 19-20): start at theta~_{e-1} = theta_0 - ((e-1)/E) u and
         match u~ = u / E with B steps of one epoch e
      2  layers: conv / BN / FC modules in forward order, ramps per type (eq. 24)
      3  RecAttack(Q): x ~ U(0, 1); T Adam steps on
             l_Q(x) = sum_l q^(l) || G(x, y)^(l) - u~^(l) ||^2            (eq. 23)
         with q^(l) = q_en on the layers whose update mean and variance are both among the worst
         matched (eqs. 25-30, recomputed every step); f(Q) = the unweighted mismatch at the result
      4  Q: fixed, or Bayesian optimisation over the Table II box (GP + expected improvement, the first
         trials random), then RecAttack(Q*) once more; answer = the lower-f of that and the best trial

Settings and their sources: `attacks.hfl.awa.settings.AWASettings`; presets in `attacks.hfl.awa` (among them
`awa.dlg`, the paper's DLG baseline: every q = 1, exact replay only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

from attacks.kit import (QUIET, Adam, Block, EngineOptions, FedAvgObservation, FedAvgUpdate, KnownLabelsFedAvg,
                         LayerGroups, Objective, Reconstruction, Schedule, Snapshots, SplitlabError, SquaredL2,
                         epoch_problem, initial_variables, parameter_leaves, plan_replication, run)
from attacks.hfl.awa.bo import bayes_optimise
from attacks.hfl.awa.match import Q_NAMES, EnhancedSquaredL2
from attacks.hfl.awa.settings import AWASettings, Q_BOX

__all__ = ["AWA"]


@dataclass(frozen=True)
class Bound:
    """A simulator with its context fixed (shared by every trial) and its output scaled.

    Lets trials differ only in what the target holds per trial (AWA's Q) without batching the model's
    weights under vmap, which would turn every convolution into a per-trial one.
    """
    simulator: Callable[[Mapping[str, Any], Mapping[str, Any]], list[torch.Tensor]]
    context: Mapping[str, Any]
    scale: float = 1.0

    def __call__(self, variables: Mapping[str, Any], context: Mapping[str, Any]) -> list[torch.Tensor]:
        out = self.simulator(variables, self.context)
        return out if self.scale == 1.0 else [t * self.scale for t in out]


@dataclass(frozen=True, eq=False)
class _Problem:
    """What every RecAttack of one observation shares: the bound simulator, the matched update, the layers."""
    simulator: Bound
    observed: list[torch.Tensor]
    groups: LayerGroups
    replication: str
    objectives: dict = field(default_factory=dict, repr=False)
    """One objective per eps, kept so that BO's batches reuse its compiled programs."""

    def attack(self, qs: torch.Tensor, x0: torch.Tensor, iterations: int, lr: float, eps: float, engine: EngineOptions,
               answer: str = "best", snapshots: Snapshots | None = None):
        """RecAttack for each row of `qs` (trials), from `x0`; returns the engine result, each trial's answer
        (its lowest-loss iterate, or with `answer="final"` its last one, as Algorithm 2) and f(Q) there."""
        trials = qs.shape[0]
        if eps not in self.objectives:
            self.objectives[eps] = Objective(simulator=self.simulator, match=EnhancedSquaredL2(self.groups, eps))
        objective = self.objectives[eps]
        match = objective.match
        target = {"observed": match.target(self.observed, qs, trials)}
        schedule = Schedule((Block(("x",), Adam(lr), iterations, hooks=(snapshots,) if snapshots else ()),))
        result = run(objective, {"x": x0}, target, schedule, engine, per_trial_target=True)
        xs = result.final["x"].detach() if answer == "final" else result.best["x"]
        return result, xs, self.mismatch(xs, result.diverged)

    @torch.no_grad()
    def mismatch(self, xs: torch.Tensor, diverged: torch.Tensor) -> torch.Tensor:
        """f(Q): sum_l ||G(x) - u~||^2 (every weight 1) at each trial's result; +inf where it diverged."""
        values = [SquaredL2()(self.simulator({"x": x}, {}), self.observed) for x in xs]
        f = torch.stack(values).to(xs.dtype)
        return torch.where(diverged | ~torch.isfinite(f), torch.full_like(f, float("inf")), f)


@dataclass(frozen=True)
class AWA(KnownLabelsFedAvg):
    settings: AWASettings = AWASettings(preset="awa.quick", iterations=300)
    name = "awa"

    def check(self, observation) -> None:
        super().check(observation)
        self.plan(observation)

    def plan(self, observation: FedAvgObservation):
        """The dispatcher's choice for this observation (SplitlabError when the settings refuse it)."""
        s = self.settings
        try:
            return plan_replication(observation.local_epochs, observation.batch_size, observation.local_batch_size,
                                    s.replication, s.target_epoch)
        except ValueError as exc:
            raise SplitlabError(f"{self.name} ({s.preset}): {exc}") from None

    def problem(self, observation: FedAvgObservation) -> _Problem:
        s, model = self.settings, observation.model
        plan = self.plan(observation)
        start, matched = epoch_problem(model.params, observation.update, plan)
        scale = 1.0 / observation.local_lr if s.scale_by_lr else 1.0
        context = {"params": parameter_leaves(start), "buffers": dict(model.buffers),
                   "labels": observation.labels.to(model.device)}
        simulator = FedAvgUpdate(model.network, lr=observation.local_lr, epochs=plan.epochs, batch_size=plan.batch_size)
        return _Problem(Bound(simulator, context, scale), [u * scale for u in matched],
                        LayerGroups.of(model.network, s.grouping), plan.method)

    def __call__(self, observation: FedAvgObservation, *, seed: int = 0, engine: EngineOptions = QUIET,
                 init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        """`init` overrides the dummy start: x of shape (restarts, ...) without BO, (2, ...) with it (the
        BO trials' start, the re-run's start)."""
        self.check(observation)
        s = self.settings
        problem = self.problem(observation)
        groups = problem.groups
        extras = {"replication": problem.replication, "target_epoch": s.target_epoch if
                  problem.replication == "interpolation" else None, "layers": groups.layers,
                  "layer_counts": {k: groups.count(k) for k in ("conv", "bn", "fc")}}
        dtype, device = observation.model.dtype, observation.model.device
        artefacts: dict = {}
        if s.bo_trials:
            x0 = initial_variables(observation, 2, seed, label_logits=False, init=init,
                                  images=s.initial)["x"]
            trials, f, history, seconds, steps, diverged, bo = self._optimise(problem, x0, seed, engine, artefacts)
            extras["bo"] = bo
            q_used = bo["q_star"]
        else:
            x0 = initial_variables(observation, s.restarts, seed, label_logits=False, init=init,
                                  images=s.initial)["x"]
            qs = torch.tensor(s.q, dtype=dtype, device=device).expand(s.restarts, len(Q_NAMES))
            snapshots = Snapshots(s.trajectory, s.iterations) if s.trajectory else None
            result, trials, f = problem.attack(qs, x0, s.iterations, s.lr, s.eps, engine, s.answer, snapshots)
            if snapshots:
                artefacts["trajectory"] = snapshots.record(s.restarts)
            history, seconds, steps, diverged = result.trace, result.seconds, result.steps, result.diverged
            q_used = dict(zip(Q_NAMES, s.q))
        extras["q"] = q_used
        ok = torch.isfinite(f)
        extras["f"] = float(f[ok].min()) if bool(ok.any()) else None
        labels = observation.labels.to(device).expand(trials.shape[0], -1)
        return Reconstruction(attack=self.name, preset=s.preset, trials=trials, loss=f, history=history,
                              diverged=diverged, seconds=seconds, steps=steps, initial=self._starts(x0, len(trials)),
                              labels=labels, label_rule="known", extras=extras, artefacts=artefacts)

    def _starts(self, x0: torch.Tensor, trials: int) -> torch.Tensor:
        """Each trial's dummy start: x0 itself, or with BO x0[0] for every BO trial and x0[1] for the re-run."""
        if not self.settings.bo_trials:
            return x0
        return torch.cat([x0[:1].expand(trials - 1, *x0.shape[1:]), x0[1:]])

    def _optimise(self, problem: _Problem, x0: torch.Tensor, seed: int, engine: EngineOptions, artefacts: dict):
        """BO over Q: every trial starts from x0[0]; then the re-run with Q* from x0[1] (the one run whose
        trajectory is recorded, into `artefacts`)."""
        s = self.settings
        iterations = s.bo_iterations or s.iterations
        kept: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        seconds = 0.0

        def evaluate(qs: torch.Tensor) -> torch.Tensor:
            nonlocal seconds
            start = x0[:1].expand(len(qs), *x0.shape[1:])
            phase = engine.labelled(f"BO trials {len(kept) + 1}-{len(kept) + len(qs)}")
            result, xs, f = problem.attack(qs.to(x0), start, iterations, s.lr, s.eps, phase, s.answer)
            seconds += result.seconds
            kept.extend(zip(xs, f, result.trace["match"].T, result.diverged))
            return f.cpu()

        trace = bayes_optimise(evaluate, trials=s.bo_trials, random=s.random_trials, box=Q_BOX, names=Q_NAMES, seed=seed)
        q_star = torch.tensor([trace.best_params], dtype=x0.dtype, device=x0.device)
        snapshots = Snapshots(s.trajectory, s.iterations) if s.trajectory else None
        result, xs, f = problem.attack(q_star, x0[1:], s.iterations, s.lr, s.eps, engine.labelled("Q*"), s.answer,
                                       snapshots)
        if snapshots:
            artefacts["trajectory"] = snapshots.record(1, first=len(kept))
        seconds += result.seconds
        kept.append((xs[0], f[0], result.trace["match"][:, 0], result.diverged[0]))
        xs, fs, curves, diverged = zip(*kept)
        longest = max(len(c) for c in curves)
        history = torch.full((longest, len(curves)), float("nan"), dtype=curves[0].dtype, device=curves[0].device)
        for t, c in enumerate(curves):
            history[:len(c), t] = c
        bo = trace.record()
        bo.update(iterations=iterations, rerun_trial=len(kept) - 1, q_star=dict(zip(Q_NAMES, trace.best_params)))
        steps = iterations * (len(trace.batches)) + s.iterations
        return torch.stack(xs), torch.stack(fs), {"match": history}, seconds, steps, torch.stack(diverged), bo

"""Bayesian optimisation of AWA's Q (paper Section 4.3): a Gaussian-process surrogate with expected
improvement over a box, the first trials drawn at random, via Optuna's `GPSampler`.

The random trials are asked for all at once and evaluated together (one batched engine run); the GP
trials one at a time, each seeing every earlier result. Optuna is imported here, when BO runs, so other
commands do not pay for it.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

__all__ = ["BOTrace", "bayes_optimise", "best_so_far"]


def best_so_far(values: Sequence[float]) -> list[float]:
    """The cumulative minimum of f over trials (the paper's Fig. 1), non-finite values skipped."""
    out, best = [], math.inf
    for v in values:
        if math.isfinite(v):
            best = min(best, v)
        out.append(best)
    return out


@dataclass
class BOTrace:
    """Every trial in order: its Q, f(Q), and whether it was drawn at random."""
    names: tuple[str, ...]
    params: list[tuple[float, ...]] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    random: list[bool] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    """Trials per engine run (the random ones together, then one per GP trial)."""

    @property
    def best_index(self) -> int:
        finite = [i for i, v in enumerate(self.values) if math.isfinite(v)]
        if not finite:
            raise ValueError("every BO trial diverged")
        return min(finite, key=lambda i: self.values[i])

    @property
    def best_params(self) -> tuple[float, ...]:
        return self.params[self.best_index]

    def record(self) -> dict:
        """For metrics.json: per-trial lists and a few scalars."""
        finite_random = [v for v, r in zip(self.values, self.random) if r and math.isfinite(v)]
        return {"trials": len(self.values), "random": sum(self.random), "best_trial": self.best_index,
                "f_best": self.values[self.best_index],
                "f_random_median": statistics.median(finite_random) if finite_random else None,
                "best_after_random": self.best_index >= sum(self.random),
                "f_per_trial": [v if math.isfinite(v) else None for v in self.values],
                "f_best_so_far": [v if math.isfinite(v) else None for v in best_so_far(self.values)],
                "q_per_trial": [dict(zip(self.names, p)) for p in self.params]}


def bayes_optimise(evaluate: Callable[[torch.Tensor], torch.Tensor], *, trials: int, random: int,
                   box: Sequence[tuple[float, float]], names: Sequence[str], seed: int = 0) -> BOTrace:
    """Minimise f over the box: `random` random trials (evaluated as one batch), then `trials - random` GP
    trials. `evaluate` maps Q values (k, d) to f (k,); a non-finite f is a failed trial the GP ignores."""
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState

    if not 1 <= random <= trials:
        raise ValueError(f"need 1 <= random trials ({random}) <= trials ({trials})")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)        # no log line per trial; restored below
    try:
        sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=random)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        space = {n: FloatDistribution(lo, hi) for n, (lo, hi) in zip(names, box)}
        trace = BOTrace(tuple(names))
        pending = random
        while len(trace.values) < trials:
            asked = [study.ask(space) for _ in range(pending)]
            qs = torch.tensor([[t.params[n] for n in names] for t in asked], dtype=torch.float64)
            values = [float(v) for v in evaluate(qs)]
            for t, q, v in zip(asked, qs.tolist(), values):
                if math.isfinite(v):
                    study.tell(t, v)
                else:
                    study.tell(t, state=TrialState.FAIL)
                trace.params.append(tuple(q))
                trace.values.append(v)
                trace.random.append(len(trace.random) < random)
            trace.batches.append(len(asked))
            pending = 1
        return trace
    finally:
        optuna.logging.set_verbosity(verbosity)

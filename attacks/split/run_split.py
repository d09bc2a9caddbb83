"""The one split experiment: how `splitlab attack NAME`, the Python API and sweeps run a split attack, whichever
family it belongs to.

- `prepare`: the attack from its spec and settings, the case (the config's victim: the split case with the
  family's defaults) and its data, loaded by the family (`SplitFamily.load`); nothing written.
- `execute`: the family's side trains the case through the protocol in the server role the attack needs, or
  opens the honest client's session with the malicious server, and hands over what the attack observes, the
  truth it is scored on and what metrics.json records of the victim (`SplitFamily.observe`, a context: FSHA's
  victim stays connected while the attack runs). The attack runs on it, is scored and written through the one
  driver (`attacks.driver.attack_and_score`), then the family writes what is its own (`Observed.after`).
- `summary`: the family's human line.

A family (the label attacks and the backdoors, UnSplit, FSHA, feature inference) keeps only what is its own: a
`SplitFamily`, which a plug-in writes from the kit.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Protocol

from attacks.driver import Outcome, Truth, attack_and_score
from attacks.split.experiment import Experiment
from vfl.runs import Run

__all__ = ["Observed", "SplitFamily", "Prepared", "attack_observed", "split_experiment"]


@dataclass(frozen=True, eq=False)
class Observed:
    """What a family's side of a run hands the driver."""
    observation: Any
    """What the attacking party has, granted as the attack's spec and needs say."""
    truth: Truth
    """The referee's ground truth, never shown to the attack."""
    facts: dict[str, Any]
    """What metrics.json records of the victim (its task accuracy, its setting, what its defences did)."""
    title: str
    seed: int
    """The attack's seed."""
    call: dict[str, Any] = field(default_factory=dict)
    """Keywords the attack takes beyond the contract's (FSHA's round monitor)."""
    after: Callable[[Outcome, Run | None], None] | None = None
    """What the family writes once the attack is scored (UnSplit's strips figure)."""


class SplitFamily(Protocol):
    """What a family of split attacks keeps of its own."""

    def load(self, config: Any, attack: Any) -> tuple[Any, Any]:
        """(the victim, its data): checked and loaded, nothing written."""

    def observe(self, prepared: "Prepared", run: Run | None, progress: bool) -> ContextManager[Observed]:
        """Train (or load) the case in the server role the attack needs and yield what it observes."""

    def record(self, prepared: "Prepared") -> dict[str, Any]:
        """What config.json records of the run."""

    def summary(self, prepared: "Prepared", outcome: Outcome, run: Run) -> Callable:
        """The human line (`console -> None`)."""


@dataclass(frozen=True, eq=False)
class Prepared:
    """A split attack's run, prepared: its config, the attack, the victim and its data, and its family."""
    config: Any
    attack: Any
    victim: Any
    data: Any
    family: SplitFamily

    def record(self) -> dict[str, Any]:
        return self.family.record(self)


def attack_observed(spec: Any, attack: Any, observed: Observed, run: Run | None, *, lpips=None, fid=None,
                    progress: bool = True) -> Outcome:
    """The attack on what it observed, scored against the truth and written (the one driver), then the family's
    own files."""
    outcome = attack_and_score(spec, attack, observed.observation, observed.truth, run=run, seed=observed.seed,
                               progress=progress, lpips=lpips, fid=fid, facts=observed.facts, title=observed.title,
                               call=observed.call)
    if observed.after is not None:
        observed.after(outcome, run)
    return outcome


def _prepare(family: SplitFamily, config: Any) -> Prepared:
    attack = type(config).bound_spec.make(config.settings)
    victim, data = family.load(config, attack)
    return Prepared(config, attack, victim, data, family)


def _execute(family: SplitFamily, prepared: Prepared, run: Run | None, *, lpips=None, fid=None,
             progress: bool = True) -> Outcome:
    with family.observe(prepared, run, progress) as observed:
        return attack_observed(type(prepared.config).bound_spec, prepared.attack, observed, run, lpips=lpips,
                               fid=fid, progress=progress)


def split_experiment(config: type, family: SplitFamily) -> Experiment:
    """The one split experiment for `config` (a `SplitConfig` subclass naming its attack) and its family."""
    return Experiment(config, functools.partial(_prepare, family), functools.partial(_execute, family),
                      family.summary)

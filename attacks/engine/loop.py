"""The engine's one optimisation loop.

A run optimises variables (dummy inputs, label logits, clone weights) for R independent trials
(restarts, targets, temporal copies) held along a leading trial dimension. In `batched` mode the
per-trial objective is `vmap`-ed over trials, so all trials advance in one computation; in
`sequential` mode each trial runs on its own, unbatched (for checking, and for models vmap cannot
take). A schedule is a list of blocks repeated for some rounds; each block updates some variables
with its own optimiser, hooks and weighted objective. The loop keeps per-trial state on the device:
the best iterate, the loss trace, and a divergence flag (a non-finite loss freezes that trial and
marks it diverged; the other trials go on).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.func import vmap

from attacks.engine.lbfgs import BatchedLBFGS
from attacks.engine.matches import subset_of, weighted_sum
from attacks.engine.objective import Objective
from attacks.engine.optim import LBFGS, Hook, OptimizerSpec, StepDecay
from vfl.progress import progress_bar
from vfl.runtime import wait_for

Variables = dict[str, Any]          # name -> tensor (R, ...) or dict of tensors (R, ...)


@dataclass(frozen=True)
class Block:
    """`steps` optimiser steps on the variables named in `update`, minimising the objective's weighted
    terms (`terms`: the names to include, None for the match and every prior).

    A combination the optimiser cannot honour is refused here, when the block is built: L-BFGS takes
    its own steps from raw gradients, so it runs no gradient-transforming hook and no step decay.
    """
    update: tuple[str, ...]
    optimizer: OptimizerSpec
    steps: int
    hooks: tuple[Hook, ...] = ()
    decay: StepDecay | None = None
    select: bool = True
    """Whether this block's loss decides each trial's best iterate."""
    terms: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"a block needs steps >= 0, got {self.steps}")
        if isinstance(self.optimizer, LBFGS):
            transforming = [type(h).__name__ for h in self.hooks if type(h).on_grads is not Hook.on_grads]
            if transforming:
                raise ValueError(f"L-BFGS cannot apply gradient hooks ({', '.join(transforming)}); use Adam or SGD, "
                                 "or keep only after-step hooks such as BoxClamp")
            if self.decay is not None:
                raise ValueError("L-BFGS takes no step decay; use Adam or SGD for a decayed learning rate")


@dataclass(frozen=True)
class Consensus:
    """Between rounds, overwrite variables of every trial with an agreement over the trials (TGIAs-RO's
    data-space aggregation of its temporal copies): `combine(name -> (R, ...), alive (R,) bool) -> name ->
    (R, ...)`; a trial that diverged is not alive and must not vote.

    The values are written in place, so an optimiser may carry its state across the jump (`reset=False`)
    or start afresh every round (`reset=True`; L-BFGS history carried over such a jump can blow up). With
    a reset, every trial starts the next round alive from the agreed point.
    """
    names: tuple[str, ...]
    combine: Callable[[dict[str, torch.Tensor], torch.Tensor], dict[str, torch.Tensor]]
    reset: bool = True


@dataclass(frozen=True)
class Schedule:
    blocks: tuple[Block, ...]
    rounds: int = 1
    consensus: Consensus | None = None
    """Called after every round (the last one included); None: the trials stay independent."""

    def __post_init__(self) -> None:
        if self.consensus is not None and self.consensus.reset and any(b.decay for b in self.blocks):
            raise ValueError("a consensus that resets optimiser state cannot keep a step decay")

    @property
    def steps(self) -> int:
        return self.rounds * sum(b.steps for b in self.blocks)


@dataclass
class EngineResult:
    best: dict[str, Any]                 # kept variables at each trial's best iterate
    final: dict[str, Any]                # every variable after the last step
    best_loss: torch.Tensor              # (R,)
    final_terms: dict[str, torch.Tensor]  # objective terms at the final iterate, (R,)
    diverged: torch.Tensor               # (R,) bool
    trace: dict[str, torch.Tensor]       # term -> (steps, R), every step of every block
    steps: int
    seconds: float
    mode: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return int(self.diverged.shape[0])

    def final_loss(self, weights: Mapping[str, float]) -> torch.Tensor:
        """(R,) the objective at the final iterate, with these term weights (`Objective.weights`)."""
        return _weighted(self.final_terms, weights)


# --- small pytree helpers (variables are tensors or one level of dicts of tensors) ----------------

def _leaves(variables: Mapping[str, Any], names: Sequence[str]) -> list[torch.Tensor]:
    out = []
    for name in names:
        value = variables[name]
        out.extend(value.values() if isinstance(value, dict) else [value])
    return out


def _replace(variables: Mapping[str, Any], names: Sequence[str], values: Sequence[torch.Tensor]) -> Variables:
    out, it = dict(variables), iter(values)
    for name in names:
        value = variables[name]
        out[name] = {k: next(it) for k in value} if isinstance(value, dict) else next(it)
    return out


def _map(fn: Callable[[torch.Tensor], torch.Tensor], tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map(fn, v) for v in tree)
    return fn(tree) if isinstance(tree, torch.Tensor) else tree


def _where(mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(mask.view(-1, *[1] * (a.dim() - 1)), a, b)


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A 1-D alias of a dense tensor in memory order (variables and their gradients share a layout)."""
    return t.detach().as_strided((t.numel(),), (1,), t.storage_offset())


# --- the loop --------------------------------------------------------------------------------------

class _Trials:
    """State of one run over R trials: all of them together (`single=False`, the objective `vmap`-ed over
    the leading dimension) or exactly one (`single=True`).

    A single trial keeps the variables' leading dimension of 1 for the optimiser, the hooks and the
    reported results, but its objective runs unbatched on squeezed views: under `vmap` even one trial pays
    the transform's dispatch on every operation (1.5-2x a plain loop's time per step, measured).
    """

    def __init__(self, objective: Objective, variables: Variables, target: Any, per_trial_target: bool,
                 single: bool, keep: Sequence[str], total_steps: int):
        self.vars: Variables = _map(lambda t: t.detach().clone().requires_grad_(True), variables)
        first = _leaves(self.vars, list(self.vars))[0]
        self.trials, device = first.shape[0], first.device
        self.single = single
        if single:
            if self.trials != 1:
                raise ValueError(f"a single-trial run got {self.trials} trials")
            squeeze = (lambda t: t.squeeze(0))           # a view whose backward is a view: no copy
            fixed = _map(squeeze, target) if per_trial_target else target    # once, not every step

            def evaluate(v, names):                         # terms stay 0-dim; they broadcast against (1,)
                return objective(_map(squeeze, v), fixed, names)

            def evaluate_on(v, names, masks):
                return objective(_map(squeeze, v), fixed, names, masks=masks)

            def choose(v, names):
                return objective.with_masks(_map(squeeze, v), fixed, names)
        else:
            batched: dict[Any, Callable] = {}                # one vmap per set of terms

            def evaluate(v, names):
                if names not in batched:
                    # A lambda, not the Objective itself: vmap formats its function's name for every output
                    # at every call, and an Objective's repr prints whole models (a tenth of a step, measured).
                    # A shared target is closed over, so vmap neither flattens nor checks it at every call.
                    batched[names] = vmap(lambda v, t: objective(v, t, names)) if per_trial_target \
                        else vmap(lambda v: objective(v, target, names))
                return batched[names](v, target) if per_trial_target else batched[names](v)

            def evaluate_on(v, names, masks):
                """The terms on the given per-trial subset masks (a shared target closed over, as above)."""
                key = (names, "on masks")
                if key not in batched:
                    batched[key] = vmap(lambda v, t, m: objective(v, t, names, masks=m)) if per_trial_target \
                        else vmap(lambda v, m: objective(v, target, names, masks=m))
                return batched[key](v, target, masks) if per_trial_target else batched[key](v, masks)

            def choose(v, names):
                """The terms and the subset masks the match chooses here, per trial."""
                key = (names, "choose")
                if key not in batched:
                    batched[key] = vmap(lambda v, t: objective.with_masks(v, t, names)) if per_trial_target \
                        else vmap(lambda v: objective.with_masks(v, target, names))
                return batched[key](v, target) if per_trial_target else batched[key](v)

        self.evaluate, self.evaluate_on, self.choose = evaluate, evaluate_on, choose
        self.keep = tuple(keep)
        self.alive = torch.ones(self.trials, dtype=torch.bool, device=device)
        # the variables' dtype: a single trial's 0-dim loss would not promote a float32 record (0-dim rule)
        self.best_loss = torch.full((self.trials,), float("inf"), dtype=first.dtype, device=device)
        self.best = {k: _map(lambda t: t.detach().clone(), self.vars[k]) for k in self.keep}
        self.step_index = 0
        self.term_names = objective.term_names
        # (steps, terms, R): a row per step; a term a block does not minimise is not computed (NaN there).
        self._trace = torch.full((total_steps, len(self.term_names), self.trials), float("nan"), device=device)

    def terms(self, variables: Variables | None = None, names: tuple[str, ...] | None = None,
              masks: list[torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """The objective's terms per trial; with `masks`, the match on that element subset."""
        variables = self.vars if variables is None else variables
        return self.evaluate(variables, names) if masks is None else self.evaluate_on(variables, names, masks)

    def terms_and_masks(self, names: tuple[str, ...] | None = None
                        ) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
        """The terms at the current variables and the element subset the match chose for them (from
        detached magnitudes), so a hook can evaluate elsewhere on the same subset."""
        return self.choose(self.vars, names)

    def record(self, terms: Mapping[str, torch.Tensor]) -> None:
        row = self._trace[self.step_index]
        values = list(terms.values())
        with torch.no_grad():
            if len(values) == len(self.term_names) and values[0].dtype == row.dtype:
                torch.stack(values, out=row.view(-1) if self.single else row)
            else:
                for k, v in terms.items():
                    row[self.term_names.index(k)] = v

    @property
    def trace(self) -> dict[str, torch.Tensor]:
        return {k: self._trace[:, j].contiguous() for j, k in enumerate(self.term_names)}

    def observe(self, loss: torch.Tensor, select: bool) -> None:
        """A non-finite loss marks its trial diverged; with `select`, keep each trial's best iterate. On
        the device, no host sync; |loss| < inf is isfinite in two operations instead of four."""
        loss = loss.detach()
        self.alive &= loss.abs() < math.inf
        if select:
            improved = self.alive & (loss < self.best_loss)
            self.best_loss = torch.where(improved, loss, self.best_loss)
            for k in self.keep:
                self.best[k] = _map2(lambda b, v: _where(improved, v.detach(), b), self.best[k], self.vars[k])

    def gradients(self, loss: torch.Tensor, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Per-trial gradients of the block loss (trials are independent, so the sum's gradient is each
        trial's own), after `observe(loss)`. A diverged trial's gradient only ever touches its own slice:
        the element-wise optimisers keep the others exact, and its results are never reported."""
        grads = torch.autograd.grad(torch.where(self.alive, loss, 0.0).sum(), params, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g if g.stride() == p.stride() else torch.empty_like(p).copy_(g)
                for g, p in zip(grads, params)]

    def align_layouts(self) -> None:
        """Give every variable the memory layout its gradient comes in (e.g. a Linear clone's weight
        gradient arrives transposed under vmap), so no step has to re-lay a large gradient out; element-
        wise optimisers then work on 1-D aliases of both (fused kernels are several times slower on
        non-contiguous tensors)."""
        names = list(self.vars)
        leaves = _leaves(self.vars, names)
        total = sum(v.sum() for v in self.terms().values())
        grads = torch.autograd.grad(total, leaves, allow_unused=True)
        aligned = [p if g is None or g.stride() == p.stride()
                   else torch.empty_strided(g.shape, g.stride(), dtype=p.dtype, device=p.device)
                   .copy_(p.detach()).requires_grad_(True)
                   for p, g in zip(leaves, grads)]
        self.vars = _replace(self.vars, names, aligned)


def _map2(fn, a, b):
    if isinstance(a, dict):
        return {k: _map2(fn, a[k], b[k]) for k in a}
    return fn(a, b)


def _weighted(terms: Mapping[str, torch.Tensor], weights: Mapping[str, float]) -> torch.Tensor:
    """sum_k w_k * term_k (`weighted_sum`); no weighted term: 0, shaped as the match."""
    return weighted_sum((w, terms[k]) for k, w in weights.items()) if weights else 0.0 * terms["match"]


@dataclass
class _BlockRun:
    """What a block's steps reuse: its variables, their optimiser aliases, weights and schedule."""
    block: Block
    weights: dict[str, float]
    params: list[torch.Tensor]
    optimizer: Any
    scheduler: Any
    aliases: list[torch.Tensor]
    same_subset: bool = False
    """A hook re-evaluates the objective on the match's element subset chosen at the current point."""

    @property
    def names(self) -> tuple[str, ...]:
        """The terms the block computes: the ones it minimises."""
        return tuple(self.weights)


def _gradient_step(state: _Trials, run: _BlockRun) -> None:
    block, params = run.block, run.params
    masks = None
    if run.same_subset:                  # a hook evaluates elsewhere on the element subset chosen here
        terms, masks = state.terms_and_masks(run.names)
    else:
        terms = state.terms(names=run.names)
    loss = _weighted(terms, run.weights)
    state.record(terms)
    state.observe(loss, block.select)
    grads = state.gradients(loss, params)
    if block.hooks:
        def grad_at(values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
            probe = [v.detach().requires_grad_(True) for v in values]
            moved = _replace(state.vars, block.update, probe)
            probe_terms = state.terms(moved, run.names, masks)
            probe_loss = _weighted(probe_terms, run.weights)
            state.observe(probe_loss, select=False)
            return state.gradients(probe_loss, probe)

        for hook in block.hooks:
            grads = hook.on_grads(grads, params, grad_at)
    for alias, p, g in zip(run.aliases, params, grads):
        alias.grad = g if alias is p else _flat(g)
    run.optimizer.step()
    for hook in block.hooks:
        hook.after_step(params)


def _lbfgs_step(state: _Trials, run: _BlockRun) -> None:
    block, params = run.block, run.params
    recorded = False

    def closure() -> torch.Tensor:
        nonlocal recorded
        terms = state.terms(names=run.names)
        loss = _weighted(terms, run.weights)
        if not recorded:
            state.record(terms)
            recorded = True
        state.observe(loss, block.select)
        for p, g in zip(params, state.gradients(loss, params)):
            p.grad = g
        return torch.where(state.alive, loss.detach(), math.nan)

    run.optimizer.step(closure)
    for hook in block.hooks:
        hook.after_step(params)


def _agree(state: _Trials, runs: list[_BlockRun], consensus: Consensus) -> None:
    """Overwrite the consensus variables in place (optimisers hold references to them), then rebuild
    every block's optimiser if the consensus asks for fresh state."""
    with torch.no_grad():
        agreed = consensus.combine({k: state.vars[k].detach() for k in consensus.names}, state.alive.clone())
        for k in consensus.names:
            state.vars[k].copy_(agreed[k])
    if consensus.reset:
        state.alive.fill_(True)
        for r in runs:
            r.optimizer = r.block.optimizer.build(r.params if isinstance(r.block.optimizer, LBFGS) else r.aliases)


PROGRESS_EVERY = 64
"""Steps between progress-bar updates: a rich update per step costs more than a small model's step."""


def _run_trials(objective: Objective, variables: Variables, target: Any, schedule: Schedule, *,
                per_trial_target: bool, single: bool, keep: Sequence[str], bar, mode: str) -> EngineResult:
    state = _Trials(objective, variables, target, per_trial_target, single, keep, schedule.steps)
    state.align_layouts()
    runs = []
    for block in schedule.blocks:
        params = _leaves(state.vars, block.update)
        lbfgs = isinstance(block.optimizer, LBFGS)
        # Element-wise optimisers step contiguous variables in place and others through 1-D aliases.
        aliases = [p if p.is_contiguous() else _flat(p) for p in params]
        optimizer = block.optimizer.build(params if lbfgs else aliases)
        scheduler = block.decay.build(optimizer, block.steps * schedule.rounds) if block.decay else None
        weights = objective.weights(block.terms)
        same_subset = any(h.same_subset for h in block.hooks) and "match" in weights \
            and subset_of(objective.match) is not None
        runs.append(_BlockRun(block, weights, params, optimizer, scheduler, aliases, same_subset))
    wait_for(state.alive.device)
    start = time.perf_counter()
    pending = 0
    for _ in range(schedule.rounds):
        for block_run in runs:
            step = _lbfgs_step if isinstance(block_run.optimizer, BatchedLBFGS) else _gradient_step
            for _ in range(block_run.block.steps):
                step(state, block_run)
                if block_run.scheduler is not None:
                    block_run.scheduler.step()
                state.step_index += 1
                pending += 1
                if pending == PROGRESS_EVERY:
                    bar.advance(pending)
                    pending = 0
        if schedule.consensus is not None:
            _agree(state, runs, schedule.consensus)
    bar.advance(pending)
    with torch.enable_grad():
        final_terms = {k: v.detach().view(state.trials) for k, v in state.terms().items()}
    selecting = [r.weights for r in runs if r.block.select]
    if selecting:
        state.observe(_weighted(final_terms, selecting[-1]), select=True)
    final = _map(lambda t: t.detach(), state.vars)
    wait_for(state.alive.device)
    return EngineResult(best=state.best, final=final, best_loss=state.best_loss, final_terms=final_terms,
                        diverged=~state.alive, trace=state.trace, steps=schedule.steps,
                        seconds=time.perf_counter() - start, mode=mode)


def _slice(tree: Any, r: int) -> Any:
    return _map(lambda t: t[r:r + 1], tree)


def _concat(results: list[EngineResult]) -> EngineResult:
    def cat(trees, dim=0):
        first = trees[0]
        if isinstance(first, dict):
            return {k: cat([t[k] for t in trees], dim) for k in first}
        return torch.cat(trees, dim=dim)

    return EngineResult(best=cat([r.best for r in results]), final=cat([r.final for r in results]),
                        best_loss=cat([r.best_loss for r in results]),
                        final_terms=cat([r.final_terms for r in results]),
                        diverged=cat([r.diverged for r in results]),
                        trace=cat([r.trace for r in results], dim=1), steps=results[0].steps,
                        seconds=sum(r.seconds for r in results), mode="sequential")


MODES = ("batched", "sequential", "auto")

AUTO_SEQUENTIAL_NUMEL = 1 << 16
"""`mode="auto"` on a CPU runs the trials one after another when they carry their own model weights (a
dict variable, e.g. UnSplit's per-target clones) with a tensor of more elements than this, and batches
them otherwise. Under vmap each trial's weight matrix makes the model's products batched matmuls, which
CPU BLAS runs far slower than the same products one trial at a time: UnSplit's MLP clone (784 x 1024)
ran batched at 0.6-0.77x the sequential speed for 2, 4 and 10 targets, while the CNN clone (208 weights)
ran 5x faster batched at 10 targets, and dummy inputs against a shared model 1.1-2.3x faster at 4
restarts (DLG, Inverting Gradients, the FedLeak parts; `scripts/bench_engine.py`, `bench_unsplit.py`,
2-core EPYC, torch 2.14, 1 and 2 threads). On a GPU batching wins throughout."""


def auto_mode(variables: Variables) -> str:
    """The trials mode `mode="auto"` picks for these variables (see AUTO_SEQUENTIAL_NUMEL)."""
    leaves = _leaves(variables, list(variables))
    if leaves[0].shape[0] == 1 or leaves[0].device.type != "cpu":
        return "batched"
    weights = [t for value in variables.values() if isinstance(value, dict) for t in value.values()]
    return "sequential" if any(t[0].numel() > AUTO_SEQUENTIAL_NUMEL for t in weights) else "batched"


def run(objective: Objective, variables: Variables, target: Any, schedule: Schedule, *,
        mode: str = "batched", per_trial_target: bool = False, keep: Sequence[str] = ("x",),
        progress: bool = True, description: str = "reconstruct") -> EngineResult:
    """Optimise R trials of `variables` (leading dimension R) against `target`.

    `per_trial_target=True` when each trial has its own observation (UnSplit's targets, temporal
    gradients); otherwise all trials share it (restarts). `keep` names the variables whose best
    iterate is tracked. `mode="auto"` picks batched or sequential by a measured rule (`auto_mode`);
    the result's `mode` says which ran. One trial runs unbatched in either mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown trials mode {mode!r}; use {', '.join(MODES)}")
    if mode == "auto":
        mode = auto_mode(variables)
    if mode == "sequential" and schedule.consensus is not None:
        raise ValueError("a consensus between rounds needs all trials together; run it batched")
    for block in schedule.blocks:                   # a misspelt term name fails here, before any work
        objective.weights(block.terms)
    trials = _leaves(variables, list(variables))[0].shape[0]
    with progress_bar(schedule.steps * (trials if mode == "sequential" else 1), description,
                      enabled=progress) as bar:
        if mode == "batched":            # one trial runs unbatched either way (the same arithmetic, no vmap)
            return _run_trials(objective, variables, target, schedule, per_trial_target=per_trial_target,
                               single=trials == 1, keep=keep, bar=bar, mode=mode)
        return _concat([
            _run_trials(objective, _slice(variables, r), _slice(target, r) if per_trial_target else target,
                        schedule, per_trial_target=per_trial_target, single=True, keep=keep, bar=bar, mode=mode)
            for r in range(trials)])

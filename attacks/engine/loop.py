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
from typing import Any, Mapping, Sequence

import torch

from attacks.engine.allocator import keep_large_blocks
from attacks.engine.compilation import Compilation
from attacks.engine.compiled import step_signature
from attacks.engine.matches import subset_of
from attacks.engine.objective import Objective
from attacks.engine.optim import LBFGS
from attacks.engine.options import QUIET, EngineOptions
from attacks.engine.schedule import Block, Consensus, Schedule
from attacks.engine.trials import Trials, Variables, flat, leaves, map_tree, replaced, weighted
from vfl.progress import progress_bar
from vfl.runtime import wait_for



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
        return weighted(self.final_terms, weights)


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
    step: Any = None
    """What takes one step: the eager `_gradient_step` / `_lbfgs_step`, or a compiled step."""

    @property
    def names(self) -> tuple[str, ...]:
        """The terms the block computes: the ones it minimises."""
        return tuple(self.weights)


def _gradient_step(state: Trials, run: _BlockRun) -> None:
    block, params = run.block, run.params
    masks = None
    if run.same_subset:                  # a hook evaluates elsewhere on the element subset chosen here
        terms, masks = state.terms_and_masks(run.names)
    else:
        terms = state.terms(names=run.names)
    loss = weighted(terms, run.weights)
    state.record(terms)
    state.observe(loss, block.select)
    grads = state.gradients(loss, params)
    if block.hooks:
        def grad_at(values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
            probe = [v.detach().requires_grad_(True) for v in values]
            moved = replaced(state.vars, block.update, probe)
            probe_terms = state.terms(moved, run.names, masks)
            probe_loss = weighted(probe_terms, run.weights)
            state.observe(probe_loss, select=False)
            return state.gradients(probe_loss, probe)

        for hook in block.hooks:
            grads = hook.on_grads(grads, params, grad_at)
    for alias, p, g in zip(run.aliases, params, grads):
        alias.grad = g if alias is p else flat(g)
    run.optimizer.step()
    for hook in block.hooks:
        hook.after_step(params)


def _lbfgs_step(state: Trials, run: _BlockRun) -> None:
    block, params = run.block, run.params
    recorded = False

    def closure() -> torch.Tensor:
        nonlocal recorded
        terms = state.terms(names=run.names)
        loss = weighted(terms, run.weights)
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


def _agree(state: Trials, runs: list[_BlockRun], consensus: Consensus) -> None:
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


def _compile_steps(compilation: Compilation, objective: Objective, state: Trials, runs: list[_BlockRun]) -> None:
    for r in runs:
        r.step = compilation.step_for(objective, state, r) or r.step


def _run_trials(objective: Objective, variables: Variables, target: Any, schedule: Schedule, *,
                per_trial_target: bool, single: bool, keep: Sequence[str], bar, mode: str,
                compilation: Compilation | None = None) -> EngineResult:
    state = Trials(objective, variables, target, per_trial_target, single, keep, schedule.steps)
    state.align_layouts()
    runs = []
    for block in schedule.blocks:
        params = leaves(state.vars, block.update)
        lbfgs = isinstance(block.optimizer, LBFGS)
        # Element-wise optimisers step contiguous variables in place and others through 1-D aliases.
        aliases = [p if p.is_contiguous() else flat(p) for p in params]
        optimizer = block.optimizer.build(params if lbfgs else aliases)
        scheduler = block.decay.build(optimizer, block.steps * schedule.rounds) if block.decay else None
        weights = objective.weights(block.terms)
        same_subset = any(h.same_subset for h in block.hooks) and "match" in weights \
            and subset_of(objective.match) is not None
        runs.append(_BlockRun(block, weights, params, optimizer, scheduler, aliases, same_subset,
                              _lbfgs_step if lbfgs else _gradient_step))
    deciding = False
    if compilation is not None:
        if compilation.active:
            _compile_steps(compilation, objective, state, runs)
        deciding = not compilation.decided and not compilation.stays_eager(runs)
    wait_for(state.alive.device)
    start = time.perf_counter()
    pending = 0
    for _ in range(schedule.rounds):
        for block_run in runs:
            for _ in range(block_run.block.steps):
                block_run.step(state, block_run)
                if block_run.scheduler is not None:
                    block_run.scheduler.step()
                state.step_index += 1
                if deciding:            # auto: eager steps time the run, then it may compile the rest
                    if compilation.after_step(objective, lambda: [step_signature(state, r) for r in runs]):
                        _compile_steps(compilation, objective, state, runs)
                    deciding = not compilation.decided
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
        state.observe(weighted(final_terms, selecting[-1]), select=True)
    final = map_tree(lambda t: t.detach(), state.vars)
    wait_for(state.alive.device)
    return EngineResult(best=state.best, final=final, best_loss=state.best_loss, final_terms=final_terms,
                        diverged=~state.alive, trace=state.trace, steps=schedule.steps,
                        seconds=time.perf_counter() - start, mode=mode)


def _slice(tree: Any, r: int) -> Any:
    return map_tree(lambda t: t[r:r + 1], tree)


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


AUTO_SEQUENTIAL_NUMEL = 1 << 16
"""`mode="auto"` on a CPU with one torch thread runs the trials one after another when they carry their own
model weights (a dict variable, e.g. UnSplit's per-target clones) with a tensor of more elements than this, and
batches them otherwise. With one thread each trial's weights and Adam state (16 MB for UnSplit's MLP clone,
784 x 1024) stay in cache between its steps, and under vmap they do not: the MLP clone ran batched at
0.6-0.77x the sequential speed for 2, 4 and 10 targets, while the CNN clone (208 weights) ran 5x faster
batched at 10 targets, and dummy inputs against a shared model 1.1-2.3x faster at 4 restarts (DLG, Inverting
Gradients, the FedLeak parts; `scripts/bench_engine.py`, `bench_unsplit.py`, 2-core EPYC, torch 2.14).

With more than one torch thread the trials are batched throughout: a single trial's small operations then
pay the thread pool's start and join at every step, and ten of them per step cost more than one batched
operation. UnSplit's MLP clone per target ran batched 1.6-1.7x faster than sequential at 2 threads in
`splitlab compare` and in `bench_unsplit.py --compile --threads 2` (0.83 against 1.35 ms per target-step),
and 2.8x in CPU time on a loaded machine. On a GPU batching wins throughout."""


def auto_mode(variables: Variables) -> str:
    """The trials mode `mode="auto"` picks for these variables (see AUTO_SEQUENTIAL_NUMEL)."""
    first = leaves(variables, list(variables))[0]
    if first.shape[0] == 1 or first.device.type != "cpu" or torch.get_num_threads() > 1:
        return "batched"
    weights = [t for value in variables.values() if isinstance(value, dict) for t in value.values()]
    return "sequential" if any(t[0].numel() > AUTO_SEQUENTIAL_NUMEL for t in weights) else "batched"


EARLIER_KEYWORDS = ("mode", "progress", "description", "compile")
"""The engine options as separate keywords, as the contract had them before `EngineOptions`: still taken, for
plug-ins written against it (the lab's own attacks hand `engine` whole)."""


def run(objective: Objective, variables: Variables, target: Any, schedule: Schedule,
        engine: EngineOptions | None = None, *, per_trial_target: bool = False, keep: Sequence[str] = ("x",),
        **earlier: Any) -> EngineResult:
    """Optimise R trials of `variables` (leading dimension R) against `target`, as `engine` says
    (`attacks.engine.options.EngineOptions`: trials mode, compiling, progress bar; default `QUIET`).

    `per_trial_target=True` when each trial has its own observation (UnSplit's targets, temporal
    gradients); otherwise all trials share it (restarts). `keep` names the variables whose best
    iterate is tracked. `mode="auto"` picks batched or sequential by a measured rule (`auto_mode`);
    the result's `mode` says which ran. One trial runs unbatched in either mode; a block whose hook needs
    every trial at once (`Hook.all_trials`) runs them batched.

    `compile="on"` runs each block's step through `torch.compile` (`attacks.engine.compiled`); `"auto"`
    times the first eager steps and compiles the rest when they repay the compile; `"off"` (the default)
    is the eager reference. `result.extra["compile"]` says what was compiled and what it cost; the run is
    added to `engine.report` where there is one.
    """
    unknown = sorted(set(earlier) - set(EARLIER_KEYWORDS))
    if unknown:
        raise TypeError(f"run() got an unexpected keyword argument {unknown[0]!r}")
    if earlier and engine is not None:
        raise TypeError(f"run() takes the engine options whole: give engine=EngineOptions(...) or "
                        f"{', '.join(earlier)}=, not both")
    engine = EngineOptions(**{"mode": "batched", "progress": True, **earlier}) if earlier else engine or QUIET
    mode = engine.mode
    if mode == "auto":
        mode = auto_mode(variables)
    if any(getattr(hook, "all_trials", False) for block in schedule.blocks for hook in block.hooks):
        mode = "batched"
    keep_large_blocks()
    if mode == "sequential" and schedule.consensus is not None:
        raise ValueError("a consensus between rounds needs all trials together; run it batched")
    for block in schedule.blocks:                   # a misspelt term name fails here, before any work
        objective.weights(block.terms)
    first = leaves(variables, list(variables))[0]
    trials = first.shape[0]
    total = schedule.steps * (trials if mode == "sequential" else 1)
    compilation = Compilation(engine.compile, total, first.device)
    with progress_bar(total, f"{engine.description} ({mode})", enabled=engine.progress) as bar:
        if mode == "batched":            # one trial runs unbatched either way (the same arithmetic, no vmap)
            result = _run_trials(objective, variables, target, schedule, per_trial_target=per_trial_target,
                                 single=trials == 1, keep=keep, bar=bar, mode=mode, compilation=compilation)
        else:
            result = _concat([
                _run_trials(objective, _slice(variables, r), _slice(target, r) if per_trial_target else target,
                            schedule, per_trial_target=per_trial_target, single=True, keep=keep, bar=bar, mode=mode,
                            compilation=compilation)
                for r in range(trials)])
    result.extra["compile"] = compilation.finish()
    if engine.report is not None:
        engine.report.add(result)
    return result

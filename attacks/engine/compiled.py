"""The engine's steps compiled with `torch.compile` (`run(..., compile="on" | "auto")`).

What is compiled. An Adam or SGD block's whole step is one program: the objective's terms per trial
(simulator, match, priors; under vmap for batched trials), their gradients, the gradient hooks, the loss
trace row, the divergence flags and best iterate, the optimiser update and the after-step hooks. An L-BFGS
block's objective evaluation is one program (terms, loss, gradients, divergence and best iterate): the
evaluation the optimiser's closure makes; the two-loop recursion and its stopping tests stay eager.

Gradients are `torch.func.grad` here (eager uses autograd), so the simulator's own parameter gradient is
a functorch transform too and the program is one forward graph with no autograd state around it.

One compilation serves a run: what changes per step enters as a tensor (the trace row's index, the
learning rate a schedule sets, Adam's step count), and a hook that carries state of its own (one that is
not a frozen dataclass, such as GradInversion's Langevin noise with its generator and step counter) runs
eagerly after the compiled step. A program is kept for later runs with the same objective and block
(UnSplit's targets one after another) as long as the objective lives, and one compilation also serves
later attack calls in the same process: programs of the same step signature share one code object, on
which dynamo keeps its graphs, so a new objective of the same shapes and settings passes the guards of
the graph compiled before and is not traced again (`_shared_code`).

The eager loop (`compile="off"`) is the reference; compiled trajectories agree with it to rounding
(inductor fuses and reorders floating-point work), which tests hold to 1e-4 relative.
"""
from __future__ import annotations

import math
import types
from dataclasses import replace
from typing import Any, Callable, Protocol, Sequence

import torch
from torch.func import grad, vmap

from attacks.engine.optim import SGD, Adam, FusedAdam, Hook
from attacks.engine.simulators import installing_taps
from attacks.engine.trials import Trials, leaves, map_tree, weighted

__all__ = ["BACKEND", "CompiledStep", "step_signature", "signature_text"]


BACKEND = "inductor"
"""torch.compile's backend; tests put "aot_eager" here to check the tracing without building C++ code."""


# --- what a program sees of the state ----------------------------------------------------------------

def _hook_traced(hook: Hook) -> bool:
    """A frozen dataclass cannot change between steps, so tracing it once is faithful; any other hook may
    keep state (a counter, a generator) and runs eagerly."""
    params = getattr(type(hook), "__dataclass_params__", None)
    return params is not None and params.frozen


def _overrides(hook: Hook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(Hook, name)


def _squeeze(t: torch.Tensor) -> torch.Tensor:
    return t.squeeze(0)


def _terms_function(objective, names, single: bool, per_trial_target: bool, how: str) -> Callable:
    """(variables, target[, masks]) -> the terms per trial, as `Trials` evaluates them: `how` is "plain",
    "choose" (the terms and the subset masks chosen here) or "masks" (the terms on given masks)."""
    if single:
        def one(v, t, m=None):
            v, t = map_tree(_squeeze, v), map_tree(_squeeze, t) if per_trial_target else t
            if how == "choose":
                return objective.with_masks(v, t, names)
            return objective(v, t, names) if m is None else objective(v, t, names, masks=m)
        return one
    target_dim = 0 if per_trial_target else None
    if how == "choose":
        return vmap(lambda v, t: objective.with_masks(v, t, names), in_dims=(0, target_dim))
    if how == "masks":
        return vmap(lambda v, t, m: objective(v, t, names, masks=m), in_dims=(0, target_dim, 0))
    return vmap(lambda v, t: objective(v, t, names), in_dims=(0, target_dim))


def _finite(loss: torch.Tensor) -> torch.Tensor:
    return loss.abs() < math.inf


def _detached(tree):
    return map_tree(lambda t: t.detach(), tree)


class _Program:
    """One block's compiled step (or L-BFGS evaluation) for one objective and one layout of the state."""

    def __init__(self, fn: Callable, name: str, device: torch.device, key: str | None = None):
        code = _shared_code(fn, name, key)
        own = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        # CUDA graphs on a GPU: inductor records them where safe and says why it skips a graph where not
        options = {"mode": "reduce-overhead"} if device.type == "cuda" and BACKEND == "inductor" else {}
        self.code = code
        self.function = torch.compile(own, backend=BACKEND, dynamic=False, **options)

    def __call__(self, *args):
        return self.function(*args)


_SHARED_CODES: dict[tuple, list[types.CodeType]] = {}
"""Code objects of programs built in this process, per program name, backend and step signature (as text)."""


def _shared_code(fn: Callable, name: str, key: str | None) -> types.CodeType:
    """The code object a program compiles under. Dynamo keeps its compiled graphs and their guards on the code
    object, so a later program with the same signature (the next attack call's new objective on the same model
    shapes) reuses a code object of the same body: its guards then check the new closure (the objective's
    tensors are graph inputs, its settings are guarded constants) and a call that passes them runs the graph
    compiled before, with no tracing at all; one that does not compiles a graph of its own beside it. A code
    object is left once it is one short of dynamo's recompile limit (past that dynamo would run it eagerly)."""
    import torch._dynamo.config as dynamo
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    code = fn.__code__.replace(co_name=name, co_qualname=name)
    if key is None:
        return code
    kept = _SHARED_CODES.setdefault((name, BACKEND, key), [])
    for old in kept:
        if old.co_code == code.co_code and old.co_freevars == code.co_freevars \
                and len(_debug_get_cache_entry_list(old)) < dynamo.recompile_limit - 1:
            return old
    kept.append(code)
    return code


def compiled_in_process(text: str) -> bool:
    """Whether a program of this signature (`signature_text`) already holds a compiled graph in this process."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    return any(_debug_get_cache_entry_list(code) for (_, backend, key), codes in _SHARED_CODES.items()
               if key == text and backend == BACKEND for code in codes)


PROGRAMS_ATTRIBUTE = "_compiled_programs"


def _program(objective, signature: tuple, build: Callable[[], _Program]) -> tuple[_Program, bool]:
    """The program for this objective and signature, built on first use; (program, newly built). Programs
    are kept on the objective (they close over it), so they go when it goes."""
    programs = objective.__dict__.get(PROGRAMS_ATTRIBUTE)
    if programs is None:
        programs = {}
        object.__setattr__(objective, PROGRAMS_ATTRIBUTE, programs)      # a frozen dataclass: a cache, not a field
    if signature not in programs:
        programs[signature] = build()
        return programs[signature], True
    return programs[signature], False


def _layout(tree) -> tuple:
    return tuple((tuple(t.shape), t.stride(), t.dtype, str(t.device)) for t in _flat_leaves(tree))


def _flat_leaves(tree) -> list[torch.Tensor]:
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _flat_leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _flat_leaves(v)]
    return [tree] if isinstance(tree, torch.Tensor) else []


def _block_key(block) -> Any:
    try:
        return hash(block), block
    except TypeError:                   # a block holding something unhashable is known by identity
        return id(block), None


# --- the programs -------------------------------------------------------------------------------------

def _assembler(state: Trials, update: tuple) -> Callable:
    """`assemble(others, values)`: the full variable tree from the fixed ones and the updated leaves in order."""
    structure = {k: list(state.vars[k]) if isinstance(state.vars[k], dict) else None for k in update}

    def assemble(others, values):
        out, it = dict(others), iter(values)
        for k in update:
            out[k] = {j: next(it) for j in structure[k]} if structure[k] is not None else next(it)
        return out
    return assemble


def _keep_best(current: Sequence[torch.Tensor], ok: torch.Tensor, loss: torch.Tensor, best_loss: torch.Tensor,
               best: Sequence[torch.Tensor]) -> None:
    """Where a live trial's loss fell below its best, its current iterate becomes its best (in place)."""
    improved = ok & (loss < best_loss)
    best_loss.copy_(torch.where(improved, loss, best_loss))
    for b, c in zip(best, current):
        b.copy_(torch.where(improved.view(-1, *[1] * (c.dim() - 1)), c, b))


def _step_body(objective, state: Trials, run, traced_after: Sequence[Hook]) -> Callable:
    """The Adam or SGD step as a function of tensors only (see `CompiledStep.__call__` for its arguments)."""
    block, weights, names = run.block, dict(run.weights), run.names
    update, select, keep = tuple(block.update), block.select, state.keep
    assemble = _assembler(state, update)
    single, per_trial_target = state.single, state.per_trial_target
    term_names, trials = state.term_names, state.trials
    same_subset = run.same_subset
    plain = _terms_function(objective, names, single, per_trial_target, "plain")
    choose = _terms_function(objective, names, single, per_trial_target, "choose") if same_subset else None
    on_masks = _terms_function(objective, names, single, per_trial_target, "masks") if same_subset else None
    optimizer = block.optimizer
    hooks = tuple(block.hooks)

    def step(values, others, target, optimizer_state, lr, alive, best_loss, best, trace, index):
        def loss_at(vs):
            v = assemble(others, vs)
            if same_subset:
                terms, masks = choose(v, target)
            else:
                terms, masks = plain(v, target), None
            loss = weighted(terms, weights)
            ok = alive & _finite(loss.detach())
            aux = (_detached(terms), loss.detach(), ok)
            return torch.where(ok, loss, 0.0).sum(), aux + (_detached(masks),) if same_subset else aux

        grads, (terms, loss, ok, *chosen) = grad(loss_at, has_aux=True)(list(values))
        masks = chosen[0] if chosen else None
        rows = [terms[k].reshape(trials) if k in terms else torch.full((trials,), math.nan, dtype=trace.dtype,
                                                                           device=trace.device)
                for k in term_names]
        trace.index_copy_(0, index.view(1), torch.stack(rows).to(trace.dtype).unsqueeze(0))
        index.add_(1)
        now = ok
        if select:
            _keep_best(leaves(assemble(others, values), keep), now, loss, best_loss, best)
        if hooks:
            def grad_at(probes):
                nonlocal now
                here = now

                def probe_loss(ps):
                    v = assemble(others, ps)
                    terms_p = on_masks(v, target, masks) if same_subset else plain(v, target)
                    value = weighted(terms_p, weights)
                    alive_p = here & _finite(value.detach())
                    return torch.where(alive_p, value, 0.0).sum(), alive_p

                probe_grads, now = grad(probe_loss, has_aux=True)([p.detach() for p in probes])
                return probe_grads

            for hook in hooks:
                if _overrides(hook, "on_grads"):
                    grads = hook.on_grads(grads, values, grad_at)
        alive.copy_(now)
        with torch.no_grad():
            if isinstance(optimizer, Adam):
                exp_avgs, exp_avg_sqs, max_sqs, steps = optimizer_state
                b1, b2 = optimizer.betas
                for i, (p, g, m, v, s) in enumerate(zip(values, grads, exp_avgs, exp_avg_sqs, steps)):
                    s.add_(1)
                    m.lerp_(g, 1 - b1)
                    v.mul_(b2).addcmul_(g, g, value=1 - b2)
                    second = v
                    if optimizer.amsgrad:
                        max_sqs[i].copy_(torch.maximum(max_sqs[i], v))      # dynamo takes no strided out=
                        second = max_sqs[i]
                    # bias corrections in double, as torch's fused kernel: 1 - 0.999 ** 1 in float32 is 1e-5 off
                    n = s.to(torch.float64)
                    bc2_sqrt = (1 - b2 ** n).sqrt().to(p.dtype)
                    step_size = (lr.to(torch.float64) / (1 - b1 ** n)).to(p.dtype)
                    p.sub_(step_size * m / (second.sqrt() / bc2_sqrt + optimizer.eps))
            else:
                (buffers,) = optimizer_state
                for p, g, buf in zip(values, grads, buffers):
                    if optimizer.momentum:
                        g = buf.mul_(optimizer.momentum).add_(g)
                    p.sub_(lr * g)
            for hook in traced_after:
                hook.after_step(values)

    return step


def _evaluation_body(objective, state: Trials, run) -> Callable:
    """L-BFGS's closure as a function of tensors: the terms, the per-trial loss (NaN where a trial is not
    alive) and the gradients; the divergence flags and best iterate updated in place."""
    weights, names, select, keep = dict(run.weights), run.names, run.block.select, state.keep
    update = tuple(run.block.update)
    assemble = _assembler(state, update)
    plain = _terms_function(objective, names, state.single, state.per_trial_target, "plain")

    def evaluate(values, others, target, alive, best_loss, best):
        def loss_at(vs):
            terms = plain(assemble(others, vs), target)
            loss = weighted(terms, weights)
            ok = alive & _finite(loss.detach())
            return torch.where(ok, loss, 0.0).sum(), (_detached(terms), loss.detach(), ok)

        grads, (terms, loss, ok) = grad(loss_at, has_aux=True)(list(values))
        alive.copy_(ok)
        if select:
            _keep_best(leaves(assemble(others, values), keep), ok, loss, best_loss, best)
        return terms, grads, torch.where(ok, loss, math.nan)

    return evaluate


# --- what the loop calls -----------------------------------------------------------------------------

def _optimizer_views(optimizer, params: Sequence[torch.Tensor], aliases: Sequence[torch.Tensor]) -> list:
    """The optimiser's state as tensors shaped and strided as the variables (the eager optimiser keeps a
    non-contiguous variable's state as a 1-D alias in memory order), so the program updates it in place."""
    def shaped(state: torch.Tensor, p: torch.Tensor, alias: torch.Tensor) -> torch.Tensor:
        return state if alias is p else state.as_strided(p.shape, p.stride(), state.storage_offset())

    if isinstance(optimizer, FusedAdam):
        views = [[shaped(s, p, a) for s, p, a in zip(group, params, aliases)]
                 for group in (optimizer.exp_avgs, optimizer.exp_avg_sqs)]
        maxes = [shaped(s, p, a) for s, p, a in zip(optimizer.max_exp_avg_sqs, params, aliases)]
        return [views[0], views[1], maxes, list(optimizer.steps)]
    buffers = []                        # torch's SGD: a missing buffer starts at zero, m * 0 + g = g
    for p, a in zip(params, aliases):
        slot = optimizer.state[a]
        if "momentum_buffer" not in slot or slot["momentum_buffer"] is None:
            slot["momentum_buffer"] = torch.zeros_like(a)
        buffers.append(shaped(slot["momentum_buffer"], p, a))
    return [buffers]


def step_signature(state: Trials, run) -> tuple:
    """What a block's program depends on beyond its objective: the block, what it computes and the layout of
    every tensor it is given (one program per signature)."""
    kind = "step" if isinstance(run.block.optimizer, (Adam, SGD)) else "lbfgs"
    return (kind, _block_key(run.block), run.names, state.single, state.per_trial_target, tuple(state.keep),
            _layout(state.vars), _layout(state.target))


class RunsPrograms(Protocol):
    """What a compiled step needs of the run's compilation: to call a program and count what compiling it cost
    (`attacks.engine.compilation.Compilation`, which imports this module, so it is not imported here)."""

    def call(self, program: "_Program", *args: Any) -> Any: ...


class CompiledStep:
    """The loop's step for one block run, through its compiled program (a drop-in for the eager step)."""

    def __init__(self, compilation: RunsPrograms, objective, state: Trials, run):
        self.compilation, self.state, self.run = compilation, state, run
        block = run.block
        self.lbfgs = not isinstance(block.optimizer, (Adam, SGD))
        self.update = tuple(block.update)
        after = [h for h in block.hooks if _overrides(h, "after_step")]
        cut = next((i for i, h in enumerate(after) if not _hook_traced(h)), len(after))
        self.traced_after, self.eager_after = after[:cut], after[cut:]
        self.values = [p.detach() for p in run.params]
        self.others = _detached({k: v for k, v in state.vars.items() if k not in self.update})
        self.index = torch.zeros((), dtype=torch.long, device=state.alive.device)
        self.next_index = None
        self.lr = None
        self.lr_value = None
        self.optimizer = self.optimizer_state = None
        signature = step_signature(state, run)
        body = (lambda: _evaluation_body(objective, state, run)) if self.lbfgs \
            else (lambda: _step_body(objective, state, run, self.traced_after))
        name = "engine_lbfgs_evaluation" if self.lbfgs else f"engine_{type(block.optimizer).__name__.lower()}_step"
        self.program, self.new = _program(objective, signature,
                                          lambda: _Program(body(), name, state.alive.device,
                                                           signature_text(objective, signature)))
        if self.new:                    # one eager evaluation leaves the recording taps the traced step uses
            with installing_taps(), torch.no_grad():
                state.terms(names=run.names)
        self.signature = signature

    def _optimizer(self):
        optimizer = self.run.optimizer
        if optimizer is not self.optimizer:          # rebuilt by a consensus reset: fresh state tensors
            self.optimizer = optimizer
            self.optimizer_state = _optimizer_views(optimizer, self.run.params, self.run.aliases)
        value = optimizer.param_groups[0]["lr"]
        if value != self.lr_value:                    # a schedule moved it: one fill, no recompile
            if self.lr is None:
                self.lr = torch.tensor(value, dtype=self.values[0].dtype, device=self.values[0].device)
            else:
                self.lr.fill_(value)
            self.lr_value = value
        return self.optimizer_state

    def _best(self) -> list[torch.Tensor]:
        state = self.state
        return leaves(state.best, state.keep)

    def __call__(self, state: Trials, run) -> None:
        if self.lbfgs:
            return self._lbfgs_step(state, run)
        if state.step_index != self.next_index:
            self.index.fill_(state.step_index)
        optimizer_state = self._optimizer()
        self.compilation.call(self.program, self.values, self.others, state.target, optimizer_state, self.lr,
                              state.alive, state.best_loss, self._best(), state._trace, self.index)
        self.next_index = state.step_index + 1
        for hook in self.eager_after:
            hook.after_step(run.params)

    def _lbfgs_step(self, state: Trials, run) -> None:
        recorded = False
        params = run.params

        def closure() -> torch.Tensor:
            nonlocal recorded
            terms, grads, loss = self.compilation.call(self.program, self.values, self.others, state.target,
                                                       state.alive, state.best_loss, self._best(), timed=False)
            if not recorded:
                state.record(terms)
                recorded = True
            for p, g in zip(params, grads):
                p.grad = g
            return loss

        run.optimizer.step(closure)
        for hook in run.block.hooks:
            hook.after_step(params)


def signature_text(objective, signature: tuple) -> str:
    """A signature as text that is the same in another process (no hashes, no ids), for the costs file and the
    code objects programs share. A block's step count and decay are left out: the loop applies them (the
    learning rate enters the program as a tensor), so a run of another length compiles the same graph and
    costs what it cost before."""
    block = signature[1][1]
    parts = (type(objective.simulator).__name__, type(objective.match).__name__,
             tuple(p.name for p in objective.priors))
    shown = repr(replace(block, steps=0, decay=None)) if block is not None else "a block"
    return repr((torch.__version__, parts, signature[0], shown) + signature[2:])

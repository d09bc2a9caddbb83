"""The trials of a run as one state: variables with a leading trial dimension, the objective evaluated per
trial (under `vmap`, or one trial after another), each trial's best iterate, loss trace and divergence
flag, all kept on the device."""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.func import vmap

from attacks.engine.matches import weighted_sum
from attacks.engine.objective import Objective

Variables = dict[str, Any]          # name -> tensor (R, ...) or dict of tensors (R, ...)


# --- small pytree helpers (variables are tensors or one level of dicts of tensors) ----------------

def leaves(variables: Mapping[str, Any], names: Sequence[str]) -> list[torch.Tensor]:
    out = []
    for name in names:
        value = variables[name]
        out.extend(value.values() if isinstance(value, dict) else [value])
    return out


def replaced(variables: Mapping[str, Any], names: Sequence[str], values: Sequence[torch.Tensor]) -> Variables:
    out, it = dict(variables), iter(values)
    for name in names:
        value = variables[name]
        out[name] = {k: next(it) for k in value} if isinstance(value, dict) else next(it)
    return out


def map_tree(fn: Callable[[torch.Tensor], torch.Tensor], tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: map_tree(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(map_tree(fn, v) for v in tree)
    return fn(tree) if isinstance(tree, torch.Tensor) else tree


def where_trial(mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(mask.view(-1, *[1] * (a.dim() - 1)), a, b)


def flat(t: torch.Tensor) -> torch.Tensor:
    """A 1-D alias of a dense tensor in memory order (variables and their gradients share a layout)."""
    return t.detach().as_strided((t.numel(),), (1,), t.storage_offset())


# --- the loop --------------------------------------------------------------------------------------

class Trials:
    """State of one run over R trials: all of them together (`single=False`, the objective `vmap`-ed over
    the leading dimension) or exactly one (`single=True`).

    A single trial keeps the variables' leading dimension of 1 for the optimiser, the hooks and the
    reported results, but its objective runs unbatched on squeezed views: under `vmap` even one trial pays
    the transform's dispatch on every operation (1.5-2x a plain loop's time per step, measured).
    """

    def __init__(self, objective: Objective, variables: Variables, target: Any, per_trial_target: bool,
                 single: bool, keep: Sequence[str], total_steps: int):
        self.vars: Variables = map_tree(lambda t: t.detach().clone().requires_grad_(True), variables)
        first = leaves(self.vars, list(self.vars))[0]
        self.trials, device = first.shape[0], first.device
        self.single = single
        self.target, self.per_trial_target = target, per_trial_target
        if single:
            if self.trials != 1:
                raise ValueError(f"a single-trial run got {self.trials} trials")
            squeeze = (lambda t: t.squeeze(0))           # a view whose backward is a view: no copy
            fixed = map_tree(squeeze, target) if per_trial_target else target    # once, not every step

            def evaluate(v, names):                         # terms stay 0-dim; they broadcast against (1,)
                return objective(map_tree(squeeze, v), fixed, names)

            def evaluate_on(v, names, masks):
                return objective(map_tree(squeeze, v), fixed, names, masks=masks)

            def choose(v, names):
                return objective.with_masks(map_tree(squeeze, v), fixed, names)
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
        self.best = {k: map_tree(lambda t: t.detach().clone(), self.vars[k]) for k in self.keep}
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
                self.best[k] = map_pair(lambda b, v: where_trial(improved, v.detach(), b), self.best[k], self.vars[k])

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
        values = leaves(self.vars, names)
        total = sum(v.sum() for v in self.terms().values())
        grads = torch.autograd.grad(total, values, allow_unused=True)
        aligned = [p if g is None or g.stride() == p.stride()
                   else torch.empty_strided(g.shape, g.stride(), dtype=p.dtype, device=p.device)
                   .copy_(p.detach()).requires_grad_(True)
                   for p, g in zip(values, grads)]
        self.vars = replaced(self.vars, names, aligned)


def map_pair(fn, a, b):
    if isinstance(a, dict):
        return {k: map_pair(fn, a[k], b[k]) for k in a}
    return fn(a, b)


def weighted(terms: Mapping[str, torch.Tensor], weights: Mapping[str, float]) -> torch.Tensor:
    """sum_k w_k * term_k (`weighted_sum`); no weighted term: 0, shaped as the match."""
    return weighted_sum((w, terms[k]) for k, w in weights.items()) if weights else 0.0 * terms["match"]

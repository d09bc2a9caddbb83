"""L-BFGS for many independent trials at once.

`torch.optim.LBFGS` couples everything it optimises into one problem (one step length, one history,
one stopping decision). Here every trial keeps its own history, step length and stopping state while
the closure is evaluated for all trials together. Without a line search the iteration is the same as
torch's for each trial (tests check it against `torch.optim.LBFGS` run on one trial at a time).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Dot products along the last dimension: (a * b).sum(-1) bit for bit (vecdot is that composite), in one
    call from Python instead of two (the two-loop recursion makes a few per stored pair per iteration)."""
    return torch.linalg.vecdot(a, b, dim=-1)


def _same(a: torch.Tensor) -> torch.Tensor:
    return a


def _column(a: torch.Tensor) -> torch.Tensor:
    return a[:, None]


class BatchedLBFGS:
    def __init__(self, params: Sequence[torch.Tensor], lr: float = 1.0, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100):
        self.params = list(params)
        self.trials = self.params[0].shape[0]
        self.lr, self.max_iter = lr, max_iter
        self.max_eval = max_eval if max_eval is not None else max_iter * 5 // 4
        self.tolerance_grad, self.tolerance_change = tolerance_grad, tolerance_change
        self.history_size = history_size
        device = self.params[0].device
        dtype = self.params[0].dtype
        self.n_iter = torch.zeros(self.trials, dtype=torch.long, device=device)
        self.rows = torch.arange(self.trials, device=device)
        # Per-trial coefficients as a column against (trials, n) vectors; with one trial a (1,) tensor
        # broadcasts as it is, which saves a view per use (the same arithmetic, bit for bit).
        self.column = _same if self.trials == 1 else _column
        # Per-trial ring buffers of the last `history_size` accepted pairs, slot head - 1 the newest; an
        # empty slot has rho = 0 and adds nothing. One slot more than the history: a new pair is written at
        # head unconditionally (no read-modify-write) and head advances only if it is accepted, so the
        # slot at head is never one of the live pairs.
        # Tensors, so no step reads a value back (a GPU sync).
        self.y = self.s = self.rho = None
        self.head = torch.zeros(self.trials, dtype=torch.long, device=device)
        self.filled = 0                 # host-side bound on any trial's number of stored pairs
        self.h_diag = torch.ones(self.trials, dtype=dtype, device=device)
        self.d: torch.Tensor | None = None
        self.t: torch.Tensor | None = None
        self.prev_flat_grad: torch.Tensor | None = None

    def _flat_grad(self) -> torch.Tensor:
        return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(self.trials, -1)
                          for p in self.params], dim=1)

    @torch.no_grad()
    def _add(self, step: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            n = p[0].numel()
            p.add_(step[:, offset:offset + n].view_as(p))
            offset += n

    def _remember(self, y: torch.Tensor, s: torch.Tensor, accept: torch.Tensor) -> None:
        """Store (y, s) for each trial in `accept` whose curvature y.s is positive, in its next ring slot
        (over its oldest pair once it holds `history_size`)."""
        if self.y is None:
            slots = self.history_size + 1
            self.y, self.s = y.new_zeros(slots, *y.shape), s.new_zeros(slots, *s.shape)
            self.rho = y.new_zeros(slots, self.trials)
        ys = _dot(y, s)
        accept = accept & (ys > 1e-10)
        slot = (self.head, self.rows)
        self.y[slot], self.s[slot] = y, s
        self.rho[slot] = 1.0 / torch.where(accept, ys, 1.0)
        self.head = (self.head + accept) % (self.history_size + 1)
        self.filled = min(self.filled + 1, self.history_size)
        self.h_diag = torch.where(accept, ys / _dot(y, y), self.h_diag)

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        """Two-loop recursion per trial over its pairs, newest first (gathered in one go per buffer)."""
        q, column = -g, self.column
        if not self.filled:
            return q * column(self.h_diag)
        ages = torch.arange(self.filled, device=g.device)[:, None]
        order = ((self.head[None, :] - 1 - ages) % (self.history_size + 1), self.rows)
        pairs = list(zip(self.y[order].unbind(), self.s[order].unbind(), self.rho[order].unbind()))
        alphas, dot = [], torch.linalg.vecdot               # _dot without a Python call per pair
        for y, s, rho in pairs:
            a = column(dot(s, q, dim=-1) * rho)
            alphas.append(a)
            q = q - a * y
        r = q * column(self.h_diag)
        for (y, s, rho), a in zip(reversed(pairs), reversed(alphas)):
            r = r + (a - column(dot(y, r, dim=-1) * rho)) * s
        return r

    def step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:
        """One `torch.optim.LBFGS.step` per trial. `closure` fills `.grad` and returns per-trial losses."""
        with torch.enable_grad():
            orig_loss = closure().detach()
        loss = orig_loss
        flat_grad = self._flat_grad()
        largest = flat_grad.abs().amax(1)         # NaN if any entry is: max |g| < inf is "all finite"
        active = torch.isfinite(loss) & (largest < math.inf) & (largest > self.tolerance_grad)
        evals = 1
        local_iter = 0
        d = self.d if self.d is not None else torch.zeros_like(flat_grad)
        t = self.t if self.t is not None else torch.zeros_like(loss)
        prev = self.prev_flat_grad if self.prev_flat_grad is not None else torch.zeros_like(flat_grad)
        column = self.column
        taken = d * column(t)                                  # the last step d * t
        while local_iter < self.max_iter and bool(active.any()):
            local_iter += 1
            self.n_iter += active
            first = active & (self.n_iter == 1)
            self._remember(flat_grad - prev, taken, active & ~first)
            direction = self._direction(flat_grad)
            moving = column(active)
            d = torch.where(moving, torch.where(column(first), -flat_grad, direction), d)
            prev = torch.where(moving, flat_grad, prev)
            prev_loss = loss
            first_t = torch.clamp(1.0 / flat_grad.abs().sum(1), max=1.0)
            if self.lr != 1.0:                        # times 1.0 changes nothing: one operation fewer
                first_t = first_t * self.lr
            t = torch.where(active, torch.where(first, first_t, self.lr), t)
            gtd = _dot(flat_grad, d)
            active = active & (gtd <= -self.tolerance_change)
            taken = d * column(t)
            self._add(torch.where(column(active), taken, 0.0))
            if local_iter != self.max_iter:
                with torch.enable_grad():
                    new_loss = closure().detach()
                new_grad = self._flat_grad()
                evals += 1
                loss = torch.where(active, new_loss, loss)
                flat_grad = torch.where(column(active), new_grad, flat_grad)
                largest = flat_grad.abs().amax(1)
                finite = torch.isfinite(loss) & (largest < math.inf)
                optimal = largest <= self.tolerance_grad
            else:
                finite, optimal = torch.isfinite(loss), torch.zeros_like(active)
            if evals >= self.max_eval:
                break
            small_step = taken.abs().amax(1) <= self.tolerance_change
            small_change = (loss - prev_loss).abs() < self.tolerance_change
            active = active & finite & ~optimal & ~small_step & ~small_change
        self.d, self.t, self.prev_flat_grad = d, t, prev
        return orig_loss

"""L-BFGS for many independent trials at once.

`torch.optim.LBFGS` couples everything it optimises into one problem (one step length, one history,
one stopping decision). Here every trial keeps its own history, step length and stopping state while
the closure is evaluated for all trials together. Without a line search the iteration is torch's for
each trial (tests check it against `torch.optim.LBFGS` run on one trial at a time, in float64); the
search direction comes from the compact form of the two-loop recursion (`BatchedLBFGS._direction`), the
same product in exact arithmetic, rounded differently.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Dot products along the last dimension: (a * b).sum(-1) in one call."""
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
        # Per-trial ring buffers of the last `history_size` accepted pairs (s and y in one tensor), slot
        # head - 1 the newest, and their Gram matrices s_i.y_j and y_i.y_j; an empty slot holds zeros and
        # adds nothing. One slot more than the history: a new pair is written at head unconditionally (no
        # read-modify-write) and head advances only if it is accepted, so the slot at head is never one
        # of the live pairs. Tensors, so no step reads a value back (a GPU sync).
        self.pairs = self.s = self.y = self.gram = None
        self.head = torch.zeros(self.trials, dtype=torch.long, device=device)
        self.filled = 0                 # host-side bound on any trial's number of stored pairs
        self.h_diag = torch.ones(self.trials, dtype=dtype, device=device)
        self._masks: dict[int, torch.Tensor] = {}
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
        (over its oldest pair once it holds `history_size`), with the slot's row and column of the Gram
        matrices."""
        slots = self.history_size + 1
        if self.pairs is None:
            self.pairs = y.new_zeros(self.trials, 2 * slots, y.shape[1])       # s slots, then y slots
            self.s, self.y = self.pairs[:, :slots], self.pairs[:, slots:]
            self.gram = y.new_zeros(self.trials, 2, slots, slots)              # [s_i . y_j, y_i . y_j]
        ys = _dot(y, s)
        accept = accept & (ys > 1e-10)
        rows, head = self.rows, self.head
        self.s[rows, head], self.y[rows, head] = s, y
        # every stored s_i and y_i against the new y and s, as row vectors times the buffer: a batched
        # matrix-vector product the other way round ran ten times slower on the CPU, and a product with both
        # rows at once starts a thread pool (under load, milliseconds)
        with_y, with_s = (y[:, None] @ self.pairs.mT)[:, 0], (s[:, None] @ self.pairs.mT)[:, 0]
        self.gram[rows, :, :, head] = with_y.view(self.trials, 2, slots)                      # s_i . y, y_i . y
        self.gram[rows, :, head] = torch.stack([with_s[:, slots:], with_y[:, slots:]], 1)    # s . y_j, y . y_j
        self.head = (head + accept) % slots
        self.filled = min(self.filled + 1, self.history_size)
        self.h_diag = torch.where(accept, ys / _dot(y, y), self.h_diag)

    def _below(self, m: int) -> torch.Tensor:
        """(m, m) True below the diagonal (a mask, cached per size: `tril` starts a thread pool)."""
        if m not in self._masks:
            self._masks[m] = torch.ones(m, m, dtype=torch.bool, device=self.h_diag.device).tril(-1)
        return self._masks[m]

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        """-H g for each trial's L-BFGS inverse Hessian H: the two-loop recursion in its compact form (Byrd,
        Nocedal, Schnabel 1994, section 4), a few matrix products and two triangular solves instead of four
        small operations per stored pair. With the pairs k = 0 (newest) ... m - 1, q = -g, L = the lower
        triangle of s_k . y_l (diagonal D_k = s_k . y_k) and gamma = h_diag:
            alpha = L^-1 S q                          (the first loop's coefficients)
            c = L^-T (D alpha - gamma (Y q - Y Y^T alpha))   (the second loop's alpha - beta)
            -H g = gamma (q - Y^T alpha) + S^T c
        An empty slot (no pair stored yet) has s = y = 0 and a unit diagonal, so it adds nothing."""
        q = -g
        gamma = self.h_diag[:, None]
        if not self.filled:
            return q * gamma
        slots = self.history_size + 1
        ages = torch.arange(self.filled, device=g.device)
        order = (self.head[:, None] - 1 - ages) % slots                         # (trials, m), newest first
        both = (q[:, None] @ self.pairs.mT)[:, 0]                                 # s_i . q, then y_i . q
        a, b = both[:, :slots].gather(1, order), both[:, slots:].gather(1, order)
        m = self.filled
        cells = (order[:, :, None] * slots + order[:, None, :]).view(self.trials, 1, m * m).expand(-1, 2, -1)
        sy, yy = self.gram.view(self.trials, 2, slots * slots).gather(2, cells).view(self.trials, 2, m, m).unbind(1)
        curvature = sy.diagonal(dim1=1, dim2=2)
        lower = torch.where(self._below(m), sy, 0.0) + torch.diag_embed(torch.where(curvature == 0, 1.0, curvature))
        alpha = torch.linalg.solve_triangular(lower, a[:, :, None], upper=False)
        w = curvature[:, :, None] * alpha - gamma[:, :, None] * (b[:, :, None] - yy @ alpha)
        c = torch.linalg.solve_triangular(lower.mT, w, upper=True)
        coefficients = torch.zeros(self.trials, 2 * slots, dtype=g.dtype, device=g.device)
        coefficients.scatter_(1, torch.cat([order, order + slots], 1), torch.cat([c[:, :, 0], -gamma * alpha[:, :, 0]], 1))
        return q * gamma + (coefficients[:, None] @ self.pairs)[:, 0]

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:
        """One `torch.optim.LBFGS.step` per trial. `closure` fills `.grad` and returns per-trial losses (it runs
        with gradients enabled; the optimiser's own arithmetic records no graph, as torch's).

        On a CPU the optimiser's own arithmetic (vectors, the pairs' Gram matrices) runs on one intra-op thread
        and the closure on the caller's: for tensors this small a thread pool's start and join cost more than
        the work, and on a loaded CPU each parallel region can wait a whole time slice (7-16 ms per operation
        measured at 2 threads and load 5, against 0.01-0.04 ms on one thread)."""
        threads = torch.get_num_threads() if self.params[0].device.type == "cpu" else 1
        if threads == 1:
            return self._step(closure)

        def evaluate() -> torch.Tensor:
            torch.set_num_threads(threads)
            try:
                return closure()
            finally:
                torch.set_num_threads(1)

        torch.set_num_threads(1)
        try:
            return self._step(evaluate)
        finally:
            torch.set_num_threads(threads)

    def _step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:
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
            if not bool(active.any()):            # no trial moves: nothing to evaluate (torch breaks here too)
                break
            taken = d * column(t)
            self._add(torch.where(column(active), taken, 0.0))
            if local_iter == self.max_iter:
                break
            with torch.enable_grad():
                new_loss = closure().detach()
            new_grad = self._flat_grad()
            evals += 1
            loss = torch.where(active, new_loss, loss)
            flat_grad = torch.where(column(active), new_grad, flat_grad)
            if evals >= self.max_eval:
                break
            largest = flat_grad.abs().amax(1)
            # finite, not optimal, and a step and a loss change above the tolerance; a NaN compares False
            # in every test, as it fails `finite`
            moving_on = (loss.abs() < math.inf) & (largest < math.inf) & (largest > self.tolerance_grad)
            moving_on &= taken.abs().amax(1) > self.tolerance_change
            moving_on &= (loss - prev_loss).abs() >= self.tolerance_change
            active = active & moving_on
        self.d, self.t, self.prev_flat_grad = d, t, prev
        return orig_loss

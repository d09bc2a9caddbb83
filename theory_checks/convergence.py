"""Adam and orthogonal transforms beyond exact invariance (JAST, Appendix A.4).

- Example 1 (A.4.1): on f(y) = y^2 + 6 sin^2 y with y = W^T X, Adam from (W, X) and from the
  pi/4-rotated (UW, UX) can end in different minima. Run for torch's standard Adam and for the
  paper's recursion (`theory_checks.adam`), and report which start gets stuck.
- Lemma 4: the paper's Adam preconditioner satisfies D_k <= Gamma I, Gamma the largest gradient norm,
  with or without the rotation.
- Lemmas 5 and 6: the one-step descent inequalities, checked along the paper's Adam on a quadratic
  L(W) = 0.5 ||XW - B||_F^2, for the data X and for XU, at several learning rates. Lemma 6 is checked
  with the standard PL form 0.5 ||grad L||^2 >= mu (L - L*); the paper's Assumption 2 reads
  ||grad L|| >= 2 mu (L - L*) (norm not squared), under which its proof step does not follow; the
  best mu of that form along the run, and whether Lemma 6 holds with it, are reported in `details`.

All runs go through the protocol: the client is a linear layer and the server an honest server
with no parameters whose loss is the objective (`loss_only_server`), so the iterates y_k of Example 1
are the activations the client sent.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from theory_checks.adam import Moments
from theory_checks.invariance import gaussian_matrix, linear
from theory_checks.protocol_runs import loss_only_server, train
from theory_checks.records import CheckResult, tolerance_for
from theory_checks.transforms import make_transform, orthogonality_error
from vfl.protocol import Client

# --- Example 1 ---------------------------------------------------------------------------------------

EXAMPLE1_LR = 0.6
EXAMPLE1_STEPS = 1000
EXAMPLE1_W = (1.915 + math.sqrt(2) * 0.6, 0.0)
EXAMPLE1_X = (1.0, 0.0)
EXAMPLE1_VARIANTS = {"adam": "torch's standard Adam (betas 0.9/0.999, eps 1e-8, bias-corrected)",
                     "paper-adam": "the paper's recursion (m_0 = g_0, D_0 = |g_0|, no bias correction, no eps)"}
PAPER_SENTENCE = "Adam gets stuck in the local minimum if starting from (UW, UX), the rotated start"
OUTCOME_RADIUS = 1e-3


def example1_objective(y: torch.Tensor) -> torch.Tensor:
    """f(y) = y^2 + 6 sin^2 y: global minimum f(0) = 0, local minima at y = +-2.6130 (f = 8.354)."""
    return y ** 2 + 6 * torch.sin(y) ** 2


def example1_local_minimum() -> float:
    """The positive local minimum of f: Newton on f'(y) = 2y + 6 sin 2y from 2.6."""
    y = 2.6
    for _ in range(50):
        y -= (2 * y + 6 * math.sin(2 * y)) / (2 + 12 * math.cos(2 * y))
    return y


def rotation_pi_4(dtype: torch.dtype) -> torch.Tensor:
    """The paper's U = (1/sqrt 2) [[1, -1], [1, 1]]."""
    return torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=dtype) / math.sqrt(2)


@dataclass(frozen=True)
class Example1Runs:
    """y_k (the activation the client sent at step k) for each Adam variant and start."""
    trajectories: dict[str, dict[str, tuple[float, ...]]]     # variant -> "original"/"rotated" -> y_0..y_{K-1}
    local_minimum: float

    def outcome(self, variant: str, start: str) -> str:
        y = self.trajectories[variant][start][-1]
        if abs(y) < OUTCOME_RADIUS:
            return "converges to the global minimum y = 0"
        if abs(abs(y) - self.local_minimum) < OUTCOME_RADIUS:
            return f"stuck in the local minimum y = {y:+.4f}"
        return f"ends elsewhere, y = {y:+.4f}"

    def stuck(self, variant: str) -> list[str]:
        return [start for start in ("original", "rotated") if self.outcome(variant, start).startswith("stuck")]


@functools.lru_cache(maxsize=4)
def example1_runs(dtype: torch.dtype = torch.float64) -> Example1Runs:
    """Run both starts under both Adam variants through the protocol (cached: the check and the figure share it)."""
    u = rotation_pi_4(dtype)
    w = torch.tensor(EXAMPLE1_W, dtype=dtype)
    x = torch.tensor(EXAMPLE1_X, dtype=dtype)
    starts = {"original": (w, x), "rotated": (u @ w, u @ x)}

    def trajectory(variant: str, weight: torch.Tensor, data: torch.Tensor) -> tuple[float, ...]:
        # The client holds the row X and the layer y = XW; the server's whole model is the loss f(y).
        server = loss_only_server(lambda h, _: example1_objective(h).sum())
        batches = [(data[None, :], torch.zeros(1, dtype=torch.long))] * EXAMPLE1_STEPS
        run = train(linear(weight[:, None]), server, batches, optimizer=variant, lr=EXAMPLE1_LR)
        return tuple(float(h) for h in run.activations())

    trajectories = {variant: {start: trajectory(variant, sw, sx) for start, (sw, sx) in starts.items()}
                    for variant in EXAMPLE1_VARIANTS}
    return Example1Runs(trajectories, example1_local_minimum())


def example1_adam_rotation(dtype: torch.dtype = torch.float64) -> CheckResult:
    """Example 1 (A.4.1, Figure 7): Adam is not rotation-invariant on a non-convex function.

    Claim as an invariance: standard Adam (lr 0.6, 1000 steps) from (W, X) and from (UW, UX) ends
    at the same loss. Expected: breaks. Measured: |f(y_final, original) - f(y_final, rotated)|.
    `details` records which start got stuck under each Adam variant and whether that agrees with the
    paper's sentence (the rotated start gets stuck); a careful reading of standard Adam finds the opposite.
    """
    runs = example1_runs(dtype)
    final = {v: {s: runs.trajectories[v][s][-1] for s in ("original", "rotated")} for v in EXAMPLE1_VARIANTS}
    loss = {v: {s: float(example1_objective(torch.tensor(y, dtype=torch.float64))) for s, y in ys.items()}
            for v, ys in final.items()}
    measured = abs(loss["adam"]["original"] - loss["adam"]["rotated"])
    outcomes = {v: {s: runs.outcome(v, s) for s in ("original", "rotated")} for v in EXAMPLE1_VARIANTS}
    finding = "; ".join(
        f"{v}: original {outcomes[v]['original']}, rotated {outcomes[v]['rotated']}" for v in EXAMPLE1_VARIANTS)
    details = {
        "finding": f"Example 1 -- {finding}. Paper: '{PAPER_SENTENCE}'; "
                   f"standard Adam agrees with the paper: {runs.stuck('adam') == ['rotated']}.",
        "final_y": final, "final_loss": loss, "outcomes": outcomes,
        "stuck_starts": {v: runs.stuck(v) for v in EXAMPLE1_VARIANTS},
        "paper_sentence": PAPER_SENTENCE,
        "agrees_with_paper": {v: runs.stuck(v) == ["rotated"] for v in EXAMPLE1_VARIANTS},
        "variants": EXAMPLE1_VARIANTS, "lr": EXAMPLE1_LR, "steps": EXAMPLE1_STEPS,
        "local_minimum_y": runs.local_minimum,
    }
    return CheckResult.judge("example1-adam-rotation", "Standard Adam (lr 0.6) from (W, X) and from the "
                             "pi/4-rotated (UW, UX) reaches the same minimum of y^2 + 6 sin^2 y.", measured,
                             tolerance_for(dtype), "breaks", details)


def example1_figure(runs: Example1Runs):
    """The two starts' trajectories under each Adam variant: y_k over steps, and the iterates on f(y).

    Returns a `matplotlib.figure.Figure` (no pyplot state, no rc changes); save it with `Run.save_figure`.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4))
    over_steps, on_curve = figure.subplots(1, 2)
    styles = {"original": "tab:blue", "rotated": "tab:orange"}
    dashes = {"adam": "-", "paper-adam": ":"}
    grid = torch.linspace(-3.5, 3.5, 400, dtype=torch.float64)
    on_curve.plot(grid.numpy(), example1_objective(grid).numpy(), color="0.6", lw=1, label="f(y) = y² + 6 sin² y")
    for variant, starts in runs.trajectories.items():
        for start, ys in starts.items():
            label = f"{variant}, {start} start: {runs.outcome(variant, start)}"
            over_steps.plot(range(len(ys)), ys, dashes[variant], color=styles[start], lw=1.2, label=label)
            if variant == "adam":
                y = torch.tensor(ys[:60], dtype=torch.float64)
                on_curve.plot(y.numpy(), example1_objective(y).numpy(), ".-", color=styles[start], ms=3, lw=0.6,
                              label=f"adam, {start} start (first 60 steps)")
    over_steps.axhline(runs.local_minimum, color="0.7", lw=0.8)
    over_steps.axhline(0.0, color="0.7", lw=0.8)
    over_steps.set_xscale("symlog", linthresh=1)
    over_steps.set(xlim=(0, EXAMPLE1_STEPS), xlabel="step k (symlog)", ylabel="y_k = W_k^T X (the activation sent)",
                   title="Example 1: Adam, lr 0.6, original vs pi/4-rotated start")
    on_curve.set(xlabel="y", ylabel="f(y)", title="standard Adam iterates on f")
    over_steps.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    on_curve.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    figure.tight_layout()
    return figure


# --- Lemmas 4-6 on a quadratic --------------------------------------------------------------------

QUADRATIC = {"n": 32, "d": 6, "d_h": 2, "steps": 150}
LEARNING_RATES = (0.01, 0.1)


@dataclass(frozen=True)
class AdamStep:
    """One step k of the paper's Adam on L(W) = 0.5 ||XW - B||^2 (W flattened)."""
    loss: float              # L(W_k)
    next_loss: float         # L(W_{k+1})
    grad: torch.Tensor       # g_k = grad L(W_k)
    moments: Moments         # m_k and D_k^2 after folding in g_k
    delta: torch.Tensor      # W_{k+1} - W_k
    gamma_so_far: float      # max_{j<=k} ||g_j||


@dataclass(frozen=True)
class QuadraticRun:
    lr: float
    rotated: bool
    steps: tuple[AdamStep, ...]


@dataclass(frozen=True)
class Quadratic:
    """The problem's constants: smoothness L, standard PL constant mu, optimum L*, and the runs."""
    smoothness: float        # lambda_max(X^T X)
    pl_mu: float             # lambda_min(X^T X) (X has full column rank)
    l_star: float
    runs: tuple[QuadraticRun, ...]
    orthogonality_error: float

    @property
    def gamma(self) -> float:
        """Assumption 3's bound along the runs: the largest gradient norm seen."""
        return max(step.gamma_so_far for run in self.runs for step in run.steps)


def _paper_adam_run(x: torch.Tensor, targets: torch.Tensor, w0: torch.Tensor, lr: float) -> list[AdamStep]:
    """Train the paper's Adam through the protocol and read each step's g_k, m_k, D_k from the optimiser."""
    grads: list[torch.Tensor] = []
    moments: list[Moments] = []

    def observe(client: Client) -> None:
        weight = client.model.weight
        grads.append(weight.grad.detach().clone())
        moments.append(client.optimizer.state[weight]["moments"])

    steps = QUADRATIC["steps"]
    server = loss_only_server(lambda h, _: 0.5 * ((h - targets) ** 2).sum())
    batches = [(x, torch.zeros(len(x), dtype=torch.long))] * (steps + 1)   # one extra round reads L(W_K)
    run = train(linear(w0), server, batches, optimizer="paper-adam", lr=lr, observe=observe)
    weights = [state["weight"] for state in run.client_states]
    out, largest = [], 0.0
    for k in range(steps):
        largest = max(largest, float(grads[k].norm()))
        out.append(AdamStep(run.losses[k], run.losses[k + 1], grads[k].flatten(),
                            Moments(moments[k].m.flatten(), moments[k].d2.flatten()),
                            (weights[k + 1] - weights[k]).flatten(), largest))
    return out


@functools.lru_cache(maxsize=4)
def quadratic_runs(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> Quadratic:
    """The paper's Adam on 0.5 ||XW - B||^2 from (X, W0) and (XU, U^T W0), for each learning rate."""
    gen = torch.Generator().manual_seed(0)
    n, d, d_h = QUADRATIC["n"], QUADRATIC["d"], QUADRATIC["d_h"]
    x = torch.randn(n, d, generator=gen, dtype=torch.float64).to(dtype)
    targets = torch.randn(n, d_h, generator=gen, dtype=torch.float64).to(dtype)
    u = make_transform(transform, d, d, gen, dtype)
    w0 = gaussian_matrix(d, d_h, gen, dtype)
    eig = torch.linalg.eigvalsh(x.T.to(torch.float64) @ x.to(torch.float64))
    residual = x.to(torch.float64) @ torch.linalg.lstsq(x.to(torch.float64), targets.to(torch.float64)).solution
    l_star = float(0.5 * ((residual - targets.to(torch.float64)) ** 2).sum())
    runs = tuple(QuadraticRun(lr, rotated, tuple(_paper_adam_run(x @ u if rotated else x, targets,
                                                                 u.T @ w0 if rotated else w0, lr)))
                 for lr in LEARNING_RATES for rotated in (False, True))
    return Quadratic(float(eig.max()), float(eig.min()), l_star, runs, orthogonality_error(u))


def _descent_terms(step: AdamStep, lr: float, smoothness: float) -> tuple[float, float]:
    """The shared right-hand-side terms of Lemmas 5 and 6 (alpha = min diag D_k):
    gamma/(2 alpha) ||g - m||^2 - (1/(2 gamma) - L/(2 alpha)) ||dW||^2_D."""
    d = step.moments.d
    alpha = float(d.min())
    momentum_error = lr / (2 * alpha) * float(((step.grad - step.moments.m) ** 2).sum())
    movement = (1 / (2 * lr) - smoothness / (2 * alpha)) * float((d * step.delta ** 2).sum())
    return momentum_error, movement


def _relative_excess(lhs: float, rhs_terms: list[float], loss: float) -> float:
    """(LHS - RHS) over the size of the quantities in that step, |L(W_k)| + sum |terms|: negative is
    slack, and rounding (of L near L*) stays at the dtype's precision."""
    return (lhs - sum(rhs_terms)) / (abs(loss) + sum(abs(t) for t in rhs_terms))


def lemma4_preconditioner_bound(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 4 (A.4.2): the paper's Adam keeps every diagonal entry of D_k at most Gamma, the largest
    gradient norm so far, for the original and the rotated problem alike.

    Measured: max over runs and steps of max_i D_k[i] / Gamma_k - 1 (negative: slack).
    """
    q = quadratic_runs(dtype, transform)
    excess = max(float(step.moments.d.max()) / step.gamma_so_far - 1 for run in q.runs for step in run.steps)
    alpha = min(float(step.moments.d.min()) for run in q.runs for step in run.steps)
    return CheckResult.judge("lemma4-preconditioner-bound", "The paper's Adam preconditioner satisfies "
                             "D_k <= Gamma I (Gamma = largest gradient norm), with and without rotating the data.",
                             excess, tolerance_for(dtype), "holds",
                             {"gamma": q.gamma, "smallest_alpha": alpha, "learning_rates": list(LEARNING_RATES),
                              "orthogonality_error": q.orthogonality_error, "transform": transform})


def lemma5_descent(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 5 (Descent Lemma, A.4.2), along the paper's Adam on a quadratic (L-smooth, L = lambda_max(X^T X)):

        L(W_{k+1}) <= L(W_k) + gamma/(2 alpha) ||g_k - m_k||^2 - (1/(2 gamma) - L/(2 alpha)) ||W_{k+1} - W_k||^2_{D_k}
                      - gamma/2 ||g_k||^2_{D_k^{-1}},     alpha = min diag D_k.

    Measured: max over runs and steps of (LHS - RHS) / (|L(W_k)| + sum of |RHS terms|) (negative: slack).
    """
    q = quadratic_runs(dtype, transform)
    worst = -math.inf
    for run in q.runs:
        for step in run.steps:
            momentum_error, movement = _descent_terms(step, run.lr, q.smoothness)
            preconditioned = run.lr / 2 * float((step.grad ** 2 / step.moments.d).sum())
            rhs = [step.loss, momentum_error, -movement, -preconditioned]
            worst = max(worst, _relative_excess(step.next_loss, rhs, step.loss))
    return CheckResult.judge("lemma5-descent", "Each step of the paper's Adam on an L-smooth quadratic satisfies "
                             "the descent inequality of Lemma 5, for X and for XU.", worst, tolerance_for(dtype),
                             "holds", {"smoothness_L": q.smoothness, "learning_rates": list(LEARNING_RATES),
                                       "steps": QUADRATIC["steps"], "orthogonality_error": q.orthogonality_error,
                                       "transform": transform})


def _lemma6_excess(q: Quadratic, mu: float) -> float:
    worst = -math.inf
    for run in q.runs:
        for step in run.steps:
            momentum_error, movement = _descent_terms(step, run.lr, q.smoothness)
            rhs = [(1 - run.lr * mu / q.gamma) * (step.loss - q.l_star), momentum_error, -movement]
            worst = max(worst, _relative_excess(step.next_loss - q.l_star, rhs, step.loss))
    return worst


def lemma6_pl_descent(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 6 (A.4.2) with the standard PL form 0.5 ||grad L||^2 >= mu (L - L*), mu = lambda_min(X^T X):

        L(W_{k+1}) - L* <= (1 - gamma mu / Gamma)(L(W_k) - L*) + gamma/(2 alpha) ||g_k - m_k||^2
                           - (1/(2 gamma) - L/(2 alpha)) ||W_{k+1} - W_k||^2_{D_k}.

    The paper's Assumption 2 is ||grad L|| >= 2 mu (L - L*) (norm not squared); its proof needs
    ||grad L||^2 >= 2 mu (L - L*), which that form gives only where ||grad L|| >= 1. `details` has the
    largest mu of the paper's form along these runs and Lemma 6's excess with it.
    Measured: max (LHS - RHS) / (|L(W_k)| + sum of |RHS terms|) with the standard mu (negative: slack).
    """
    q = quadratic_runs(dtype, transform)
    gaps = [(float(step.grad.norm()), step.loss - q.l_star) for run in q.runs for step in run.steps]
    paper_mu = min(g / (2 * gap) for g, gap in gaps if gap > 0)
    return CheckResult.judge("lemma6-pl-descent", "With the standard PL form, each step of the paper's Adam on a "
                             "quadratic satisfies Lemma 6's contraction inequality, for X and for XU.",
                             _lemma6_excess(q, q.pl_mu), tolerance_for(dtype), "holds",
                             {"pl_mu_standard": q.pl_mu, "gamma": q.gamma, "l_star": q.l_star,
                              "paper_form_mu": paper_mu, "excess_with_paper_form_mu": _lemma6_excess(q, paper_mu),
                              "learning_rates": list(LEARNING_RATES), "orthogonality_error": q.orthogonality_error,
                              "transform": transform})

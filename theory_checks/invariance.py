"""The orthogonal-invariance results of JAST (Semenov et al., arXiv 2412.11689, section 3 and
Appendix A.1-A.4), each run through the lab's split protocol.

Every check trains twice with `vfl.protocol` (Client, honest Server or MaliciousServer,
`train_epoch`), on the same server initialisation and the same batch order, once with the original
pair and once with the transformed one, and reports the largest relative gap between what the two
runs sent across the cut (and between the parameters the lemma says correspond). A check takes
`transform`, the kind of U (`theory_checks.transforms`), so a test can hand it a matrix that is not
orthogonal and see it fail.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from theory_checks.protocol_runs import (ProtocolRun, State, batch_order, compare, honest_server, loss_only_server,
                                         relative_gap, same_batches, train)
from theory_checks.records import CheckResult, Verdict, tolerance_for
from theory_checks.transforms import FixedTransform, make_transform, orthogonality_error
from vfl.protocol import MaliciousServer


@dataclass(frozen=True)
class Sizes:
    """The small problem every invariance check runs on (JAST Sec. 2's setting at CPU scale)."""
    n: int = 64              # samples
    d: int = 20              # client features
    d_h: int = 8             # cut-layer width
    semi_d: int = 30         # columns of the semi-orthogonal U (d x semi_d, orthonormal rows)
    pre_cut: int = 12        # width before the linear cut layer (Lemma 3)
    hidden: int = 16         # server hidden width
    classes: int = 4
    batch: int = 16
    steps: int = 100         # protocol rounds for the SGD checks
    lr: float = 0.05         # client learning rate (SGD)
    server_lr: float = 0.01  # the server trains with Adam: its optimiser does not matter (it sees identical H)


SIZES = Sizes()
SEED = 0


# --- building blocks -------------------------------------------------------------------------------

def linear(weight: torch.Tensor, bias: torch.Tensor | None = None) -> nn.Linear:
    """An `nn.Linear` computing `x @ weight + bias`: `weight` is (in, out), as W in the paper's H = XW."""
    layer = nn.utils.skip_init(nn.Linear, weight.shape[0], weight.shape[1], bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight.T)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def gaussian_matrix(rows: int, cols: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """N(0, 1/rows) entries: a first-layer initialisation that keeps H of order one."""
    return (torch.randn(rows, cols, generator=gen, dtype=torch.float64) / rows ** 0.5).to(dtype)


def server_model(gen: torch.Generator, dtype: torch.dtype, sizes: Sizes = SIZES) -> nn.Module:
    """The label party's top model: Linear -> ReLU -> Linear, initialised from `gen`."""
    return nn.Sequential(
        linear(gaussian_matrix(sizes.d_h, sizes.hidden, gen, dtype), gaussian_matrix(1, sizes.hidden, gen, dtype)[0]),
        nn.ReLU(),
        linear(gaussian_matrix(sizes.hidden, sizes.classes, gen, dtype), gaussian_matrix(1, sizes.classes, gen, dtype)[0]),
    )


@dataclass(frozen=True)
class Task:
    """Client data, labels, the server's initial top model and the batch order shared by both runs."""
    x: torch.Tensor
    y: torch.Tensor
    server: nn.Module
    order: list[torch.Tensor]

    def train_honest(self, client_model: nn.Module, data: torch.Tensor, *, optimizer: str, lr: float) -> ProtocolRun:
        """One protocol training of `client_model` on `data` (X or its transform) against a fresh copy
        of the same server."""
        server = honest_server(copy.deepcopy(self.server), optimizer="adam", lr=SIZES.server_lr)
        return train(client_model, server, same_batches(data, self.y, self.order), optimizer=optimizer, lr=lr)


def make_task(gen: torch.Generator, dtype: torch.dtype, steps: int, sizes: Sizes = SIZES) -> Task:
    x = torch.randn(sizes.n, sizes.d, generator=gen, dtype=torch.float64).to(dtype)
    y = torch.randint(0, sizes.classes, (sizes.n,), generator=gen)
    return Task(x, y, server_model(gen, dtype, sizes), batch_order(sizes.n, sizes.batch, steps, gen))


def _judge(name: str, claim: str, measured: float, dtype: torch.dtype, expected: Verdict, u: torch.Tensor,
           transform: str, details: dict, holds: bool | None = None) -> CheckResult:
    details = {"transform": transform, "orthogonality_error": orthogonality_error(u), **details}
    return CheckResult.judge(name, claim, measured, tolerance_for(dtype), expected, details, holds)


# --- Lemma 1 and its variants (momentum, semi-orthogonal U, bias, Adam) ------------------------------

def _rotated_linear_client(name: str, claim: str, *, dtype: torch.dtype, transform: str, optimizer: str,
                           lr: float = SIZES.lr, steps: int = SIZES.steps, bias: bool = False,
                           cols: int = SIZES.d, expected: Verdict = "holds") -> CheckResult:
    """Lemma 1's experiment: a linear client trained on (X, W_0) and on (XU, U^T W_0).

    The transformed client holds the data XU (U is applied to the data, as the lemma's pair
    {XU, U^T W_0} states) and starts from U^T W_0; the same bias, server and batches. It must send
    the same H_k at every step and hold W~_k = U^T W_k.
    """
    s = SIZES
    gen = torch.Generator().manual_seed(SEED)
    task = make_task(gen, dtype, steps)
    u = make_transform(transform, s.d, cols, gen, dtype)
    w0 = gaussian_matrix(s.d, s.d_h, gen, dtype)
    b0 = gaussian_matrix(1, s.d_h, gen, dtype)[0] if bias else None
    original = task.train_honest(linear(w0, b0), task.x, optimizer=optimizer, lr=lr)
    rotated = task.train_honest(linear(u.T @ w0, b0), task.x @ u, optimizer=optimizer, lr=lr)
    # nn.Linear stores W^T, so W~ = U^T W reads weight~ = weight @ U.
    gaps = compare(original, rotated, lambda state: {**state, "weight": state["weight"] @ u})
    return _judge(name, claim, gaps.worst, dtype, expected, u, transform,
                  {**gaps.as_dict(), "optimizer": optimizer, "lr": lr, "steps": steps, "u_shape": list(u.shape)})


def lemma1_sgd(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 1 (section 3.2, proof A.1): under SGD, (X, W_0) and (XU, U^T W_0) send identical activations."""
    return _rotated_linear_client(
        "lemma1-sgd", "Minibatch SGD from (XU, U^T W0) sends the same H_k as from (X, W0) at every step, "
        "with W~_k = U^T W_k (U orthogonal).", dtype=dtype, transform=transform, optimizer="sgd")


def lemma1_momentum(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 1 with heavy-ball momentum: the update is still linear in the gradient history, so it holds."""
    return _rotated_linear_client(
        "lemma1-momentum", "Momentum SGD (0.9) from (XU, U^T W0) sends the same H_k as from (X, W0), "
        "with W~_k = U^T W_k.", dtype=dtype, transform=transform, optimizer="momentum")


def lemma1_semi_orthogonal(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 1 for a semi-orthogonal U (d x d', d' > d, U U^T = I_d): the paper claims it, proves the square case."""
    return _rotated_linear_client(
        "lemma1-semi-orthogonal", f"SGD from (XU, U^T W0) with a {SIZES.d}x{SIZES.semi_d} U with orthonormal "
        "rows sends the same H_k as from (X, W0).", dtype=dtype, transform=transform, optimizer="sgd",
        cols=SIZES.semi_d)


def corollary2_bias_lemma1(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Corollary 2 (A.2) for Lemma 1: a client layer with a bias keeps the invariance."""
    return _rotated_linear_client(
        "corollary2-bias-lemma1", "With a bias in the client layer, SGD from (XU, U^T W0, b0) sends the same "
        "H_k as from (X, W0, b0).", dtype=dtype, transform=transform, optimizer="sgd", bias=True)


ADAM_LR = 0.01
ADAM_STEPS = 10


def remark4_adam_dense(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Remark 4 (A.4): Adam's coordinate-wise preconditioner does not commute with a dense U, so the
    transformed run sends different activations after the first step. Expected: breaks."""
    return _rotated_linear_client(
        "remark4-adam-dense", f"Adam (lr {ADAM_LR}) from (XU, U^T W0) sends the same H_k as from (X, W0) for a "
        "dense orthogonal U; the paper says it does not.", dtype=dtype, transform=transform, optimizer="adam",
        lr=ADAM_LR, steps=ADAM_STEPS, expected="breaks")


def remark4_adam_permutation(dtype: torch.dtype = torch.float64, transform: str = "permutation") -> CheckResult:
    """Remark 4's exception: Adam is equivariant to permuting coordinates, so a permutation U keeps the invariance."""
    return _rotated_linear_client(
        "remark4-adam-permutation", "Adam from (XU, U^T W0) sends the same H_k as from (X, W0) when U is a "
        "permutation matrix.", dtype=dtype, transform=transform, optimizer="adam", lr=ADAM_LR, steps=ADAM_STEPS)


def remark4_adam_sign_flip(dtype: torch.dtype = torch.float64, transform: str = "sign-flip") -> CheckResult:
    """Remark 4's exception: Adam is equivariant to sign flips (m flips, v does not), so a +-1 diagonal U keeps it."""
    return _rotated_linear_client(
        "remark4-adam-sign-flip", "Adam from (XU, U^T W0) sends the same H_k as from (X, W0) when U is a "
        "diagonal of random signs.", dtype=dtype, transform=transform, optimizer="adam", lr=ADAM_LR,
        steps=ADAM_STEPS)


# --- Corollary 1 -----------------------------------------------------------------------------------

CLEARLY_DIFFERENT = 1e-3
"""A recovered matrix this far (relative) from X is "not X"."""


def corollary1_invertible_layer(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Corollary 1 (section 3.2): a server that knows the client's invertible first layer W_1 inverts the
    first message it receives, H_1 W_1^{-1}, and gets XU, not X.

    The client trains on XU (Lemma 1's conditions) with a square W_1. Holds when the recovered matrix
    equals XU to the tolerance and is clearly different from X (`CLEARLY_DIFFERENT`); U = I (a
    legitimate orthogonal matrix that hides nothing) makes it fail.
    """
    s = SIZES
    gen = torch.Generator().manual_seed(SEED)
    task = make_task(gen, dtype, steps=3, sizes=Sizes(d_h=s.d))      # a square first layer: d_h = d
    u = make_transform(transform, s.d, s.d, gen, dtype)
    w1 = gaussian_matrix(s.d, s.d, gen, dtype)
    run = task.train_honest(linear(w1), task.x @ u, optimizer="sgd", lr=s.lr)
    first = run.activations()[0]
    recovered = torch.linalg.solve(w1, first, left=False)           # H_1 W_1^{-1}
    x_batch = task.x[task.order[0]]
    measured = relative_gap(x_batch @ u, recovered)
    distance_to_x = relative_gap(x_batch, recovered)
    return _judge("corollary1-invertible-layer", "A server that knows the invertible first layer W1 recovers "
                  "H1 W1^{-1} = XU, which is not X.", measured, dtype, "holds", u, transform,
                  {"distance_to_x": distance_to_x, "clearly_different_above": CLEARLY_DIFFERENT,
                   "condition_number_w1": float(torch.linalg.cond(w1))},
                  holds=measured <= tolerance_for(dtype) and distance_to_x > CLEARLY_DIFFERENT)


# --- Lemma 2 and Corollary 2 (malicious server) ----------------------------------------------------

FAKE_STEPS = 30
FAKE_LR = 0.01


class PerSampleBias(nn.Module):
    """H + B with one bias row per sample (B is n x d_h): the bias Corollary 2's proof writes (B_{k+1} =
    B_1 - gamma sum G_i). Only meaningful with the full batch."""

    def __init__(self, b: torch.Tensor):
        super().__init__()
        self.b = nn.Parameter(b.clone())

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.b


def _fake_gradients(name: str, claim: str, *, dtype: torch.dtype, transform: str, bias: bool) -> CheckResult:
    """Lemma 2's experiment: a malicious server sends fixed Gaussian "gradients" G_1..G_K; client A has
    data X and a fixed layer U before W_1, client B has data XV and fixed layer V^T U, both start from
    the server-known W_1 (and bias). Full batch, SGD.

    Must hold: A and B send the same H_k (the server cannot tell (X, U) from (XV, V^T U)), and A's
    activations follow H_{k+1} = XU W_1 + bias_1 - gamma [XX^T + P] sum_{i<=k} G_i, with P = 0 without
    a bias. With a bias (Corollary 2) both kinds are run: `nn.Linear`'s one bias row broadcast over the
    batch (P = 11^T), and the paper's per-sample bias matrix B (P = I, the paper's [I + XX^T]). The
    paper's [I + XX^T] applied to the broadcast bias does not fit for n > 1; `details` reports that gap.
    """
    s = SIZES
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(s.n, s.d, generator=gen, dtype=torch.float64).to(dtype)
    u = make_transform(transform, s.d, s.d, gen, dtype)
    v = make_transform(transform, s.d, s.d, gen, dtype)
    w1 = gaussian_matrix(s.d, s.d_h, gen, dtype)
    b_row = gaussian_matrix(1, s.d_h, gen, dtype)[0]
    b_matrix = gaussian_matrix(s.n, s.d_h, gen, dtype)
    fakes = [torch.randn(s.n, s.d_h, generator=gen, dtype=torch.float64).to(dtype) for _ in range(FAKE_STEPS)]
    summed = torch.cumsum(torch.stack([torch.zeros_like(fakes[0])] + fakes[:-1]), dim=0)   # sum_{i<k} G_i
    no_labels = torch.zeros(s.n, dtype=torch.long)
    gram = x @ x.T

    def run(data: torch.Tensor, fixed: torch.Tensor, head: list[nn.Module]) -> ProtocolRun:
        client = nn.Sequential(FixedTransform(fixed), *copy.deepcopy(head))
        server = MaliciousServer(lambda h, step: fakes[step])
        return train(client, server, [(data, no_labels)] * FAKE_STEPS, optimizer="sgd", lr=FAKE_LR)

    def closed_form_gap(run_a: ProtocolRun, bias_1: torch.Tensor | float, extra: torch.Tensor) -> float:
        start = x @ u @ w1 + bias_1
        return max(relative_gap(start - FAKE_LR * (gram + extra) @ g, h) for g, h in zip(summed, run_a.activations()))

    zeros, ones, eye = (torch.zeros(s.n, s.n, dtype=dtype), torch.ones(s.n, s.n, dtype=dtype),
                        torch.eye(s.n, dtype=dtype))
    cases = ({"shared bias row": ([linear(w1, b_row)], b_row, ones),
              "per-sample bias matrix": ([linear(w1), PerSampleBias(b_matrix)], b_matrix, eye)}
             if bias else {"no bias": ([linear(w1)], 0.0, zeros)})
    details: dict = {"steps": FAKE_STEPS, "lr": FAKE_LR}
    worst = 0.0
    for case, (head, bias_1, extra) in cases.items():
        a, b = run(x, u, head), run(x @ v, v.T @ u, head)
        gaps = compare(a, b, lambda state: state)
        closed = closed_form_gap(a, bias_1, extra)
        details[case] = {**gaps.as_dict(), "closed_form_gap": closed}
        worst = max(worst, gaps.worst, closed)
        if case == "shared bias row":
            details["paper_I_plus_XXt_on_shared_bias_gap"] = closed_form_gap(a, bias_1, eye)
    return _judge(name, claim, worst, dtype, "holds", u, transform, details)


def lemma2_fake_gradients(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 2 (proof A.2): against fake gradients, (X, U) and (XV, V^T U) are indistinguishable."""
    return _fake_gradients(
        "lemma2-fake-gradients", "Against a malicious server's fake gradients, (X, U) and (XV, V^T U) send the "
        "same H_k, and H_{k+1} = XU W1 - gamma XX^T sum G_i.", dtype=dtype, transform=transform, bias=False)


def corollary2_bias_lemma2(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Corollary 2 (A.2) for Lemma 2: with a bias the closed form gains the bias term and still only XU W_1 changes."""
    return _fake_gradients(
        "corollary2-bias-lemma2", "With a bias, (X, U) and (XV, V^T U) send the same H_k against fake gradients; "
        "H_{k+1} = XU W1 + B1 - gamma [XX^T + P] sum G_i, P = I for the paper's per-sample bias, 11^T for a "
        "shared bias row.", dtype=dtype, transform=transform, bias=True)


# --- Lemma 3 -----------------------------------------------------------------------------------------

def lemma3_cut_layer(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Lemma 3 (Cut Layer Lemma, section 3.3, proof A.3): Z -> ZU before a linear cut layer with
    W_1 -> U^T W_1 leaves the activations and the earlier parameters theta unchanged.

    Client: Linear(d, m) -> ReLU -> Linear(m, d_h) (the cut layer), against the same network with a
    fixed U (m x m) inserted after the ReLU and cut-layer init U^T W_1; same theta init, same data X.
    Must hold: identical H_k, identical theta_k, W~_k = U^T W_k.
    """
    s = SIZES
    gen = torch.Generator().manual_seed(SEED)
    task = make_task(gen, dtype, s.steps)
    u = make_transform(transform, s.pre_cut, s.pre_cut, gen, dtype)
    theta_w = gaussian_matrix(s.d, s.pre_cut, gen, dtype)
    theta_b = gaussian_matrix(1, s.pre_cut, gen, dtype)[0]
    w1 = gaussian_matrix(s.pre_cut, s.d_h, gen, dtype)
    b1 = gaussian_matrix(1, s.d_h, gen, dtype)[0]
    plain = nn.Sequential(linear(theta_w, theta_b), nn.ReLU(), linear(w1, b1))
    rotated = nn.Sequential(linear(theta_w, theta_b), nn.ReLU(), FixedTransform(u), linear(u.T @ w1, b1))
    a = task.train_honest(plain, task.x, optimizer="sgd", lr=s.lr)
    b = task.train_honest(rotated, task.x, optimizer="sgd", lr=s.lr)

    def expected_rotated(state: State) -> State:
        return {"0.weight": state["0.weight"], "0.bias": state["0.bias"],
                "3.weight": state["2.weight"] @ u, "3.bias": state["2.bias"]}

    gaps = compare(a, b, expected_rotated)
    theta_gap = compare(a, b, lambda st: {"0.weight": st["0.weight"], "0.bias": st["0.bias"]}).client_parameters
    return _judge("lemma3-cut-layer", "Inserting a fixed U before the linear cut layer, with cut init U^T W1, "
                  "leaves H_k and the pre-cut parameters theta_k unchanged; W~_k = U^T W_k.",
                  gaps.worst, dtype, "holds", u, transform, {**gaps.as_dict(), "theta_gap": theta_gap, "steps": s.steps})


# --- Remark 2 ----------------------------------------------------------------------------------------

REMARK2_STEPS = 400
REMARK2_LR = 0.03
REMARK2_OUTPUTS = 3


def remark2_optimal_loss(dtype: torch.dtype = torch.float64, transform: str = "orthogonal") -> CheckResult:
    """Remark 2 (section 3.2): the optimal loss is the same for X and XU, L(XU, U^T W*) = L(X, W*) = L*.

    A convex (least-squares) split problem: linear client, a server whose loss is
    0.5 mean ||H - Y||^2. Measured: the largest of |L(XU, U^T W*) - L(X, W*)|, |L*(XU) - L*(X)| (each
    minimum solved exactly), and how far AMSGrad-Adam -- the paper's default, which is NOT invariant
    step by step (Remark 4) -- trained through the protocol on X and on XU ends from L*, all relative to L*.
    """
    s = SIZES
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(s.n, s.d, generator=gen, dtype=torch.float64).to(dtype)
    targets = torch.randn(s.n, REMARK2_OUTPUTS, generator=gen, dtype=torch.float64).to(dtype)
    u = make_transform(transform, s.d, s.d, gen, dtype)
    w0 = gaussian_matrix(s.d, REMARK2_OUTPUTS, gen, dtype)

    def loss(h: torch.Tensor, _: torch.Tensor | None = None) -> torch.Tensor:
        return 0.5 * ((h - targets) ** 2).sum() / len(h)

    def run(data: torch.Tensor, w: torch.Tensor) -> ProtocolRun:
        batches = [(data, torch.zeros(s.n, dtype=torch.long))] * REMARK2_STEPS
        return train(linear(w), loss_only_server(loss), batches, optimizer="adam-amsgrad", lr=REMARK2_LR)

    w_star = torch.linalg.lstsq(x, targets).solution
    w_star_rotated = torch.linalg.lstsq(x @ u, targets).solution
    l_star = float(loss(x @ w_star))
    a, b = run(x, w0), run(x @ u, u.T @ w0)
    gaps = {
        "rotated_optimum_gap": abs(float(loss(x @ u @ (u.T @ w_star))) - l_star) / l_star,
        "solved_minima_gap": abs(float(loss(x @ u @ w_star_rotated)) - l_star) / l_star,
        "adam_on_x_gap": abs(a.losses[-1] - l_star) / l_star,
        "adam_on_xu_gap": abs(b.losses[-1] - l_star) / l_star,
    }
    details = {**gaps, "l_star": l_star, "steps": REMARK2_STEPS, "optimizer": "adam-amsgrad",
               "adam_activation_gap_along_the_way": compare(a, b, lambda st: {}).activations}
    return _judge("remark2-optimal-loss", "On a convex split problem the optimal loss is the same for X and XU: "
                  "L(XU, U^T W*) = L(X, W*), and Adam reaches it from both.", max(gaps.values()), dtype,
                  "holds", u, transform, details)

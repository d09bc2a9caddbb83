"""The whole measurement behind `splitlab bounds`: FedAvg, its constants, the attacks at w_t and w*, the
surrogates' L_R, and Theorem 1's bound per attack and round, with the checks and sensitivities the paper's claims
lists (§9: B4, C2, C3, C5, D1, D4, D5, D8).

Choices (the paper is silent or ambiguous; each is a field of `BoundsConfig`):
- attacks run at the global models of FL seed 0 after rounds 1, 2, 5, 10, 20, 50, 100, ... up to T and at
  w* (Newton); errors are squared L2 norms over d = 64 pixels (the theorem's units; vacuous above d);
- one surrogate per attack, fitted to the trials of every evaluated round (so w varies in its data);
- the bound is indexed by round, t = r (conservative, default) and by SGD step, t = rE + 1 (the proof's
  index of the model after round r, w_1 the initial model);
- L_R in the bound: `lipschitz="full"` (the paper's product over the whole M_1) or "w" (w-block only).
"""
from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, replace

import torch

from theory_checks.bounds.attacks import ATTACKS, AttackRun, AttackSettings, attack, observe
from theory_checks.bounds.constants import Constants, constants
from theory_checks.bounds.fedavg import (Federation, Trajectory, fedavg, schedule_gamma, split_evenly, step_sizes)
from theory_checks.bounds.logreg import LogReg, load_digits
from theory_checks.bounds.surrogate import checkpoints, fit, surrogate_input
from vfl.errors import SplitlabError

EVAL_ROUNDS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
SENSITIVITY = {"ridge": (0.0, 1e-4, 1e-2), "input": ("w,x0", "w,g,x0"), "layers": (10, 20, 30)}
TRENDS = {"E": (1, 2, 4), "N": (5, 10, 20), "T": (25, 50, 100, 200)}


@dataclass(frozen=True)
class BoundsConfig:
    model: str = "binary"
    digits: tuple[int, ...] = (0, 1)
    devices: int = 10
    """N, evenly split."""
    local_steps: int = 2
    """E."""
    rounds: int = 100
    """T (communication rounds)."""
    seeds: int = 10
    """FL seeds for the convergence check and the constants."""
    participation: int = 5
    """K for Theorem 2 (Assumption 6: K draws with replacement)."""
    samples: int = 40
    inits: int = 10
    surrogate_input: str = "w,x0"
    ridge: float = 1e-2
    layers: int = 20
    feed: str = "fitted"
    lipschitz: str = "full"
    gamma_rule: str = "theorem"
    mu_rule: str = "paper"
    attacks: tuple[str, ...] = ATTACKS
    attack: AttackSettings = AttackSettings()
    sensitivity: bool = True
    trends: bool = True
    seed: int = 0


def eval_rounds(T: int) -> tuple[int, ...]:
    return tuple(sorted({r for r in EVAL_ROUNDS if r <= T} | {T}))


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-a between two scorings of the same items (tied pairs count 0); nan below 2 items."""
    pairs = list(itertools.combinations(range(len(a)), 2))
    if not pairs:
        return float("nan")
    sign = lambda v: (v > 0) - (v < 0)     # noqa: E731
    return sum(sign(a[i] - a[j]) * sign(b[i] - b[j]) for i, j in pairs) / len(pairs)


def ordering(names: list[str], scores: list[float]) -> str:
    return " < ".join(n for _, n in sorted(zip(scores, names)))


@dataclass
class Setting:
    """The FL side of one configuration: data, schedule, trajectories and constants."""
    model: LogReg
    fed: Federation
    L: float
    mu: float
    gamma: float
    full: Trajectory
    full_constants: Constants
    partial: Trajectory | None = None
    partial_constants: Constants | None = None


def fl_setting(config: BoundsConfig, *, partial: bool = True) -> Setting:
    """Data split, L and mu by the paper's formulas, gamma, eta_t, FedAvg for all seeds, constants."""
    data = load_digits(config.digits)
    model = LogReg(config.model, data.dim, classes=len(config.digits))
    fed = split_evenly(data, config.devices, seed=config.seed)
    L = max(model.paper_L(x) for x in fed.x)
    mu = model.paper_mu if config.mu_rule == "paper" else 2 * model.lam
    gamma = schedule_gamma(L, mu, config.local_steps, config.gamma_rule)
    eta = step_sizes(mu, gamma, config.rounds * config.local_steps)
    full = fedavg(model, fed, eta, config.local_steps, seeds=config.seeds, seed=config.seed)
    setting = Setting(model, fed, L, mu, gamma, full, constants(model, fed, full, L=L, mu=mu, gamma=gamma))
    if partial:
        setting.partial = fedavg(model, fed, eta, config.local_steps, seeds=config.seeds,
                                 participation=config.participation, seed=config.seed + 1)
        setting.partial_constants = constants(model, fed, setting.partial, L=L, mu=mu, gamma=gamma)
    return setting


def convergence(trajectory: Trajectory, c: Constants) -> dict:
    """B4: mean over seeds of ||w_t - w*||^2 against v / (gamma + t) at every step t = 1..TE+1."""
    dist = (trajectory.global_w - c.w_star).square().sum(-1).mean(0)
    t = torch.arange(1, dist.shape[0] + 1, dtype=dist.dtype)
    rate = c.rate(t)
    return {"min_slack": float((rate - dist).min()), "max_ratio": float((dist / rate).max()),
            "holds": bool((dist <= rate).all()), "first": {"mean_dist": float(dist[0]), "rate": float(rate[0])},
            "after_round_1": {"mean_dist": float(dist[trajectory.local_steps]),
                              "rate": float(rate[trajectory.local_steps])},
            "last": {"mean_dist": float(dist[-1]), "rate": float(rate[-1])}}


def curvature(setting: Setting, points: int = 20, seed: int = 0) -> dict:
    """Exact Hessian eigenvalues of every L_k at random w (N(0, 1) entries) and at every local point of FL
    seed 0, against the paper's L and mu (A1)."""
    model, fed = setting.model, setting.fed
    rand = torch.randn(points, fed.devices, model.params, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)
    out = {}
    for name, w in (("random", rand), ("trajectory", setting.full.local_w[0])):
        eig = torch.linalg.eigvalsh(model.hessian(w, fed.x))
        out[name] = {"lambda_max": float(eig[..., -1].max()), "lambda_max_min": float(eig[..., -1].min()),
                     "lambda_min": float(eig[..., 0].min())}
    return out


def targets(setting: Setting, config: BoundsConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The attacked samples: the first `samples` of the (seeded, shuffled) federation, as (M, 1, 8, 8)."""
    if config.samples > setting.fed.all_x.shape[0]:
        raise SplitlabError(f"--samples {config.samples} exceeds the {setting.fed.all_x.shape[0]} training samples")
    x = setting.fed.all_x[: config.samples]
    return x.view(config.samples, 1, 8, 8), setting.fed.all_y[: config.samples]


def lipschitz_of_gradient(model: LogReg, x: torch.Tensor) -> float:
    """L_g: the largest ||x||^2 / 4 + 2 lam (binary; ||x||^2 / 2 + 2 lam softmax) over the attacked samples,
    a bound on the Lipschitz constant of w -> g_w(x, y)."""
    return max(model.paper_L(xi[None]) for xi in x.flatten(1))


def surrogate_fit(run: AttackRun, weights: torch.Tensor, grads: torch.Tensor, *, kind: str, ridge: float,
                  layers: int, feed: str, steps: int, L_g: float) -> dict:
    """Fit the unrolled surrogate of one attack and return its L_R (full, w) and fit error."""
    wanted = checkpoints(steps, layers)
    index = [run.steps.index(c) for c in wanted]
    z0, blocks = surrogate_input(kind, weights, grads, run.start)
    tgt = run.iterates[index].flatten(1, 3)
    net = fit(z0, tgt, blocks, ridge=ridge, feed=feed)
    fit_error = float((net(z0) - tgt[-1]).square().sum(-1).mean())
    return {**net.lipschitz(L_g=L_g), "fit_mse": fit_error}


def empirical_ratio(run: AttackRun, weights: torch.Tensor) -> dict:
    """||R(w_a) - R(w_b)|| / ||w_a - w_b|| over pairs of evaluated weights (same init): the mean over
    trials per pair (min and max over pairs) and the largest single trial."""
    means, worst = [], 0.0
    for a, b in itertools.combinations(range(weights.shape[0]), 2):
        dw = float((weights[a] - weights[b]).norm())
        if dw == 0.0:
            continue
        ratio = (run.final[a] - run.final[b]).norm(dim=-1) / dw
        means.append(float(ratio.mean()))
        worst = max(worst, float(ratio.max()))
    return {"pair_mean_min": min(means), "pair_mean_max": max(means), "trial_max": worst}


def lipschitz_step(run: AttackRun, weights: torch.Tensor, L_R: float) -> dict:
    """C2: mean over trials of ||R(w_t) - R(w*)||^2 against L_R^2 ||w_t - w*||^2 per evaluated round (w* last,
    FL seed 0). The step of the proof that uses Assumption 5; L_R comes from a surrogate, so it can fail."""
    moved = (run.final[:-1] - run.final[-1]).square().sum(-1).mean((1, 2))
    dw = (weights[:-1] - weights[-1]).square().sum(-1)
    ratio = moved / (L_R ** 2 * dw)
    return {"pass_rate": float((ratio <= 1).double().mean()), "worst_ratio": float(ratio.max())}


def bound_table(config: BoundsConfig, c: Constants, rounds: tuple[int, ...], runs: dict[str, AttackRun],
                lip: dict[str, dict], d: int, partial: Constants | None = None) -> list[dict]:
    """One row per attack and round: bound by round and by step, mean and best-of-inits error, bound/d; with
    `partial`, also Theorem 2's bound (B + C from the partial-participation run) with the same err(w*), L_R."""
    rows = []
    for name, run in runs.items():
        err_star = float(run.errors[-1].mean())
        L_R = lip[name][config.lipschitz]
        for i, r in enumerate(rounds):
            by_round = c.bound(err_star, L_R, r)
            by_step = c.bound(err_star, L_R, r * config.local_steps + 1)
            rows.append({"attack": name, "round": r, "bound": by_round, "bound_by_step": by_step,
                         "mean": float(run.errors[i].mean()), "best": float(run.errors[i].min(-1).values.mean()),
                         "bound/d": by_round / d, "L_R": L_R, "err_w_star": err_star,
                         "mean<=bound": float(run.errors[i].mean()) <= by_round,
                         **({"bound_theorem2": partial.bound(err_star, L_R, r)} if partial is not None else {})})
    return rows


def orderings(rows: list[dict], rounds: tuple[int, ...]) -> list[dict]:
    """Per round: the attacks ordered by bound, by mean and by best error, and Kendall's tau bound-vs-each."""
    out = []
    for r in rounds:
        at = [row for row in rows if row["round"] == r]
        names = [row["attack"] for row in at]
        bound, mean, best = ([row[k] for row in at] for k in ("bound", "mean", "best"))
        out.append({"round": r, "by_bound": ordering(names, bound), "by_mean": ordering(names, mean),
                    "by_best": ordering(names, best), "tau_mean": kendall_tau(bound, mean),
                    "tau_best": kendall_tau(bound, best)})
    return out


def idlg_below_dlg(rows: list[dict], r: int) -> bool | None:
    at = {row["attack"]: row["bound"] for row in rows if row["round"] == r}
    return at["idlg"] < at["dlg"] if {"idlg", "dlg"} <= set(at) else None


def sensitivity(config: BoundsConfig, c: Constants, rounds: tuple[int, ...], runs: dict[str, AttackRun],
                weights: torch.Tensor, grads: torch.Tensor, L_g: float, d: int) -> list[dict]:
    """D8: L_R for every (ridge, input, H) of `SENSITIVITY`, whether iDLG < DLG by bound at round T and
    whether any bound at T falls below d survive, and each attack's C2 pass rate with that L_R."""
    out = []
    for ridge, kind, layers in itertools.product(*SENSITIVITY.values()):
        variant = replace(config, ridge=ridge, surrogate_input=kind, layers=layers)
        lip = {name: surrogate_fit(run, weights, grads, kind=kind, ridge=ridge, layers=layers, feed=config.feed,
                                   steps=config.attack.steps, L_g=L_g) for name, run in runs.items()}
        rows = [row for row in bound_table(variant, c, rounds, runs, lip, d) if row["round"] == rounds[-1]]
        out.append({"ridge": ridge, "input": kind, "layers": layers,
                    "L_R_full": {n: v["full"] for n, v in lip.items()}, "L_R_w": {n: v["w"] for n, v in lip.items()},
                    "fit_mse": {n: v["fit_mse"] for n, v in lip.items()},
                    "C2_pass": {n: lipschitz_step(run, weights, lip[n][config.lipschitz])["pass_rate"]
                                for n, run in runs.items()},
                    "bound_T": {row["attack"]: row["bound"] for row in rows},
                    "idlg_below_dlg": idlg_below_dlg(rows, rounds[-1]),
                    "any_below_d": any(row["bound"] < d for row in rows),
                    "min_bound/d": min(row["bound/d"] for row in rows)})
    return out


def trends(config: BoundsConfig, runs_summary: dict[str, dict]) -> list[dict]:
    """D5: Phi at round T (per unit L_R^2, by round and by step) and each attack's bound with its fixed
    L_R and err(w*), for E, N and T varied one at a time around the configuration."""
    out = []
    for axis, values in TRENDS.items():
        for value in values:
            variant = replace(config, **{{"E": "local_steps", "N": "devices", "T": "rounds"}[axis]: value})
            setting = fl_setting(variant, partial=False)
            c, T, E = setting.full_constants, variant.rounds, variant.local_steps
            out.append({"axis": axis, "value": value, "phi_T": float(c.phi(T)),
                        "phi_T_by_step": float(c.phi(T * E + 1)),
                        "phi_1": float(c.phi(1)), "B": c.B, "Gamma": c.Gamma, "gamma": c.gamma,
                        "bound_T": {n: c.bound(s["err_w_star"], s["L_R"], T) for n, s in runs_summary.items()}})
    return out


def measure(config: BoundsConfig) -> dict:
    """Everything `splitlab bounds` prints and stores, as one JSON-able record."""
    start = time.perf_counter()
    setting = fl_setting(config)
    c, model = setting.full_constants, setting.model
    rounds = eval_rounds(config.rounds)
    x, y = targets(setting, config)
    d = x[0].numel()
    weights = torch.stack([setting.full.after_round(r)[0] for r in rounds] + [c.w_star])
    grads = observe(model, weights, x, y)
    L_g = lipschitz_of_gradient(model, x)
    depths = (config.layers,) + (SENSITIVITY["layers"] if config.sensitivity else ())
    record = sorted({k for h in depths for k in checkpoints(config.attack.steps, h)})
    fl_seconds = time.perf_counter() - start
    runs = {name: attack(name, model, weights, x, y, inits=config.inits, settings=config.attack, record=record,
                         seed=config.seed) for name in config.attacks}
    attack_seconds = time.perf_counter() - start - fl_seconds
    lip = {name: surrogate_fit(run, weights, grads, kind=config.surrogate_input, ridge=config.ridge,
                               layers=config.layers, feed=config.feed, steps=config.attack.steps, L_g=L_g)
           for name, run in runs.items()}
    rows = bound_table(config, c, rounds, runs, lip, d, setting.partial_constants)
    summary = {name: {"err_w_star": float(run.errors[-1].mean()), "L_R": lip[name][config.lipschitz],
                      "L_R_full": lip[name]["full"], "L_R_w": lip[name]["w"], "fit_mse": lip[name]["fit_mse"],
                      "label_accuracy": run.label_accuracy, "empirical_ratio": empirical_ratio(run, weights),
                      "lipschitz_step": lipschitz_step(run, weights, lip[name][config.lipschitz]),
                      "engine_seconds": run.seconds}
               for name, run in runs.items()}
    result = {
        "config": {**asdict(config), "d": d, "eval_rounds": list(rounds)},
        "constants": {**c.as_dict(), "L_exact": curvature(setting), "phi_1": float(c.phi(1)),
                      "phi_T": float(c.phi(rounds[-1])),
                      "phi_T_by_step": float(c.phi(rounds[-1] * config.local_steps + 1)),
                      "L_g": L_g},
        "theorem2_constants": setting.partial_constants.as_dict(),
        "convergence": {"full": convergence(setting.full, c),
                        "partial": convergence(setting.partial, setting.partial_constants)},
        "attacks": summary,
        "rows": rows,
        "orderings": orderings(rows, rounds),
        "all_mean_below_bound": all(row["mean<=bound"] for row in rows),
        "any_bound_below_d": any(row["bound"] < d for row in rows),
        "idlg_below_dlg_by_bound": idlg_below_dlg(rows, rounds[-1]),
        "seconds": {"fl": fl_seconds, "attacks": attack_seconds},
        "deviations": {"ggl": "PCA-linear decoder (top-k components of all digits) instead of a pretrained GAN; "
                              "no gradient-clipping defence T"} if "ggl" in runs else {},
    }
    if config.sensitivity:
        result["sensitivity"] = sensitivity(config, c, rounds, runs, weights, grads, L_g, d)
    if config.trends:
        result["trends"] = trends(config, summary)
    result["seconds"]["total"] = time.perf_counter() - start
    return result


def figure(result: dict):
    """Bound (solid), best-of-inits (dashed) and mean (dotted) error per attack over rounds, log y; the
    vacuity line at d. A `matplotlib.figure.Figure`; save it with `Run.save_figure`."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    colours = dict(zip(ATTACKS, ("tab:red", "tab:blue", "tab:green", "tab:purple")))
    for name in result["attacks"]:
        at = [row for row in result["rows"] if row["attack"] == name]
        r = [row["round"] for row in at]
        ax.plot(r, [row["bound"] for row in at], "-", color=colours[name], label=f"{name} bound")
        ax.plot(r, [row["best"] for row in at], "--", color=colours[name], label=f"{name} best of inits")
        ax.plot(r, [row["mean"] for row in at], ":", color=colours[name], label=f"{name} mean")
    ax.axhline(result["config"]["d"], color="0.5", lw=0.8, label="d (vacuous above)")
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-4)                        # iDLG's exact early reconstructions (1e-30) would squash the rest
    ax.set_xscale("log")
    ax.set(xlabel="round t", ylabel="||x - R(w_t)||^2 (errors below 1e-4 leave the axis)",
           title=f"Theorem 1 bound vs attack error (input {result['config']['surrogate_input']}, "
                 f"ridge {result['config']['ridge']:g}, H {result['config']['layers']})")
    ax.legend(fontsize=7, ncol=2)
    return fig

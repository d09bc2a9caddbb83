"""The whole measurement behind `splitlab bounds`: FedAvg, its constants, the attacks at w_t and w*, the
surrogates' L_R, and Theorem 1's bound per attack and round, with the checks and sensitivities the paper's claims
lists (§9: B4, C2, C3, C5, D1, D4, D5, D8).

Choices (the paper is silent or ambiguous; each is a field of `BoundsConfig`):
- attacks run at the global models of FL seed 0 after rounds 1, 2, 5, 10, 20, 50, 100, ... up to T and at
  w* (Newton); errors are squared L2 norms over d = 64 pixels per image (the theorem's units; vacuous above d);
- one surrogate per attack, fitted to `fit_pairs` trials drawn (seeded, without replacement) from all of its
  trials at every evaluated round, so w varies in its data; its fit error is the training error, as the paper
  reports it, with the error on the trials left out beside it;
- the bound is indexed by round, t = r (conservative, default) and by SGD step, t = rE + 1 (the proof's
  index of the model after round r, w_1 the initial model);
- L_R in the bound: `lipschitz="full"` (the paper's product over the whole M_1) or "w" (w-block only);
- batches of B: the surrogate maps the batch (B d values) and its L_R bounds ||R(v) - R(w)|| over the whole
  batch, so per image the bound is 2 err(w*) + (L_R^2 / B) Phi(t), err per image (`attacks.matched`).
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass, replace

import torch

from theory_checks.bounds.attacks import ATTACKS, AttackRun, attack, observe
from theory_checks.bounds.config import BoundsConfig
from theory_checks.bounds.constants import Constants, constants
from theory_checks.bounds.deviations import DEVIATIONS
from theory_checks.bounds.fedavg import (Federation, Trajectory, fedavg, schedule_gamma, split_evenly, step_sizes)
from theory_checks.bounds.logreg import LogReg, load_digits
from theory_checks.bounds.surrogate import checkpoints, fit, surrogate_input
from vfl.errors import SplitlabError
from vfl.runtime import generator

__all__ = ["BoundsConfig", "measure", "fl_setting", "convergence", "curvature", "kendall_tau"]

EVAL_ROUNDS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
SENSITIVITY = {"ridge": (0.0, 1e-4, 1e-2), "input": ("w,x0", "w,g,x0"), "layers": (10, 20, 30)}
TRENDS = {"E": (1, 2, 4), "N": (5, 10, 20), "T": (25, 50, 100, 200)}
TREND_FIELDS = {"E": "local_steps", "N": "devices", "T": "rounds"}
TREND_DIRECTION = {"E": "increasing", "N": "increasing", "T": "decreasing"}
"""The paper's C7: the bound grows with E and N and falls with T."""
PAPER_FIT_MSE = {"dlg": 1.22, "idlg": 1.01, "invgrad": 0.76, "ggl": 0.04}
"""The unrolled network's fit on MNIST (App. C.1.1), read as ||.||^2 per image over MNIST's 784 pixels."""
PAPER_D = 784


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
    data = load_digits(config.digits, config.dataset)
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
    """The attacked images: the first `samples` of the (seeded, shuffled) federation, as (M, 1, H, H) and (M,);
    with `batch` B > 1 the first samples // B * B of them as M batches, (M, B, 1, H, H) and (M, B) (H = 8 or 28)."""
    B, M = config.batch, config.batches
    if M * B > setting.fed.all_x.shape[0]:
        raise SplitlabError(f"--samples {config.samples} exceeds the {setting.fed.all_x.shape[0]} training samples")
    side = math.isqrt(setting.fed.x.shape[-1])                     # square images: 8x8 digits, 28x28 mnist5k
    x, y = setting.fed.all_x[: M * B].view(M, B, 1, side, side), setting.fed.all_y[: M * B].view(M, B)
    return (x[:, 0], y[:, 0]) if B == 1 else (x, y)


def lipschitz_of_gradient(model: LogReg, x: torch.Tensor) -> float:
    """L_g: the largest ||x||^2 / 4 + 2 lam (binary; ||x||^2 / 2 + 2 lam softmax) over the attacked images,
    a bound on the Lipschitz constant of w -> g_w(x, y) (and of a batch's mean gradient)."""
    return max(model.paper_L(xi[None]) for xi in x.reshape(-1, x.shape[-1] * x.shape[-2]))


def fit_pairs(trials: int, wanted: int, seed: int) -> torch.Tensor | None:
    """The trials the surrogate is fitted on: `wanted` of them drawn without replacement (sorted), or None for
    every trial (wanted 0, or no fewer trials than wanted)."""
    if wanted == 0 or wanted >= trials:
        return None
    return torch.randperm(trials, generator=generator(seed))[:wanted].sort().values


def surrogate_fit(run: AttackRun, weights: torch.Tensor, grads: torch.Tensor, *, kind: str, ridge: float,
                  layers: int, feed: str, steps: int, L_g: float, pairs: torch.Tensor | None = None) -> dict:
    """Fit the unrolled surrogate of one attack on the trials `pairs` (None: all) and return its L_R (full, w),
    its training error per image (`fit_mse`, ||N(z) - x'_I||^2 / B, the paper's fit error) and its error on
    the trials left out (`fit_mse_heldout`, None when none are)."""
    wanted = checkpoints(steps, layers)
    index = [run.steps.index(c) for c in wanted]
    z0, blocks = surrogate_input(kind, weights, grads, run.start)
    tgt = run.iterates[index].flatten(1, 3)
    chosen = torch.arange(z0.shape[0]) if pairs is None else pairs
    net = fit(z0[chosen], tgt[:, chosen], blocks, ridge=ridge, feed=feed)
    error = (net(z0) - tgt[-1]).square().sum(-1) / run.batch
    left = torch.ones(z0.shape[0], dtype=torch.bool)
    left[chosen] = False
    return {**net.lipschitz(L_g=L_g), "fit_mse": float(error[chosen].mean()),
            "fit_mse_heldout": float(error[left].mean()) if bool(left.any()) else None, "fit_pairs": len(chosen)}


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
    ratio = moved / (L_R * L_R * dw)           # L_R * L_R: inf past 1e154, where L_R ** 2 raises OverflowError
    return {"pass_rate": float((ratio <= 1).double().mean()), "worst_ratio": float(ratio.max())}


def per_image(L_R: float, batch: int) -> float:
    """The Lipschitz constant of w -> R(w) / sqrt(B), whose squared error is the error per image."""
    return L_R / math.sqrt(batch)


def bound_table(config: BoundsConfig, c: Constants, rounds: tuple[int, ...], runs: dict[str, AttackRun],
                lip: dict[str, dict], d: int, partial: Constants | None = None) -> list[dict]:
    """One row per attack and round: bound by round and by step, mean and best-of-inits error, bound/d (all
    per image); with `partial`, also Theorem 2's bound (B + C from the partial-participation run) with the same
    err(w*), L_R."""
    rows = []
    for name, run in runs.items():
        err_star = float(run.errors[-1].mean())
        L_R = lip[name][config.lipschitz]
        lip_image = per_image(L_R, run.batch)
        for i, r in enumerate(rounds):
            by_round = c.bound(err_star, lip_image, r)
            by_step = c.bound(err_star, lip_image, r * config.local_steps + 1)
            rows.append({"attack": name, "round": r, "bound": by_round, "bound_by_step": by_step,
                         "mean": float(run.errors[i].mean()), "best": float(run.errors[i].min(-1).values.mean()),
                         "bound/d": by_round / d, "L_R": L_R, "err_w_star": err_star,
                         "mean<=bound": float(run.errors[i].mean()) <= by_round,
                         **({"bound_theorem2": partial.bound(err_star, lip_image, r)} if partial is not None else {})})
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


def ordering_flags(rows: list[dict], r: int) -> dict:
    """The paper's ordering claims at round r as yes/no flags (None where an attack they name did not run):
    by bound (C2 idlg < dlg, C3 invgrad < idlg, C5 ggl smallest, C9 invgrad < dlg), by best-of-inits error
    (`error`, the paper's dashed curves; C1 ggl < invgrad <= idlg <= dlg) and by mean error (`mean_error`, C13);
    the gap bound / error (C4, C5), Kendall's tau of the bound against both errors (C6, C13)."""
    at = {row["attack"]: row for row in rows if row["round"] == r}

    def below(key: str, a: str, b: str) -> bool | None:
        return at[a][key] < at[b][key] if a in at and b in at else None

    def smallest(key: str, a: str) -> bool | None:
        others = [row[key] for n, row in at.items() if n != a]
        return all(at[a][key] < v for v in others) if a in at and others else None

    def paper_order(key: str) -> bool | None:
        if not set(ATTACKS) <= set(at):
            return None
        v = {n: at[n][key] for n in ATTACKS}
        return v["ggl"] < v["invgrad"] <= v["idlg"] <= v["dlg"]

    flags: dict = {}
    for label, key in (("bound", "bound"), ("error", "best"), ("mean_error", "mean")):
        flags[label] = {"idlg_below_dlg": below(key, "idlg", "dlg"), "ggl_smallest": smallest(key, "ggl"),
                        "invgrad_below_idlg": below(key, "invgrad", "idlg"),
                        "invgrad_below_dlg": below(key, "invgrad", "dlg"), "paper_order": paper_order(key),
                        "order": ordering(list(at), [row[key] for row in at.values()])}
    gap = {n: row["bound"] / row["best"] if row["best"] > 0 else math.inf for n, row in at.items()}
    gd = [n for n in ("dlg", "idlg", "invgrad") if n in at]
    flags["gap"] = {"bound_over_best": gap,
                    "bound_above_mean": all(at[n]["bound"] > at[n]["mean"] for n in gd) if gd else None,
                    "ggl_tightest": all(gap["ggl"] < v for n, v in gap.items() if n != "ggl")
                    if "ggl" in gap and len(gap) > 1 else None}
    names = list(at)
    bound, mean, best = ([at[n][k] for n in names] for k in ("bound", "mean", "best"))
    tau_mean, tau_best = kendall_tau(bound, mean), kendall_tau(bound, best)
    flags["tau_mean"], flags["tau_best"] = tau_mean, tau_best
    flags["tau_mean_positive"] = tau_mean > 0 if not math.isnan(tau_mean) else None
    flags["mean_agrees_at_least_as_well"] = tau_mean >= tau_best if not math.isnan(tau_mean) else None
    return flags


def sensitivity(config: BoundsConfig, c: Constants, rounds: tuple[int, ...], runs: dict[str, AttackRun],
                weights: torch.Tensor, grads: torch.Tensor, L_g: float, d: int,
                pairs: torch.Tensor | None = None) -> list[dict]:
    """D8: L_R for every (ridge, input, H) of `SENSITIVITY` (on the same fit pairs), whether iDLG < DLG by bound
    at round T and whether any bound at T falls below d survive, and each attack's C2 pass rate with that L_R."""
    out = []
    for ridge, kind, layers in itertools.product(*SENSITIVITY.values()):
        if layers > config.attack_steps:
            continue
        variant = replace(config, ridge=ridge, surrogate_input=kind, layers=layers)
        lip = {name: surrogate_fit(run, weights, grads, kind=kind, ridge=ridge, layers=layers,
                                   feed=config.feed, steps=config.attack_steps, L_g=L_g, pairs=pairs)
               for name, run in runs.items()}
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


def monotone(values: list[float], direction: str) -> bool:
    pairs = list(zip(values, values[1:]))
    return all(b > a for a, b in pairs) if direction == "increasing" else all(b < a for a, b in pairs)


def trends(config: BoundsConfig, runs_summary: dict[str, dict]) -> dict:
    """D5 (the paper's Figures 3-5): Phi at round T (per unit L_R^2, by round and by step) and each attack's bound
    at T with its L_R and err(w*) held at this run's, for E, N and T varied one at a time around the
    configuration. {axis: {value: {...}, "values": [...], "increasing"/"decreasing": every attack's bound moves
    that way, as the paper says}}; flat keys such as trends.E.2.bound_T.dlg."""
    out: dict = {}
    for axis, values in TRENDS.items():
        per: dict = {"values": list(values)}
        for value in values:
            variant = replace(config, **{TREND_FIELDS[axis]: value}, samples=1, batch=1)   # FL only: no attacks
            setting = fl_setting(variant, partial=False)
            c, T, E = setting.full_constants, variant.rounds, variant.local_steps
            per[str(value)] = {"phi_T": float(c.phi(T)), "phi_T_by_step": float(c.phi(T * E + 1)),
                               "phi_1": float(c.phi(1)), "B": c.B, "Gamma": c.Gamma, "gamma": c.gamma,
                               "bound_T": {n: c.bound(s["err_w_star"], s["L_R_per_image"], T)
                                           for n, s in runs_summary.items()}}
        direction = TREND_DIRECTION[axis]
        per[direction] = all(monotone([per[str(v)]["bound_T"][n] for v in values], direction) for n in runs_summary)
        per[f"phi_{direction}"] = monotone([per[str(v)]["phi_T"] for v in values], direction)
        out[axis] = per
    return out


def measure(config: BoundsConfig) -> dict:
    """Everything `splitlab bounds` prints and stores, as one JSON-able record."""
    start = time.perf_counter()
    setting = fl_setting(config)
    c, model = setting.full_constants, setting.model
    rounds = eval_rounds(config.rounds)
    x, y = targets(setting, config)
    d = setting.fed.all_x.shape[1]
    weights = torch.stack([setting.full.after_round(r)[0] for r in rounds] + [c.w_star])
    grads = observe(model, weights, x, y)
    L_g = lipschitz_of_gradient(model, x)
    depths = (config.layers,) + (tuple(h for h in SENSITIVITY["layers"] if h <= config.attack_steps)
                                 if config.sensitivity else ())
    record = sorted({k for h in depths for k in checkpoints(config.attack_steps, h)})
    fl_seconds = time.perf_counter() - start
    settings = config.attack
    runs = {name: attack(name, model, weights, x, y, inits=config.inits, settings=settings, record=record,
                         seed=config.seed) for name in config.attacks}
    attack_seconds = time.perf_counter() - start - fl_seconds
    pairs = fit_pairs(weights.shape[0] * config.batches * config.inits, config.fit_pairs, config.seed)
    lip = {name: surrogate_fit(run, weights, grads, kind=config.surrogate_input, ridge=config.ridge,
                               layers=config.layers, feed=config.feed, steps=config.attack_steps, L_g=L_g, pairs=pairs)
           for name, run in runs.items()}
    rows = bound_table(config, c, rounds, runs, lip, d, setting.partial_constants)
    T = rounds[-1]
    at_T = {row["attack"]: row for row in rows if row["round"] == T}
    summary = {name: {"err_w_star": float(run.errors[-1].mean()), "L_R": lip[name][config.lipschitz],
                      "L_R_per_image": per_image(lip[name][config.lipschitz], config.batch),
                      "L_R_full": lip[name]["full"], "L_R_w": lip[name]["w"],
                      "fit_mse": lip[name]["fit_mse"], "fit_mse_per_pixel": lip[name]["fit_mse"] / d,
                      "fit_mse_heldout": lip[name]["fit_mse_heldout"], "fit_pairs": lip[name]["fit_pairs"],
                      "paper_fit_mse": PAPER_FIT_MSE[name], "paper_fit_mse_per_pixel": PAPER_FIT_MSE[name] / PAPER_D,
                      "bound_T": at_T[name]["bound"], "bound_T_over_d": at_T[name]["bound/d"],
                      "mean_error_T": at_T[name]["mean"], "best_error_T": at_T[name]["best"],
                      "label_accuracy": run.label_accuracy, "labels": run.labels,
                      "empirical_ratio": empirical_ratio(run, weights),
                      "lipschitz_step": lipschitz_step(run, weights, lip[name][config.lipschitz]),
                      "engine_seconds": run.seconds}
               for name, run in runs.items()}
    result = {
        "config": {**asdict(config), "attack": asdict(settings), "d": d, "eval_rounds": list(rounds),
                   "batches": config.batches, "trials_per_attack": weights.shape[0] * config.batches * config.inits,
                   "fit_pairs_used": len(pairs) if pairs is not None else weights.shape[0] * config.batches
                   * config.inits},
        "constants": {**c.as_dict(), "L_exact": curvature(setting), "phi_1": float(c.phi(1)),
                      "phi_T": float(c.phi(T)), "phi_T_by_step": float(c.phi(T * config.local_steps + 1)),
                      "L_g": L_g},
        "theorem2_constants": setting.partial_constants.as_dict(),
        "convergence": {"full": convergence(setting.full, c),
                        "partial": convergence(setting.partial, setting.partial_constants)},
        "attacks": summary,
        "rows": rows,
        "orderings": orderings(rows, rounds),
        "ordering": ordering_flags(rows, T),
        "all_mean_below_bound": all(row["mean<=bound"] for row in rows),
        "any_bound_below_d": any(row["bound"] < d for row in rows),
        "idlg_below_dlg_by_bound": idlg_below_dlg(rows, T),
        "seconds": {"fl": fl_seconds, "attacks": attack_seconds},
        "deviations": deviations(config),
    }
    if config.sensitivity:
        result["sensitivity"] = sensitivity(config, c, rounds, runs, weights, grads, L_g, d, pairs)
    if config.trends:
        result["trends"] = trends(config, summary)
    result["seconds"]["total"] = time.perf_counter() - start
    return result


def deviations(config: BoundsConfig) -> dict:
    """What this run does differently from the paper, in words (recorded with the numbers): the declared
    deviations (`theory_checks.bounds.deviations`) and what this run's options add."""
    out = {d.what: f"{d.lab} (the paper: {d.paper})" for d in DEVIATIONS}
    out["data"] = f"{config.dataset} digits {list(config.digits)}: " + out["data"]
    if "ggl" in config.attacks:
        out["GGL's generator"] += "; " + (f"its clipping defence T(g, S) at S = {config.ggl_clip:g}"
                                          if config.ggl_clip > 0 else "no clipping defence")
    if config.batch > 1:
        out["batch labels"] = "idlg, invgrad and ggl are given the batch's labels (the sign rule cannot count them)"
    return out

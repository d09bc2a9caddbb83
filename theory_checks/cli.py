"""The `splitlab theory` command."""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import List, Optional

import typer
from rich.console import Console

from theory_checks.bounds.attacks import ATTACKS, AttackSettings
from theory_checks.bounds.experiment import BoundsConfig, measure
from theory_checks.bounds.experiment import figure as bounds_figure
from theory_checks.bounds.fedavg import GAMMA_RULES, MU_RULES
from theory_checks.bounds.logreg import KINDS, load_digits
from theory_checks.bounds.surrogate import FEEDS, INPUTS
from theory_checks.convergence import example1_figure, example1_runs
from theory_checks.suite import CHECKS, one_intra_op_thread, parse_dtype, run_checks, select_checks
from vfl.cli_options import RunOptions, with_run_options
from vfl.cli_output import emit, handles_errors, table
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.validate import check_choice, check_int, check_number

EXAMPLE1 = "example1-adam-rotation"
COLUMNS = ["check", "claim", "measured", "tolerance", "expected", "verdict", "matched"]


@with_run_options("out", "overwrite", "as_json")
def theory(
    only: Optional[List[str]] = typer.Option(None, "--only", help="Run only this check (repeatable). Names: "
                                             + ", ".join(CHECKS) + "."),
    dtype: str = typer.Option("float64", "--dtype", help="float64 (tolerance 1e-10) or float32 (tolerance 1e-5)."),
    opts: RunOptions = RunOptions(),
) -> None:
    """Run the orthogonal-invariance lemmas of JAST through the real protocol; exit 0 only if every
    check matched its expected verdict (holds / breaks), 1 otherwise, 2 on bad input."""
    names = select_checks(only)
    torch_dtype = parse_dtype(dtype)
    run = Run.create("theory", {"checks": names, "dtype": dtype}, opts.out, overwrite=opts.overwrite)
    start = time.perf_counter()
    suite = run_checks(names, dtype=torch_dtype)
    figures = []
    if EXAMPLE1 in names:
        figures.append(str(run.save_figure("example1_adam_rotation.png", example1_figure(example1_runs(torch_dtype)))))
    seconds = time.perf_counter() - start
    matched = sum(r.matched for r in suite.results)
    metrics = {"dtype": dtype, "all_matched": suite.all_matched, "matched": matched, "total": len(suite.results),
               "seconds": seconds, "check_seconds": suite.seconds, "checks": list(suite.results),
               "matched_by_check": {r.name: r.matched for r in suite.results},
               "measured_by_check": {r.name: r.measured for r in suite.results}}
    run.write_metrics(metrics)
    run.log(f"theory: {matched}/{len(suite.results)} checks matched their expected verdict in {seconds:.1f} s")

    def summary(console: Console) -> None:
        rows = [{"check": r.name, "claim": r.claim, "measured": r.measured, "tolerance": r.tolerance,
                 "expected": r.expected, "verdict": r.observed, "matched": "yes" if r.matched else "NO"}
                for r in suite.results]
        console.print(table(f"JAST invariance lemmas through the split protocol ({dtype})", rows, COLUMNS))
        for r in suite.results:
            if "finding" in r.details:
                console.print(r.details["finding"])
        console.print(f"{matched}/{len(suite.results)} checks matched their expected verdict in {seconds:.1f} s; "
                      f"run directory {run.path}" + (f"; figure {figures[0]}" if figures else ""))

    emit(run.record(metrics, figures=figures), opts.as_json, summary)
    if not suite.all_matched:
        raise typer.Exit(1)




# --- `splitlab bounds` -----------------------------------------------------------------------------------

ROW_COLUMNS = ["attack", "round", "bound", "bound_by_step", "mean", "best", "bound/d", "L_R"]
ORDER_COLUMNS = ["round", "by_bound", "by_mean", "by_best", "tau_mean", "tau_best"]
ATTACK_COLUMNS = ["attack", "L_R_full", "L_R_w", "fit_mse", "err_w_star", "label_accuracy", "ratio_pairs", "ratio_max",
                  "C2_pass", "C2_worst"]
SENSITIVITY_COLUMNS = ["ridge", "input", "layers", "L_R_full", "L_R_w", "C2_pass", "iDLG<DLG", "any<d", "min_bound/d"]
TREND_COLUMNS = ["axis", "value", "phi_1", "phi_T", "phi_T_by_step", "B", "Gamma", "bounds_T"]


def _words(option: str, text: str, choices) -> tuple[str, ...]:
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    if not words or len(set(words)) != len(words):
        raise SplitlabError(f"{option} needs distinct comma-separated names, got {text!r}")
    for word in words:
        check_choice(option, word, choices)
    return words


def _digits(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SplitlabError(f"--digits needs comma-separated digits, got {text!r}") from None


@with_run_options("out", "overwrite", "as_json")
def bounds(
    surrogate_input: str = typer.Option("w,x0", "--surrogate-input", help="The unrolled surrogate's input: "
                                        "w,x0 (the paper) or w,g,x0 (with the observed gradient)."),
    ridge: float = typer.Option(1e-2, "--ridge", help="Ridge of each layer's least-squares fit (0: none, "
                                "the minimum-norm solution)."),
    layers: int = typer.Option(20, "--layers", help="H, the surrogate's layers (<= --attack-steps)."),
    rounds: int = typer.Option(100, "--rounds", help="T, FedAvg communication rounds."),
    devices: int = typer.Option(10, "--devices", help="N, devices (the data are split evenly)."),
    local_steps: int = typer.Option(2, "--local-steps", help="E, local SGD steps per round."),
    seeds: int = typer.Option(10, "--seeds", help="FedAvg seeds for the constants and the convergence check."),
    participation: int = typer.Option(5, "--participation", help="K, devices drawn with replacement per round "
                                      "for Theorem 2's check."),
    samples: int = typer.Option(40, "--samples", help="Attacked training samples."),
    inits: int = typer.Option(10, "--inits", help="Random starts per sample (mean and best-of over them)."),
    attack_steps: int = typer.Option(200, "--attack-steps", help="I, GD iterations of every attack."),
    lr: float = typer.Option(0.5, "--lr", help="GD step size of dlg and idlg."),
    ggl_clip: float = typer.Option(1.0, "--ggl-clip", help="S of GGL's clipping defence g / max(1, ||g|| / S), "
                                   "its own setting in the paper (0: off)."),
    attacks: str = typer.Option(",".join(ATTACKS), "--attacks", help="Attacks, comma-separated: "
                                + ", ".join(ATTACKS) + " (ggl: PCA-linear decoder, a deviation)."),
    lipschitz: str = typer.Option("full", "--lipschitz", help="L_R in the bound: full (prod over all of M_1, "
                                  "the paper) or w (the w-block only)."),
    feed: str = typer.Option("fitted", "--feed", help="Each layer's fitting input: fitted (greedy) or true "
                             "(the previous true iterate)."),
    gamma_rule: str = typer.Option("theorem", "--gamma-rule", help="theorem: max(8L/mu, E); proof: that - 1."),
    mu_rule: str = typer.Option("paper", "--mu", help="paper: mu = lam; tight: mu = 2 lam."),
    init_mean: float = typer.Option(0.0, "--init-mean", help="Mean of the attacks' Gaussian init."),
    init_std: float = typer.Option(1.0, "--init-std", help="Standard deviation of the attacks' Gaussian init."),
    model: str = typer.Option("binary", "--model", help="binary (the paper's) or softmax LogReg."),
    digits: str = typer.Option("0,1", "--digits", help="The digits of scikit-learn's digits data to use."),
    sensitivity: bool = typer.Option(True, "--sensitivity/--no-sensitivity", help="L_R over ridge x input x H."),
    trends: bool = typer.Option(True, "--trends/--no-trends", help="The bound's trends in E, N and T."),
    seed: int = typer.Option(0, "--seed", help="Seed of the data split, FedAvg and the attacks' inits."),
    opts: RunOptions = RunOptions(),
) -> None:
    """Theorem 1's reconstruction-error bound per attack and round against the attacks' mean and best-of-inits
    errors, with L_R from an unrolled surrogate; exit 1 if a mean error exceeds its bound or the FedAvg rate
    check fails, 2 on bad input."""
    check_choice("--surrogate-input", surrogate_input, INPUTS)
    check_number("--ridge", ridge, low=0.0, high=1e6)
    check_int("--attack-steps", attack_steps, low=1, high=100_000)
    check_int("--layers", layers, low=1, high=attack_steps)
    check_int("--rounds", rounds, low=1, high=10_000)
    check_int("--devices", devices, low=1, high=1000)
    check_int("--local-steps", local_steps, low=1, high=1000)
    check_int("--seeds", seeds, low=1, high=1000)
    check_int("--participation", participation, low=1, high=10_000)
    check_int("--samples", samples, low=1, high=100_000)
    check_int("--inits", inits, low=1, high=1000)
    check_number("--lr", lr, low=0.0, low_open=True, high=1e6)
    check_number("--ggl-clip", ggl_clip, low=0.0, high=1e6)
    check_number("--init-mean", init_mean, low=-1e3, high=1e3)
    check_number("--init-std", init_std, low=0.0, low_open=True, high=1e3)
    check_int("--seed", seed, low=0)
    check_choice("--lipschitz", lipschitz, ("full", "w"))
    check_choice("--feed", feed, FEEDS)
    check_choice("--gamma-rule", gamma_rule, GAMMA_RULES)
    check_choice("--mu", mu_rule, MU_RULES)
    check_choice("--model", model, KINDS)
    chosen = _words("--attacks", attacks, ATTACKS)
    digit_tuple = _digits(digits)
    if model == "binary" and len(digit_tuple) != 2:
        raise SplitlabError(f"--model binary needs two --digits, got {digits!r}")
    config = BoundsConfig(model=model, digits=digit_tuple, devices=devices, local_steps=local_steps, rounds=rounds,
                          seeds=seeds, participation=participation, samples=samples, inits=inits,
                          surrogate_input=surrogate_input, ridge=ridge, layers=layers, feed=feed, lipschitz=lipschitz,
                          gamma_rule=gamma_rule, mu_rule=mu_rule, attacks=chosen,
                          attack=AttackSettings(steps=attack_steps, lr={**AttackSettings().lr, "dlg": lr, "idlg": lr},
                                         init=(init_mean, init_std), ggl_clip=ggl_clip),
                          sensitivity=sensitivity, trends=trends, seed=seed)
    available = len(load_digits(digit_tuple).labels)        # bad digits fail here, before the run directory
    check_int("--devices", devices, low=1, high=available)
    check_int("--samples", samples, low=1, high=available // devices * devices)
    run = Run.create("bounds", asdict(config), opts.out, overwrite=opts.overwrite)
    with one_intra_op_thread():
        metrics = measure(config)
        path = run.save_figure("bounds.png", bounds_figure(metrics))
    run.write_metrics(metrics)
    ok = metrics["all_mean_below_bound"] and metrics["convergence"]["full"]["holds"] \
        and metrics["convergence"]["partial"]["holds"]
    run.log(f"bounds: {len(metrics['rows'])} rows, every mean <= bound: {metrics['all_mean_below_bound']}, "
            f"{metrics['seconds']['total']:.1f} s")

    def summary(console: Console) -> None:
        c, d = metrics["constants"], metrics["config"]["d"]
        console.print(table(f"Theorem 1 bound vs attack error (||.||^2 over d = {d}; bound by round t = r, "
                            f"by step t = rE + 1; L_R = {lipschitz})", metrics["rows"], ROW_COLUMNS))
        console.print(table("Orderings (Kendall tau of bound vs mean / best)", metrics["orderings"], ORDER_COLUMNS))
        console.print(table("Attacks (L_R of the surrogate; empirical ||R(w_a) - R(w_b)|| / ||w_a - w_b||; C2: share "
                            "of rounds with mean ||R(w_t) - R(w*)||^2 <= L_R^2 ||w_t - w*||^2, and the worst ratio)",
                            [{"attack": n, **a, "ratio_pairs": f"{a['empirical_ratio']['pair_mean_min']:.3g}-"
                              f"{a['empirical_ratio']['pair_mean_max']:.3g}",
                              "ratio_max": a["empirical_ratio"]["trial_max"],
                              "C2_pass": a["lipschitz_step"]["pass_rate"],
                              "C2_worst": a["lipschitz_step"]["worst_ratio"]}
                             for n, a in metrics["attacks"].items()], ATTACK_COLUMNS))
        if "sensitivity" in metrics:
            console.print(table("L_R sensitivity (bounds at round T)", [
                {**s, "L_R_full": " ".join(f"{n} {v:.3g}" for n, v in s["L_R_full"].items()),
                 "L_R_w": " ".join(f"{n} {v:.3g}" for n, v in s["L_R_w"].items()),
                 "C2_pass": " ".join(f"{n} {v:.2g}" for n, v in s["C2_pass"].items()),
                 "iDLG<DLG": s["idlg_below_dlg"], "any<d": s["any_below_d"]} for s in metrics["sensitivity"]],
                SENSITIVITY_COLUMNS))
        if "trends" in metrics:
            console.print(table("Trends (Phi = bound per unit L_R^2; bounds at round T with each attack's L_R)", [
                {**t, "bounds_T": " ".join(f"{n} {v:.3g}" for n, v in t["bound_T"].items())}
                for t in metrics["trends"]], TREND_COLUMNS))
        full, part = metrics["convergence"]["full"], metrics["convergence"]["partial"]
        console.print(f"L = {c['L']:.4g} (exact lambda_max {c['L_exact']['trajectory']['lambda_max_min']:.3g}-"
                      f"{c['L_exact']['trajectory']['lambda_max']:.3g} along FedAvg), mu = {c['mu']:.3g} "
                      f"(lambda_min {c['L_exact']['trajectory']['lambda_min']:.3g}), gamma = {c['gamma']:.4g}, "
                      f"eta_1 = {c['eta_1']:.4g} (1/(4L) = {1 / (4 * c['L']):.4g}); Gamma = {c['Gamma']:.3g}, "
                      f"sigma^2_max = {c['sigma2_max']:.3g}, G^2 = {c['G2']:.3g}, B = {c['B']:.4g}, "
                      f"Delta_1 = {c['delta1']:.3g}; Phi(1) = {c['phi_1']:.4g}, Phi(T) = {c['phi_T']:.4g} "
                      f"({c['phi_T_by_step']:.4g} by step)")
        console.print(f"mean ||w_t - w*||^2 <= v/(gamma+t) at every step: full {full['holds']} (min slack "
                      f"{full['min_slack']:.3g}), partial K = {participation} {part['holds']} (min slack "
                      f"{part['min_slack']:.3g})")
        console.print(f"every mean error <= its bound: {metrics['all_mean_below_bound']}; any bound below d = {d}: "
                      f"{metrics['any_bound_below_d']}; iDLG < DLG by bound at T: "
                      f"{metrics['idlg_below_dlg_by_bound']}; {metrics['seconds']['total']:.1f} s; "
                      f"run directory {run.path}; figure {path}")

    emit(run.record(metrics, figures=[str(path)]), opts.as_json, summary)
    if not ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `theory` and `bounds` to the `splitlab` app."""
    app.command("theory")(handles_errors(theory))
    app.command("bounds")(handles_errors(bounds))

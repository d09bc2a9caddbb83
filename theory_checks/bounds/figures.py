"""The figures of `splitlab bounds`, drawn from its metrics record (so they can be redrawn from metrics.json):
`bounds.png` (the paper's Figures 3-5 style: bound and errors over rounds), `trends.png` (the bound at T against
E, N and T) and `batch.png` (bound and errors per image against the batch size, the paper's Figure 9b / App.
C.2). Each returns a `matplotlib.figure.Figure`; save it with `Run.save_figure`."""
from __future__ import annotations

import math

from theory_checks.bounds.attacks import ATTACKS

COLOURS = dict(zip(ATTACKS, ("tab:red", "tab:blue", "tab:green", "tab:purple")))
AXIS_LABELS = {"E": "E, local steps", "N": "N, devices", "T": "T, rounds"}
FLOOR = 1e-4
"""iDLG's exact early reconstructions (1e-30) would squash the rest of a log axis."""


def lg(values) -> list[float]:
    """log10 of each value, at least log10(FLOOR); nan past float range. The figures plot log10 on a linear
    axis: an unregularised surrogate's bound reaches 1e300, where matplotlib's log axis overflows."""
    return [math.log10(max(v, FLOOR)) if v is not None and math.isfinite(v) else math.nan for v in values]


def _units(result: dict) -> str:
    batch = result["config"].get("batch", 1)
    return "||x - R(w_t)||^2" if batch == 1 else f"||X - R(w_t)||^2 / B per image (B = {batch})"


def figure(result: dict):
    """log10 of the bound (solid), the best-of-inits (dashed) and the mean (dotted) error per attack over rounds;
    the vacuity line at d."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    for name in result["attacks"]:
        at = [row for row in result["rows"] if row["attack"] == name]
        r = [row["round"] for row in at]
        ax.plot(r, lg(row["bound"] for row in at), "-", color=COLOURS[name], label=f"{name} bound")
        ax.plot(r, lg(row["best"] for row in at), "--", color=COLOURS[name], label=f"{name} best of inits")
        ax.plot(r, lg(row["mean"] for row in at), ":", color=COLOURS[name], label=f"{name} mean")
    ax.axhline(math.log10(result["config"]["d"]), color="0.5", lw=0.8, label="d (vacuous above)")
    ax.set_xscale("log")
    config = result["config"]
    ax.set(xlabel="round t", ylabel=f"log10 {_units(result)} (floor {FLOOR:g})",
           title=f"Theorem 1 bound vs attack error (input {config['surrogate_input']}, ridge {config['ridge']:g}, "
                 f"H {config['layers']}, {config['fit_pairs_used']} fit pairs)")
    ax.legend(fontsize=7, ncol=2)
    return fig


def trends_figure(result: dict):
    """log10 of the bound at round T per attack (solid) against E, N and T, one varied at a time, each attack's
    L_R and err(w*) held at this run's; Phi(T) per unit L_R^2 dashed in grey on the right-hand axis (the
    attacks' bounds can sit many decades above it)."""
    from matplotlib.figure import Figure

    trends = result["trends"]
    fig = Figure(figsize=(15, 4.5))
    axes, twins = fig.subplots(1, len(trends)), []
    for ax, (axis, per) in zip(axes, trends.items()):
        values = per["values"]
        for name in result["attacks"]:
            ax.plot(values, lg(per[str(v)]["bound_T"][name] for v in values), "o-", color=COLOURS[name], label=name)
        phi = ax.twinx()
        twins.append(phi)
        phi.plot(values, [per[str(v)]["phi_T"] for v in values], "s--", color="0.5", label="Phi(T), right axis")
        phi.set_yscale("log")
        ax.set_xscale("log", base=2)
        ax.set_xticks(values, [str(v) for v in values])
        direction = "increasing" if "increasing" in per else "decreasing"
        ax.set_xlabel(AXIS_LABELS[axis])
        ax.set_title(f"vs {axis}: the paper says {direction}; here {'yes' if per[direction] else 'no'}", fontsize=9)
        if axis == "T":
            phi.set_ylabel("Phi(T) per unit L_R^2")
    axes[0].set_ylabel(f"log10 bound at T, {_units(result)}")
    axes[0].legend(handles=axes[0].get_legend_handles_labels()[0] + twins[0].get_legend_handles_labels()[0],
                   fontsize=7)
    fig.suptitle("Theorem 1 bound trends (the paper's Figures 3-5); L_R and err(w*) held at this run's values",
                 fontsize=9)
    return fig


def batch_figure(results: dict[int, dict]):
    """Per attack against the batch size B, log10 of: the bound at T (left; solid) and the mean (dotted) and
    best-of-inits (dashed) error at T (right), all per image (||X - R(w_T)||^2 / B); two panels because the
    bounds can sit hundreds of decades above the errors. `results` maps B to its metrics."""
    from matplotlib.figure import Figure

    sizes = sorted(results)
    fig = Figure(figsize=(12, 4.8))
    bound_ax, error_ax = fig.subplots(1, 2)
    names = [n for n in ATTACKS if all(n in results[b]["attacks"] for b in sizes)]
    for name in names:
        rows = [results[b]["attacks"][name] for b in sizes]
        bound_ax.plot(sizes, lg(r["bound_T"] for r in rows), "o-", color=COLOURS[name], label=name)
        error_ax.plot(sizes, lg(r["mean_error_T"] for r in rows), "o:", color=COLOURS[name], label=f"{name} mean")
        error_ax.plot(sizes, lg(r["best_error_T"] for r in rows), "o--", color=COLOURS[name],
                      label=f"{name} best of inits")
    for ax, what in ((bound_ax, "bound"), (error_ax, "error")):
        ax.axhline(math.log10(results[sizes[0]]["config"]["d"]), color="0.5", lw=0.8, label="d (vacuous above)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.set(xlabel="batch size B", ylabel=f"log10 {what} per image at T, ||X - R(w_T)||^2 / B")
        ax.legend(fontsize=7, ncol=2 if what == "error" else 1)
    bound_ax.set_title("Theorem 1 bound", fontsize=9)
    error_ax.set_title(f"attack error (floor {FLOOR:g})", fontsize=9)
    fig.suptitle("Batch reconstruction against the batch size (the paper's Figure 9b, App. C.2)", fontsize=10)
    return fig

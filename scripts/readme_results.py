"""Regenerate every table in the README's "Results we measured" from run directories this script creates.

Each section runs ordinary `splitlab` commands (the ones a user would type) into `OUT/<section>/...`,
then reads their metrics.json / summary.csv and prints a markdown table. A run whose metrics.json
already exists is reused, so an interrupted regeneration resumes where it stopped; `--fresh` reruns.

    python scripts/readme_results.py                          # every CPU-sized section (about an hour on 2 cores)
    python scripts/readme_results.py --sections compare,hfl   # some of them
    python scripts/readme_results.py --sections fsha-paper    # the paper's 3000-iteration FSHA runs (hours on a CPU)
"""
from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

SPLITLAB = [sys.executable, "-c", "from splitlab.cli import main; main()"]


def splitlab(out: Path, *args: str, fresh: bool = False) -> dict:
    """Run one command into `out` (reusing a finished run) and return its metrics.json."""
    if fresh and out.exists():
        shutil.rmtree(out)
    done = out / "metrics.json"
    if not done.exists():
        if out.exists():
            shutil.rmtree(out)                      # an unfinished run: start it again
        start = time.perf_counter()
        subprocess.run([*SPLITLAB, *args, "--out", str(out), "--json"], check=True, stdout=subprocess.DEVNULL)
        print(f"  ran `splitlab {' '.join(args)}` in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return json.loads(done.read_text())


def sweep(out: Path, *args: str, fresh: bool = False) -> list[dict]:
    """Run (or resume) a sweep into `out`; return its summary rows."""
    if fresh and out.exists():
        shutil.rmtree(out)
    subprocess.run([*SPLITLAB, "sweep", *args, "--out", str(out), "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out / "summary.csv") as fh:
        return list(csv.DictReader(fh))


def fmt(value, digits: int = 3) -> str:
    if value is None or value == "":
        return "-"
    value = float(value)
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e4):
        return f"{value:.1e}"
    return f"{value:.{digits}f}"


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def pm(row: dict, metric: str, scale: float = 1.0, digits: int = 3) -> str:
    mean, std = row.get(f"{metric}.mean"), row.get(f"{metric}.std")
    if mean in (None, ""):
        return "-"
    return f"{fmt(float(mean) * scale, digits)} ± {fmt(float(std or 0) * scale, digits)}"


# --- sections ------------------------------------------------------------------------------------

def compare_section(root: Path, fresh: bool) -> str:
    m = splitlab(root / "compare", "compare", fresh=fresh)
    rows = []
    for r in m["rows"]:
        rows.append([r["model"], fmt(r["image_mse_minmax"]), fmt(r["paper_mse_x"]), fmt(r["activation_mse"]),
                     fmt(r["paper_mse_z"]), fmt(100 * r["accuracy"], 1)])
    return ("**UnSplit, `splitlab compare`** (jast preset, per-target clones, cut layer 1, seed 0; run "
            f"`{root / 'compare'}`):\n\n"
            + table(["model", "MSE X (min-max)", "paper (MNIST)", "MSE Z", "paper", "accuracy %"], rows))


def table1_seeds_section(root: Path, fresh: bool) -> str:
    rows = sweep(root / "table1-seeds", "--paper", "jast-table1", fresh=fresh)
    body = [[r["arch"], pm(r, "image_mse_minmax"), pm(r, "activation_mse"), pm(r, "accuracy", 100, 1),
             pm(r, "ssim"), r.get("ok", "")] for r in rows]
    return ("**JAST Table 1 over seeds 0-4** (`splitlab sweep --paper jast-table1`, mean ± std over seeds; "
            f"`{root / 'table1-seeds'}`):\n\n"
            + table(["model", "MSE X (min-max)", "MSE Z", "accuracy %", "SSIM", "n"], body))


def orthogonal_section(root: Path, fresh: bool) -> str:
    m = splitlab(root / "orthogonal", "compare", "--archs", "cnn,mlp", "--defences", "none,orthogonal",
                 fresh=fresh)
    rows = [[r["model"], fmt(r["image_mse_minmax"]), fmt(100 * r["accuracy"], 1)] for r in m["rows"]]
    return ("**Orthogonal defence** (`splitlab compare --archs cnn,mlp --defences none,orthogonal`):\n\n"
            + table(["model", "MSE X (min-max)", "accuracy %"], rows))


def tv_section(root: Path, fresh: bool) -> str:
    rows = sweep(root / "tv-sweep", "--paper", "jast-tv-sweep", fresh=fresh)
    body = [[r["lambda-tv"], pm(r, "image_mse_minmax"), pm(r, "ssim")] for r in rows]
    return ("**lambda_tv sweep on the MLP** (`splitlab sweep --paper jast-tv-sweep`, seeds 0-2):\n\n"
            + table(["lambda_tv", "MSE X (min-max)", "SSIM"], body))


def cut_layers_section(root: Path, fresh: bool) -> str:
    rows = sweep(root / "cut-layers", "--paper", "jast-cut-layers", fresh=fresh)
    cuts = sorted({int(r["cut-layer"]) for r in rows})
    by = {(r["defence"], int(r["cut-layer"])): r for r in rows}
    body = []
    for defence in ("none", "input-dp:epsilon=6,delta=0.5"):
        body.append([f"MSE X, {defence}"] + [pm(by[(defence, c)], "image_mse_minmax") for c in cuts])
        body.append([f"accuracy %, {defence}"] + [pm(by[(defence, c)], "accuracy", 100, 1) for c in cuts])
    return ("**CNN cut layers 1-6** (`splitlab sweep --paper jast-cut-layers`, JAST Table 3, seeds 0-2):\n\n"
            + table(["cut layer"] + [str(c) for c in cuts], body))


def small_mlp_section(root: Path, fresh: bool) -> str:
    rows = sweep(root / "small-mlp", "--paper", "jast-small-mlp", fresh=fresh)
    body = [[r["arch"], pm(r, "accuracy", 100, 1), r.get("ok", "")] for r in rows]
    return ("**SmallMLP vs MLP accuracy** (`splitlab sweep --paper jast-small-mlp`, 10 epochs, seeds 0-4; "
            "paper on full MNIST: SmallMLP 92.6, MLP 98.42):\n\n" + table(["model", "accuracy %", "n"], body))


def hfl_section(root: Path, fresh: bool) -> str:
    dlg = splitlab(root / "hfl" / "dlg", "hfl", "--attack", "dlg", "--preset", "dlg.original", fresh=fresh)
    ig = splitlab(root / "hfl" / "invgrad", "hfl", "--attack", "invgrad", "--arch", "convnet", "--preset",
                  "invgrad.quick", fresh=fresh)
    labels = [splitlab(root / "hfl" / f"idlg-{i}", "hfl", "--attack", "idlg", "--preset", "idlg.quick",
                       "--iterations", "1", "--index", str(i), fresh=fresh)["label_accuracy"] for i in range(20)]
    defences = sweep(root / "hfl" / "defences", "--paper", "hfl-defences", fresh=fresh)
    rows = [["DLG, `dlg.original`, LeNet", fmt(dlg["psnr"], 1), fmt(dlg["ssim"]), fmt(dlg["baselines"]["zero"]["psnr"], 1),
             fmt(dlg["label_accuracy"], 2)],
            ["Inverting Gradients, `invgrad.quick`, ConvNet", fmt(ig["psnr"], 1), fmt(ig["ssim"]),
             fmt(ig["baselines"]["zero"]["psnr"], 1), fmt(ig["label_accuracy"], 2)]]
    body = [[r["defence"], pm(r, "psnr", 1, 1), pm(r, "ssim")] for r in defences]
    return ("**HFL, one mnist5k image at batch 1:**\n\n"
            + table(["attack", "PSNR dB", "SSIM", "zero-image PSNR", "label accuracy"], rows)
            + f"\n\niDLG label accuracy over train images 0-19: {100 * sum(labels) / len(labels):.0f}%.\n\n"
            "Upload defences against Inverting Gradients (`splitlab sweep --paper hfl-defences`, seeds 0-2):\n\n"
            + table(["defence", "PSNR dB", "SSIM"], body))


def fsha_section(root: Path, fresh: bool, preset: str = "quick") -> str:
    rows = []
    for arch in ("resnet", "mlp"):
        m = splitlab(root / f"fsha-{preset}" / arch, "attack", "fsha", "--preset", preset, "--arch", arch, fresh=fresh)
        e = m["extras"]
        rows.append([arch, fmt(m["image_mse_minmax"]), fmt(m["image_mse"]), fmt(m["baselines"]["zero"]["image_mse"]),
                     fmt(e["training_interval_mse_pm1_final"]), fmt(e["training_interval_mse_pm1_best"]),
                     m["steps"], fmt(m["seconds"], 0)])
    ratio = float(rows[1][4]) / float(rows[0][4])
    return (f"**FSHA, `{preset}` preset** (`splitlab attack fsha --preset {preset} --arch resnet|mlp`):\n\n"
            + table(["client", "MSE X (min-max)", "MSE [0,1]", "zero-image MSE", "interval MSE [-1,1] final",
                     "best", "iterations", "seconds"], rows)
            + f"\n\nMLP/ResNet final interval error ratio: {ratio:.2f}.")


def theory_section(root: Path, fresh: bool) -> str:
    out = root / "theory"
    if fresh or not (out / "metrics.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([*SPLITLAB, "theory", "--out", str(out), "--json"], stdout=subprocess.DEVNULL)
    m = json.loads((out / "metrics.json").read_text())
    holds = [c for c in m["checks"] if c["expected"] == "holds" and not c["name"].startswith("bounds-")]
    return (f"**Theory** (`splitlab theory`): {m['matched']}/{m['total']} checks matched their expected verdict "
            f"in {sum(m['check_seconds'].values()):.1f} s of checks; the largest measured deviation among the invariances and "
            f"inequalities that hold is {max(c['measured'] for c in holds):.1e}.")


def bounds_section(root: Path, fresh: bool) -> str:
    m = splitlab(root / "bounds", "bounds", fresh=fresh)
    c = m["constants"]
    last = max(r["round"] for r in m["rows"])
    rows = [[r["attack"], fmt(r["mean"]), fmt(r["best"]), fmt(r["bound"], 1), fmt(r["bound/d"], 2), fmt(r["L_R"], 2),
             f"{100 * m['attacks'][r['attack']]['lipschitz_step']['pass_rate']:.0f}%"]
            for r in m["rows"] if r["round"] == last]
    order = next(o for o in m["orderings"] if o["round"] == last)
    return (f"**Reconstruction-error bounds** (`splitlab bounds`: l2-LogReg on digits 0/1, N = 10, E = 2, "
            f"T = {last}; {m['seconds']['total']:.0f} s): L = {c['L']:.2f}, mu = {c['mu']}, gamma = {c['gamma']:.1f}, "
            f"Gamma = {c['Gamma']:.2e}, B = {c['B']:.1f}, Delta_1 = {c['delta1']:.2f}; mean ||w_t - w*||^2 <= "
            f"v/(gamma+t) at every step (minimum slack {m['convergence']['full']['min_slack']:.1f} full, "
            f"{m['convergence']['partial']['min_slack']:.1f} partial). At round {last}:\n\n"
            + table(["attack", "mean error", "best of inits", "bound", "bound/d", "L_R", "C2 rounds passed"], rows)
            + f"\n\nEvery mean error is below its bound: {m['all_mean_below_bound']}; a bound below d = 64: "
            f"{m['any_bound_below_d']}; iDLG < DLG by bound: {m['idlg_below_dlg_by_bound']}. Orderings at round "
            f"{last}: by bound {order['by_bound']}, by mean error {order['by_mean']} (Kendall tau "
            f"{order['tau_mean']:.2f}).")


SECTIONS = {"compare": compare_section, "table1-seeds": table1_seeds_section, "orthogonal": orthogonal_section,
            "tv-sweep": tv_section, "cut-layers": cut_layers_section, "small-mlp": small_mlp_section,
            "hfl": hfl_section, "fsha": fsha_section, "theory": theory_section, "bounds": bounds_section,
            "fsha-paper": lambda root, fresh: fsha_section(root, fresh, "paper")}
DEFAULT = [name for name in SECTIONS if name != "fsha-paper"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(DEFAULT),
                        help=f"comma-separated, from: {', '.join(SECTIONS)} (default: all but fsha-paper)")
    parser.add_argument("--out", type=Path, default=Path("runs/readme"), help="where the run directories go")
    parser.add_argument("--fresh", action="store_true", help="rerun instead of reusing finished runs")
    args = parser.parse_args()
    names = [n.strip() for n in args.sections.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown or not names:
        parser.error(f"unknown section(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(SECTIONS)}")
    for name in names:
        print(f"[{name}]", file=sys.stderr, flush=True)
        print(SECTIONS[name](args.out, args.fresh) + "\n", flush=True)


if __name__ == "__main__":
    main()

"""`--compile auto` and `--compile on` against `--compile off` on every engine attack's default preset, as a user
runs them: each command a fresh `splitlab` process, the three alternating in every repeat, the inductor cache
warm from the first repeat on (a sweep's next cell). For each attack it prints the attack's seconds from
metrics.json (compile included) and whole-process wall seconds, medians over repeats, what `auto` decided and
why, the compiled run's compile seconds, recompiles and graph breaks, and how far its metrics are from eager's
(largest relative difference of PSNR, SSIM and image MSE).

    python scripts/bench_compile_auto.py --threads 2 --repeats 2
    python scripts/bench_compile_auto.py --only dlg --repeats 1      # a check that it runs
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vfl.runtime import hardware  # noqa: E402

from attack_commands import COMMANDS  # noqa: E402  (the attacks in the fixed-seed setting, default presets)

MODES = ("off", "auto", "on")
METRICS = ("psnr", "ssim", "image_mse")


def once(name: str, mode: str, folder: Path, threads: int, cache: str) -> dict:
    out = folder / f"{name}-{mode}-{time.monotonic_ns()}"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TORCHINDUCTOR_CACHE_DIR": cache}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "splitlab", *COMMANDS[name], "--compile", mode, "--json",
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} --compile {mode} failed: {done.stderr.strip().splitlines()[-1:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    return {"wall": wall, "seconds": metrics["seconds"], "metrics": {k: metrics.get(k) for k in METRICS},
            "compile": metrics.get("extras", {}).get("compile", {})}


def relative(a: dict, b: dict) -> float:
    gaps = [abs(a[k] - b[k]) / max(abs(a[k]), 1e-12) for k in METRICS
            if isinstance(a.get(k), float) and isinstance(b.get(k), float)]
    return max(gaps, default=float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=2, help="counted repeats after the warming one")
    parser.add_argument("--only", default=None, help="comma-separated attacks (default: all)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, off first (default off,auto,on)")
    args = parser.parse_args()
    modes = tuple(args.modes.split(","))
    if modes[0] != "off" or not set(modes) <= set(MODES):
        raise SystemExit(f"--modes: off first, then any of {MODES[1:]}")
    names = args.only.split(",") if args.only else list(COMMANDS)
    unknown = set(names) - set(COMMANDS)
    if unknown:
        raise SystemExit(f"unknown attacks {sorted(unknown)}; choose from {', '.join(COMMANDS)}")
    print(hardware(torch.device("cpu")))
    print(f"torch threads per run: {args.threads}; repeats: 1 warming (cold cache) + {args.repeats} counted")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = Path(tmp), str(Path(tmp) / "inductor")
        for name in names:
            cold = {mode: once(name, mode, folder, args.threads, cache) for mode in modes}
            runs = {mode: [] for mode in modes}
            for _ in range(args.repeats):
                for mode in modes:
                    runs[mode].append(once(name, mode, folder, args.threads, cache))
            med = {m: (statistics.median(r["seconds"] for r in runs[m]), statistics.median(r["wall"] for r in runs[m]))
                   if m in runs else (float("nan"), float("nan")) for m in MODES}
            last = {m: runs[m][-1] if m in runs else {"compile": {}, "metrics": {}} for m in MODES}
            auto, on = last["auto"]["compile"], last["on"]["compile"]
            rows.append((name, med, auto.get("compiled"), auto.get("reason", "-"), cold.get("on", last["on"])["compile"],
                         on, relative(last["off"]["metrics"], last["on"]["metrics"])))
            print(f"  {name}: done", flush=True)
    print("\nattack seconds (metrics.json, compile included) and process wall seconds, medians; "
          "compile seconds cold (first run into an empty cache) / warm")
    print(f"{'attack':9} {'off s':>7} {'auto s':>7} {'on s':>7} {'auto/off':>8} {'off wall':>8} {'auto wall':>9} "
          f"{'on wall':>8}  {'compile s cold/warm':>19} {'recompiles':>10} {'breaks':>6} {'on vs off':>9}  auto's choice")
    for name, med, compiled, reason, cold_on, on, gap in rows:
        print(f"{name:9} {med['off'][0]:7.2f} {med['auto'][0]:7.2f} {med['on'][0]:7.2f} "
              f"{med['auto'][0] / med['off'][0]:7.2f}x {med['off'][1]:8.1f} {med['auto'][1]:9.1f} {med['on'][1]:8.1f}  "
              f"{cold_on.get('compile_seconds', 0):9.1f} / {on.get('compile_seconds', 0):7.1f} "
              f"{on.get('recompiles', '-'):>10} {on.get('graph_breaks', '-'):>6} {gap:9.1e}  "
              f"{'compiled' if compiled else 'eager'}: {reason}")
    print(hardware(torch.device("cpu")))


if __name__ == "__main__":
    main()

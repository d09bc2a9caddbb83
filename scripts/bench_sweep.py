"""One sweep run twice side by side: `--executor local` (cells one after another in one process) and
Ray with `--concurrency` tasks, into fresh directories; prints both wall times, their ratio, the
per-task torch threads, and checks that every cell's metrics are identical between the two
(timings excepted). Run it on a quiet machine; Ray's start-up is inside the Ray wall time.

    python scripts/bench_sweep.py                      # attack unsplit --preset quick, small-mlp,cnn x seeds 0-3
    python scripts/bench_sweep.py --archs small-mlp --seeds 2 --iterations 2      # a check that it works

Torch's CPU kernels may sum in a different order with a different number of threads, so metrics
are bitwise identical only at equal thread counts: when the local run used more threads than a
Ray task and the metrics differ, a third run (`--executor local --threads T`, T the Ray tasks'
setting) is compared as well.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sweep_file(args) -> str:
    lines = ['command = "attack unsplit"', "[fixed]", f'preset = "{args.preset}"', f"epochs = {args.epochs}",
             'device = "cpu"']
    if args.iterations:
        lines.append(f"iterations = {args.iterations}")
    archs = ", ".join(f'"{a}"' for a in args.archs.split(","))
    lines += ["[axes]", f"arch = [{archs}]", f"seed = {list(range(args.seeds))}"]
    return "\n".join(lines) + "\n"


def run(grid: Path, out: Path, *options: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-c", "from splitlab.cli import main; main()", "sweep", str(grid), "--out", str(out),
               "--no-progress", "--json", *options]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(options)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def cells(out: Path) -> dict[str, dict]:
    """cell hash -> {record, metrics without timings}."""
    result = {}
    for record_path in sorted((out / "cells").glob("*/cell.json")):
        record = json.loads(record_path.read_text())
        metrics = json.loads((record_path.parent / "metrics.json").read_text())
        result[record["cell"]] = {"record": record, "metrics": strip_timings(metrics)}
    return result


def strip_timings(value):
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if "second" not in k}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


def compare(a: dict, b: dict) -> list[str]:
    assert set(a) == set(b), "the two sweeps ran different cells"
    return [a[k]["record"]["name"] for k in sorted(a) if a[k]["metrics"] != b[k]["metrics"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default="small-mlp,cnn")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--iterations", type=int, default=None, help="override the preset's UnSplit rounds (quick checks)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="keep the sweeps here (default: a temporary dir)")
    args = parser.parse_args()

    base = args.out or Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    base.mkdir(parents=True, exist_ok=True)
    grid = base / "bench.toml"
    grid.write_text(sweep_file(args))
    n = len(args.archs.split(",")) * args.seeds
    print(f"sweep: {n} cells of `splitlab attack unsplit --preset {args.preset} --epochs {args.epochs}` over "
          f"arch {args.archs} x seed 0-{args.seeds - 1}; {os.cpu_count()} CPUs; directories under {base}")

    local_s = run(grid, base / "local", "--executor", "local")
    ray_s = run(grid, base / "ray", "--executor", "ray", "--concurrency", str(args.concurrency))
    local, ray = cells(base / "local"), cells(base / "ray")
    local_threads = sorted({c["record"]["torch_threads"] for c in local.values()})
    ray_threads = sorted({c["record"]["torch_threads"] for c in ray.values()})
    omp = sorted({str(c["record"].get("omp_num_threads")) for c in ray.values()})
    nodes = sorted({c["record"]["where"].get("node_id", "")[:12] for c in ray.values()})
    pids = sorted({c["record"]["where"]["pid"] for c in ray.values()})

    print(f"local executor:            {local_s:8.1f} s wall   (torch threads per cell {local_threads})")
    print(f"ray, concurrency {args.concurrency}:        {ray_s:8.1f} s wall   (torch threads per task {ray_threads}, "
          f"OMP_NUM_THREADS {omp}; {len(pids)} worker processes on node(s) {nodes})")
    print(f"speed-up local / ray:      {local_s / ray_s:8.2f}x")
    differ = compare(local, ray)
    print(f"per-cell metrics, ray vs local: {n - len(differ)}/{n} identical" + (f"; differ: {differ}" if differ else ""))
    if differ and local_threads != ray_threads and len(ray_threads) == 1:
        same = base / f"local-threads{ray_threads[0]}"
        same_s = run(grid, same, "--executor", "local", "--threads", str(ray_threads[0]))
        differ_same = compare(cells(same), ray)
        print(f"local at {ray_threads[0]} thread(s) ({same_s:.1f} s wall) vs ray: {n - len(differ_same)}/{n} identical"
              + (f"; differ: {differ_same}" if differ_same else ""))
        differ = differ_same
    if args.out is None:
        shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()

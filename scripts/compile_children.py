"""The compiled rows of the benchmarks (`bench_engine.py --compile`, `bench_unsplit.py --compile`): each workload
runs in a child process of the calling script, first with an empty inductor cache (cold), then with the cache the
first child filled (warm); each child prints one JSON line, and the rows print side by side."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def cold_and_warm(script: str, names: list[str], child_args: list[str]) -> list[dict]:
    """Each workload in a child process with an empty inductor cache (cold), then in one more with the cache
    the first filled (warm); a child prints its measurement as one JSON line."""
    rows = []
    for name in names:
        row = {"workload": name}
        with tempfile.TemporaryDirectory(prefix="splitlab-inductor-") as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
            for cache_state in ("cold", "warm"):
                done = subprocess.run([sys.executable, script, "--compile-child", name, *child_args], env=env,
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"{name} ({cache_state} cache) failed: {done.stderr.strip().splitlines()[-1]}")
                row[cache_state] = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"  {name}: done", flush=True)
    return rows


def print_compiled(rows: list[dict]) -> None:
    """Eager and compiled ms per step side by side, the speed-up, the compile seconds (cold and warm cache) and
    the steps a compile needs to pay for itself at that speed-up."""
    width = max(len(r["workload"]) for r in rows)
    print(f"\nms per step, eager and compiled in the same child process (torch threads: "
          f"{rows[0]['cold']['threads']}); compile seconds with a cold and a warm inductor cache")
    print(f"{'workload':<{width}}  {'cache':>5}  {'eager':>8}  {'compiled':>8}  {'speed-up':>8}  {'compile s':>9}  "
          f"{'break-even steps':>16}  compiles/recompiles/breaks")
    for r in rows:
        for state in ("cold", "warm"):
            m = r[state]
            saved = (m["eager_ms"] - m["compiled_ms"]) / 1e3
            even = f"{m['compile_seconds'] / saved:,.0f}" if saved > 0 else "never"
            print(f"{r['workload'] if state == 'cold' else '':<{width}}  {state:>5}  {m['eager_ms']:>8.2f}  "
                  f"{m['compiled_ms']:>8.2f}  {m['eager_ms'] / m['compiled_ms']:>7.2f}x  {m['compile_seconds']:>9.1f}  "
                  f"{even:>16}  {m['compiles']}/{m['recompiles']}/{m['graph_breaks']}")

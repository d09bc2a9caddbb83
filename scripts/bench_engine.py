"""Batched vs sequential trials in the engine, measured side by side in one run.

Two workloads, each with R restarts (default 8) on one mnist5k image at batch size 1:

- DLG on the sigmoid LeNet: L-BFGS (20 inner iterations per step), summed squared differences,
  label logits optimised jointly (`dlg.original` with fewer steps);
- Inverting Gradients on the ConvNet: cosine + TV, signed Adam, box, step decay (`invgrad.paper`
  with fewer iterations), labels recovered by iDLG.

Both modes start from the same seeded variables. Each (workload, mode) runs once to warm up, then
`--repeats` times alternating the modes; the table shows the median throughput in trial-iterations
per second (restarts x iterations / wall seconds; an L-BFGS iteration is one `.step()`) and the
ratio batched / sequential. The machine may be shared with other processes, hence the medians.

    python scripts/bench_engine.py --device auto --repeats 3
"""
from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace

import torch

from attacks.hfl.dlg import DLG
from attacks.hfl.invgrad import InvertingGradients
from attacks.hfl.observations import observe_fedsgd
from attacks.hfl.presets import preset
from vfl import data as datasets
from vfl.models.hfl import build_hfl_model
from vfl.runtime import hardware, resolve_device, timed


def workloads(device: torch.device, restarts: int, dlg_steps: int, ig_iterations: int):
    images = datasets.load("mnist5k")
    x, y = images.images[:1].to(device), images.labels[:1].to(device)
    lenet = build_hfl_model("lenet", seed=0).to(device)
    convnet = build_hfl_model("convnet", seed=0).to(device)
    dlg = DLG(replace(preset("dlg.original"), steps=dlg_steps, restarts=restarts))
    ig = InvertingGradients(replace(preset("invgrad.paper"), iterations=ig_iterations, restarts=restarts, tv=1e-4))
    return [
        (f"DLG, LeNet, L-BFGS {dlg_steps} steps x 20", dlg, observe_fedsgd(lenet, x, y, arch="lenet"), dlg_steps),
        (f"Inverting Gradients, ConvNet, {ig_iterations} Adam its", ig, observe_fedsgd(convnet, x, y, arch="convnet"),
         ig_iterations),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--dlg-steps", type=int, default=15, help="L-BFGS steps (x20 inner iterations)")
    parser.add_argument("--ig-iterations", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON object")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    print(f"hardware: {hardware(device)}; restarts {args.restarts}; median of {args.repeats} repeats", flush=True)
    rows = []
    for name, attack, observation, iterations in workloads(device, args.restarts, args.dlg_steps, args.ig_iterations):
        short = replace(attack.settings, **({"steps": 2} if hasattr(attack.settings, "steps") else {"iterations": 5}))
        for mode in ("batched", "sequential"):                     # warm-up (allocator, vmap tracing, caches)
            type(attack)(short)(observation, seed=0, mode=mode)
        seconds = {"batched": [], "sequential": []}
        for _ in range(args.repeats):
            for mode in ("batched", "sequential"):
                seconds[mode].append(timed(lambda: attack(observation, seed=0, mode=mode), device))
        work = args.restarts * iterations
        batched, sequential = (work / statistics.median(seconds[m]) for m in ("batched", "sequential"))
        rows.append({"workload": name, "restarts": args.restarts, "batched_trial_its_per_s": batched,
                     "sequential_trial_its_per_s": sequential, "ratio": batched / sequential,
                     "seconds": seconds})
        print(f"  {name}: batched {batched:.1f}, sequential {sequential:.1f} trial-its/s, "
              f"ratio {batched / sequential:.2f}x  (seconds {seconds})", flush=True)
    width = max(len(r["workload"]) for r in rows)
    print(f"\n{'workload':<{width}}  {'batched':>10}  {'sequential':>10}  {'ratio':>6}   (trial-iterations/s)")
    for r in rows:
        print(f"{r['workload']:<{width}}  {r['batched_trial_its_per_s']:>10.1f}  "
              f"{r['sequential_trial_its_per_s']:>10.1f}  {r['ratio']:>5.2f}x")
    if args.json:
        print(json.dumps({"hardware": hardware(device), "rows": rows}))


if __name__ == "__main__":
    main()

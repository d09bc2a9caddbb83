"""Time UnSplit's per-target mode (all targets as engine trials) against a plain loop over the targets.

Both run the same attack on the same ten targets (the first test image of each class) with the same
per-target clones, side by side in one process; the plain loop is `attacks.split.unsplit_reference`.

    python scripts/bench_unsplit.py --rounds 10 --device auto
"""
from __future__ import annotations

import argparse
import platform
import time

import torch

from attacks.split.unsplit import observe, preset, unsplit
from attacks.split.unsplit_reference import unsplit_loop
from vfl import data
from vfl.models import build_split
from vfl.protocol import Client
from vfl.runtime import resolve_device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(arch: str, rounds: int, device: torch.device, repeats: int) -> dict:
    client_model, _ = build_split(arch, 1, seed=0)
    client = Client(client_model.to(device), torch.optim.SGD(client_model.parameters(), lr=0.0))
    targets = data.first_of_each_class(data.load("mnist5k", "test"))[0].to(device)
    observation = observe(client, targets, arch, 1)
    settings = preset("jast", rounds=rounds)
    warm = preset("jast", rounds=1)
    unsplit(observation, warm, "per-target", progress=False)
    unsplit_loop(observation, warm)
    times = {"per-target (engine, batched)": [], "plain loop over targets": []}
    for _ in range(repeats):
        for name, fn in (("per-target (engine, batched)",
                          lambda: unsplit(observation, settings, "per-target", progress=False)),
                         ("plain loop over targets", lambda: unsplit_loop(observation, settings))):
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - start)
    best = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    steps = settings.steps * len(targets)
    return {"arch": arch, "target_steps": steps, **{k: v for k, v in best.items()},
            "ratio": best["plain loop over targets"] / best["per-target (engine, batched)"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="cnn,mlp")
    parser.add_argument("--rounds", type=int, default=10, help="jast rounds of 20 + 20 steps per target")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    device = resolve_device(args.device)
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else \
        f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"
    print(f"UnSplit per-target vs plain loop, 10 targets, {args.rounds} jast rounds; {hardware}; torch {torch.__version__}")
    print(f"{'arch':6} {'steps':>8} {'engine s':>10} {'loop s':>10} {'speed-up':>9}")
    for arch in args.archs.split(","):
        r = measure(arch, args.rounds, device, args.repeats)
        print(f"{arch:6} {r['target_steps']:8d} {r['per-target (engine, batched)']:10.2f} "
              f"{r['plain loop over targets']:10.2f} {r['ratio']:8.2f}x")


if __name__ == "__main__":
    main()

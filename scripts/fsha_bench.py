"""Iteration speed of FSHA (protocol rounds per second) for both client setups and presets.

    python scripts/fsha_bench.py                          # resnet and mlp, quick and paper presets, --device auto
    python scripts/fsha_bench.py --device cpu --threads 1 --iterations 10 --warmup 3

Each row builds the victim's client session and the attacker's observation (`attacks.split.session.victim.observed`,
as `run_fsha` does), runs the attack (`attacks.split.fsha.FSHA`) for `--warmup` rounds, then on a fresh session for
`--iterations` rounds, and reports the second run's loop time (`Reconstruction.seconds`: the rounds only, the device's queued work included,
networks built before the clock starts). The public PyTorch port of FSHA runs about 4 it/s on a GPU
(10,000 iterations in 39.5 min, with `set_detect_anomaly` in every step).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace

import torch

from attacks.registry import preset as registry_preset
from attacks.split.fsha import FSHA, FshaObservation
from attacks.split.session.experiment import victim_for
from attacks.split.session.victim import load_split, observed, victim_side
from vfl.runtime import resolve_device


def observation(victim, attack: FSHA) -> FshaObservation:
    side = victim_side(victim, *load_split(victim, attack.settings.batch_size))
    return observed(side, attack, lambda line: None, seed=0).observation


def bench(preset: str, arch: str, device: str, iterations: int, warmup: int, level: int) -> dict:
    s = registry_preset(preset, "fsha").settings()
    victim = victim_for(s, arch=arch, device=device, cut_layer=level)
    attack = FSHA(replace(s, iterations=warmup, log_every=max(warmup, 1)))
    attack(observation(victim, attack), seed=0)        # warm-up: allocator, kernels, caches
    timed = FSHA(replace(s, iterations=iterations, log_every=iterations))
    rec = timed(observation(victim, timed), seed=0)
    return {"preset": s.preset, "arch": arch, "level": level, "batch_size": s.batch_size, "width": s.width,
            "device": str(resolve_device(device)), "threads": torch.get_num_threads(), "iterations": iterations,
            "seconds_per_iteration": rec.seconds / iterations, "iterations_per_second": iterations / rec.seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--presets", nargs="+", default=["quick", "paper"])
    parser.add_argument("--archs", nargs="+", default=["resnet", "mlp"])
    parser.add_argument("--cut-layer", "--level", dest="level", type=int, default=4, help="FSHA's split level")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    args = parser.parse_args()
    if args.iterations < 1 or args.warmup < 1:
        parser.error("--iterations and --warmup must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    for preset in args.presets:
        for arch in args.archs:
            row = bench(preset, arch, args.device, args.iterations, args.warmup, args.level)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['preset']:>18} {arch:>6} L{row['level']} batch {row['batch_size']:>3} "
                      f"width {row['width']:<5} {row['device']:>5} threads {row['threads']}: "
                      f"{row['seconds_per_iteration']:.3f} s/it = {row['iterations_per_second']:.2f} it/s", flush=True)


if __name__ == "__main__":
    main()

"""Fixed-seed metrics of every registered attack, with and without defences: the record a refactor is held to.

    python scripts/fixed_seed.py --out before.json          # every attack at its smoke options, seed 0
    python scripts/fixed_seed.py --out after.json
    python scripts/fixed_seed.py --compare before.json after.json   # every number that moved, bit for bit

Each case runs through `splitlab.api` on one torch thread, so the numbers are the same on every run of the same
code on the same machine; a refactor that changes none of the arithmetic leaves every number unchanged.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

CASES: dict[str, tuple[str, dict]] = {
    "label-norm+marvell": ("label-norm", {"send_back": "marvell:scale=1"}),
    "label-norm+max-norm": ("label-norm", {"send_back": "max-norm"}),
    "label-direction+sparsify": ("label-direction", {"send_back": "sparsify:drop=0.5"}),
    "unsplit+orthogonal": ("unsplit", {"defence": "orthogonal"}),
    "unsplit+input-dp": ("unsplit", {"defence": "input-dp:epsilon=6,delta=0.5"}),
    "unsplit+activation-noise": ("unsplit", {"defence": "activation-noise:sigma=0.1"}),
    "dlg+gaussian": ("dlg", {"defence": "gaussian:sigma=0.01"}),
}
"""Attacks met by defences, beside each attack alone (at its smoke options)."""


def flat(value, prefix=""):
    """Every number under `value`, by its dotted path (floats as their exact hex)."""
    if hasattr(value, "tolist"):                     # a tensor or an array
        value = value.tolist()
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flat(item, f"{prefix}{key}.").items()}
    if isinstance(value, (list, tuple)):
        return {k: v for i, item in enumerate(value) for k, v in flat(item, f"{prefix}{i}.").items()}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return {prefix[:-1]: value}
    if isinstance(value, float):
        return {prefix[:-1]: value.hex() if math.isfinite(value) else str(value)}
    return {prefix[:-1]: value}


VOLATILE = ("seconds", "time", "throughput", "per_second", "peak_memory", "started", "finished", "hardware",
            "threads", "compile", "rss")


def record(names: list[str] | None) -> dict:
    import torch

    from attacks import registry
    from splitlab import api

    torch.set_num_threads(1)
    cases = {name: (name, {}) for name in registry.names()} | CASES
    out = {}
    for case, (attack, extra) in cases.items():
        if names and case not in names:
            continue
        started = time.perf_counter()
        outcome = api.attack(attack, seed=0, **{**registry.spec(attack).smoke, **extra})
        metrics = {k: v for k, v in flat(outcome.metrics).items() if not any(w in k for w in VOLATILE)}
        out[case] = metrics
        print(f"{case}: {len(metrics)} values, {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return out


def compare(before: dict, after: dict) -> int:
    moved = 0
    for case in sorted(set(before) | set(after)):
        a, b = before.get(case), after.get(case)
        if a is None or b is None:
            print(f"{case}: only {'after' if a is None else 'before'}")
            continue
        for key in sorted(set(a) | set(b)):
            if key not in a:
                print(f"{case}: {key} added")
            elif key not in b:
                print(f"{case}: {key} removed"); moved += 1
            elif a[key] != b[key]:
                def shown(v):
                    return float.fromhex(v) if isinstance(v, str) and v.startswith(("0x", "-0x")) else v
                print(f"{case}: {key} {shown(a[key])!r} -> {shown(b[key])!r}"); moved += 1
    print(f"{moved} values moved in {len(set(before) & set(after))} cases")
    return 1 if moved else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", nargs="*", help="cases to run (attack names or the CASES above)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*(json.loads(p.read_text()) for p in args.compare)))
    if args.out is None:
        parser.error("give --out FILE or --compare BEFORE AFTER")
    args.out.write_text(json.dumps(record(args.only), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

"""Time UnSplit's per-target mode (all targets as engine trials) against a plain loop over the targets.

Both run the same attack on the same ten targets (the first test image of each class) with the same
per-target clones, side by side in one process; the plain loop is `attacks.split.unsplit_reference`.

    python scripts/bench_unsplit.py --rounds 10 --device auto

`--breakdown` adds, per architecture, the two halves of one clone step timed alone: the clone-fit
forward-backward (`vmap` over the ten stacked clones vs ten single calls) and the fused Adam step
(one over the stacked clone parameters vs ten small ones). Where both take as long stacked as
looped, the step is bound by memory traffic and batching cannot speed it up on that device.
"""
from __future__ import annotations

import argparse
import statistics

import torch
from torch.func import functional_call, grad, vmap

from attacks.split.unsplit import observe, preset, unsplit
from attacks.split.unsplit_reference import unsplit_loop
from vfl import data
from vfl.models import arch_spec, build_split
from vfl.protocol import Client
from vfl.runtime import hardware, resolve_device, timed


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
            times[name].append(timed(fn, device))
    best = {k: statistics.median(v) for k, v in times.items()}
    steps = settings.steps * len(targets)
    return {"arch": arch, "target_steps": steps, **{k: v for k, v in best.items()},
            "ratio": best["plain loop over targets"] / best["per-target (engine, batched)"]}


def _median_ms(fn, device: torch.device, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    return 1e3 * statistics.median(timed(fn, device) for _ in range(repeats))


def breakdown(arch: str, device: torch.device, targets: int = 10) -> dict:
    """Milliseconds for one clone step's halves over `targets` clones: stacked (engine) vs one by one."""
    clones = [build_split(arch, 1, seed=r)[0].to(device) for r in range(targets)]
    module = clones[0]
    x = torch.rand(targets, 1, *arch_spec(arch).input_shape, device=device)
    h = torch.stack([c(x[r]).detach() for r, c in enumerate(clones)]) + 0.01

    def fit(params, xr, hr):
        return torch.nn.functional.mse_loss(functional_call(module, params, (xr,)), hr)

    stacked = {k: torch.stack([dict(c.named_parameters())[k].detach() for c in clones]) for k, _ in
               module.named_parameters()}
    singles = [{k: v.detach() for k, v in c.named_parameters()} for c in clones]
    fit_grad = grad(fit)
    batched_fit = vmap(fit_grad)
    flat = [t.reshape(-1).clone() for t in stacked.values()]
    for t in flat:
        t.grad = torch.randn_like(t)
    small = [t.detach().clone() for c in singles for t in c.values()]
    for t in small:
        t.grad = torch.randn_like(t)
    adam = {"stacked": torch.optim.Adam(flat, lr=1e-3, amsgrad=True, fused=True),
            "looped": [torch.optim.Adam(small[i:i + len(stacked)], lr=1e-3, amsgrad=True, fused=True)
                       for i in range(0, len(small), len(stacked))]}
    return {"fit stacked": _median_ms(lambda: batched_fit(stacked, x, h), device),
            "fit looped": _median_ms(lambda: [fit_grad(p, x[r], h[r]) for r, p in enumerate(singles)], device),
            "adam stacked": _median_ms(adam["stacked"].step, device),
            "adam looped": _median_ms(lambda: [o.step() for o in adam["looped"]], device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="cnn,mlp")
    parser.add_argument("--rounds", type=int, default=10, help="jast rounds of 20 + 20 steps per target")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time one clone step's forward-backward and Adam step, stacked vs looped")
    args = parser.parse_args()
    device = resolve_device(args.device)
    print(f"UnSplit per-target vs plain loop, 10 targets, {args.rounds} jast rounds; {hardware(device)}")
    print(f"{'arch':6} {'steps':>8} {'engine s':>10} {'loop s':>10} {'speed-up':>9}")
    for arch in args.archs.split(","):
        r = measure(arch, args.rounds, device, args.repeats)
        print(f"{arch:6} {r['target_steps']:8d} {r['per-target (engine, batched)']:10.2f} "
              f"{r['plain loop over targets']:10.2f} {r['ratio']:8.2f}x")
    if args.breakdown:
        print("\none clone step over 10 targets, median ms: stacked (engine) / looped")
        for arch in args.archs.split(","):
            b = breakdown(arch, device)
            print(f"{arch:6} clone fit forward-backward {b['fit stacked']:7.2f} / {b['fit looped']:7.2f}   "
                  f"fused Adam step {b['adam stacked']:7.2f} / {b['adam looped']:7.2f}")


if __name__ == "__main__":
    main()

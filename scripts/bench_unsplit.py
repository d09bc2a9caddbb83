"""Time UnSplit through the engine against the original code's loop, side by side in one process.

The same attack on the same targets (the first test image of each class; the client untrained, since
speed does not depend on its weights), four ways, alternating in every repeat:

- plain loop:   the UnSplit code's `model_inversion_stealing` written out below, one clone carried from
                target to target, torch's default Adam (amsgrad) as that code builds it;
- shared:       `UnSplit` with `clone="shared"`: one engine run with one trial per target;
- per-target:   `UnSplit` with `clone="per-target"`: all targets as trials of one batched run;
- per-target, sequential: the same trials run one after another (`mode="sequential"`);
- per-target, auto: `mode="auto"`, whichever of the two the engine's rule picks (named in the row).

The table shows seconds per target, milliseconds per target-step and each row's speed-up over the
plain loop, plus the batched speed-up over sequential trials.

    python scripts/bench_unsplit.py --rounds 10
    python scripts/bench_unsplit.py --quick        # a check that everything runs, in seconds

`--compile` adds the engine's modes compiled (`compile="on"`) beside eager, per architecture and clone
mode, each in a child process with a cold inductor cache and then a warm one (`bench_engine.cold_and_warm`):
milliseconds per target-step eager and compiled (the compile seconds taken out), their ratio, the compile
seconds and the steps that repay them.

`--memory` adds the machine's copy bandwidth and each architecture's memory-traffic time: the bytes one
target's input step + clone step move (about `FLOATS_PER_PAIR` floats per clone parameter) over that
bandwidth, beside the best engine row's time per step pair (near 1x: memory-bound).

`--breakdown` adds, per architecture, the two halves of one clone step timed alone: the clone-fit
forward-backward (`vmap` over the ten stacked clones vs ten single calls) and the fused Adam step
(one over the stacked clone parameters vs ten small ones). Where both take as long stacked as
looped, the step is bound by memory traffic and batching cannot speed it up on that device.
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
import statistics

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from attacks.engine import EngineOptions, auto_mode
from attacks.registry import preset as registry_preset
from attacks.split.unsplit import CutObservation, UnSplit, UnsplitSettings
from attacks.split.observations import observe_cut as observe
from vfl import data
from vfl.models import arch_spec, build_split
from vfl.protocol import Client
from vfl.runtime import hardware, resolve_device, timed


# --- the original code's loop ------------------------------------------------------------------------

def plain_unsplit(observation: CutObservation, settings: UnsplitSettings, seed: int = 0) -> torch.Tensor:
    """UnSplit's `model_inversion_stealing` over the targets with one clone (seeded as the engine's)."""
    def tv(x):                                            # UnSplit's util.TV
        count_h, count_w = x[:, :, 1:, :].numel() / x.shape[0], x[:, :, :, 1:].numel() / x.shape[0]
        h_tv = torch.pow(x[:, :, 1:, :] - x[:, :, :-1, :], 2).sum()
        w_tv = torch.pow(x[:, :, :, 1:] - x[:, :, :, :-1], 2).sum()
        return (h_tv / count_h + w_tv / count_w) / x.shape[0]

    clone, _ = build_split(observation.arch, observation.cut_layer, seed=seed)
    clone = clone.to(observation.activations.device)
    mse = nn.MSELoss()
    results = []
    for target in observation.activations:
        h = target.unsqueeze(0)
        x = torch.full((1, *observation.input_shape), settings.init, device=h.device).requires_grad_(True)
        input_opt = torch.optim.Adam([x], lr=settings.lr, amsgrad=True)
        model_opt = torch.optim.Adam(clone.parameters(), lr=settings.lr, amsgrad=True)
        for _ in range(settings.iterations):
            for _ in range(settings.input_steps):
                input_opt.zero_grad()
                loss = mse(clone(x), h) + settings.lambda_tv * tv(x) + settings.lambda_l2 * (x ** 2).mean()
                loss.backward()
                input_opt.step()
            for _ in range(settings.clone_steps):
                model_opt.zero_grad()
                mse(clone(x), h).backward()
                model_opt.step()
        results.append(x.detach()[0])
    return torch.stack(results)


def preset(name: str, **overrides) -> UnsplitSettings:
    return registry_preset(name, "unsplit").settings(**overrides)


def unsplit(observation: CutObservation, settings: UnsplitSettings, clone: str, mode: str = "batched", **kwargs):
    """UnSplit as the driver runs it: its engine options from the settings, the engine's report attached."""
    engine = EngineOptions.of(settings, mode=mode, **kwargs)
    return engine.report.attach(UnSplit(replace(settings, clone=clone))(observation, engine=engine))


def _per_target(observation, settings, mode: str):
    return unsplit(observation, settings, "per-target", mode, progress=False)


def _auto_pick(observation: CutObservation) -> str:
    """The mode `mode="auto"` picks for the per-target variables (stacked clones, one input per target)."""
    clone = build_split(observation.arch, observation.cut_layer)[0]
    n = observation.activations.shape[0]
    return auto_mode({"x": torch.zeros(n, 1, *observation.input_shape),
                      "clone": {k: v.detach().expand(n, *v.shape) for k, v in clone.named_parameters()}})


def measure(arch: str, settings: UnsplitSettings, device: torch.device, repeats: int, targets: int) -> dict:
    observation = _observation(arch, device, targets)
    variants = {
        "plain loop": lambda s: plain_unsplit(observation, s),
        "shared": lambda s: unsplit(observation, s, "shared", progress=False),
        "per-target": lambda s: unsplit(observation, s, "per-target", progress=False),
        "per-target, sequential": lambda s: _per_target(observation, s, "sequential"),
        f"per-target, auto ({_auto_pick(observation)})": lambda s: _per_target(observation, s, "auto"),
    }
    warm = preset("jast", iterations=1, input_steps=2, clone_steps=2)
    for fn in variants.values():
        fn(warm)
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            seconds[name].append(timed(lambda: fn(settings), device))
    per_target = {k: statistics.median(v) / targets for k, v in seconds.items()}
    return {"arch": arch, "targets": targets, "steps_per_target": settings.steps, "seconds_per_target": per_target,
            "speedup": {k: per_target["plain loop"] / v for k, v in per_target.items()},
            "batched_speedup": per_target["per-target, sequential"] / per_target["per-target"]}


def _observation(arch: str, device: torch.device, targets: int) -> CutObservation:
    client_model, _ = build_split(arch, 1, seed=0)
    client = Client(client_model.to(device), torch.optim.SGD(client_model.parameters(), lr=0.0))
    images = data.first_of_each_class(data.load("mnist5k", "test"))[0][:targets].to(device)
    return observe(client, images, arch, 1)


def compiled_child(name: str, settings: UnsplitSettings, device: torch.device, repeats: int, targets: int) -> dict:
    """Eager (warm-up, then the median of `repeats`) and one compiled run of one clone mode, ms per target-step."""
    arch, clone = name.split(" ", 1)
    observation = _observation(arch, device, targets)

    def attack(compile_mode: str):
        return unsplit(observation, replace(settings, compile=compile_mode), clone, mode="auto")

    attack("off")
    eager = statistics.median(timed(lambda: attack("off"), device) for _ in range(repeats))
    result = attack("on")
    report = result.extras["compile"]
    steps = settings.steps * targets
    return {"eager_ms": 1e3 * eager / steps, "compiled_ms": 1e3 * (result.seconds - report["compile_seconds"]) / steps,
            "compile_seconds": report["compile_seconds"], "compiles": report["compiles"],
            "recompiles": report["recompiles"], "graph_breaks": report["graph_breaks"],
            "threads": torch.get_num_threads()}


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


FLOATS_PER_PAIR = 14
"""Float32 values one target's input step + clone step move per clone parameter, an estimate: the input step
reads the weights forward and backward (2); the clone step reads them forward and backward and writes their
gradient (3; a one-layer client skips the backward read); amsgrad Adam reads the parameter, gradient and three
moments and writes the parameter and the moments back (9). Caches can hold a small client's weights, so a
measured step can come in under this estimate."""


def copy_bandwidth(device: torch.device, floats: int = 1 << 25, repeats: int = 10) -> float:
    """Bytes per second a large tensor copy moves on this machine (read plus write)."""
    src, dst = torch.rand(floats, device=device), torch.empty(floats, device=device)
    return 2 * 4 * floats / (_median_ms(lambda: dst.copy_(src), device, repeats) / 1e3)


def memory_floor(arch: str, device: torch.device, bandwidth: float) -> dict:
    """The milliseconds per target step pair that the memory traffic alone would cost at the copy bandwidth
    (`FLOATS_PER_PAIR`): near it, a step is memory-bound and neither batching nor compiling can gain much."""
    params = sum(p.numel() for p in build_split(arch, 1)[0].parameters())
    moved = FLOATS_PER_PAIR * 4 * params
    return {"params": params, "bytes_per_pair": moved, "floor_ms_per_pair": 1e3 * moved / bandwidth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="cnn,mlp")
    parser.add_argument("--rounds", type=int, default=10, help="jast rounds of 20 + 20 steps per target")
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="one round of 5 + 5 steps, one repeat")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time one clone step's forward-backward and Adam step, stacked vs looped")
    parser.add_argument("--compile", action="store_true", help="also time the modes compiled, cold and warm cache")
    parser.add_argument("--compile-only", action="store_true", help="only the compiled rows")
    parser.add_argument("--compile-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true",
                        help="also the copy bandwidth and the memory-traffic time of one target's step pair")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = preset("jast", iterations=args.rounds)
    if args.quick:
        settings, args.repeats = preset("jast", iterations=1, input_steps=5, clone_steps=5), 1
    device = resolve_device(args.device)
    if args.compile_child:
        print(json.dumps(compiled_child(args.compile_child, settings, device, args.repeats, args.targets)))
        return
    print(f"UnSplit, {args.targets} targets, {settings.iterations} x ({settings.input_steps} + {settings.clone_steps}) "
          f"steps per target; median of {args.repeats} repeats\nhardware: {hardware(device)}", flush=True)
    if args.compile or args.compile_only:
        from compile_children import cold_and_warm, print_compiled
        child = [f"--rounds={args.rounds}", f"--targets={args.targets}", f"--repeats={args.repeats}",
                 f"--device={args.device}", f"--threads={torch.get_num_threads()}"] + (["--quick"] if args.quick else [])
        names = [f"{arch} {clone}" for arch in args.archs.split(",") for clone in ("per-target", "shared")]
        print_compiled(cold_and_warm(os.path.abspath(__file__), names, child))
        if args.compile_only:
            print(f"hardware after: {hardware(device)}")
            return
    rows = [measure(arch, settings, device, args.repeats, args.targets) for arch in args.archs.split(",")]
    print(f"\n{'arch':5} {'variant':34} {'s/target':>9} {'ms/step':>8} {'vs plain':>9}")
    for r in rows:
        for name, seconds in r["seconds_per_target"].items():
            print(f"{r['arch']:5} {name:34} {seconds:9.3f} {1e3 * seconds / r['steps_per_target']:8.3f} "
                  f"{r['speedup'][name]:8.2f}x")
        print(f"{r['arch']:5} {'per-target batched / sequential':34} {'':9} {'':8} {r['batched_speedup']:8.2f}x")
    print(f"hardware after: {hardware(device)}")
    if args.memory:
        bandwidth = copy_bandwidth(device)
        print(f"\nmemory: copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + write of a 128 MiB tensor); a target's "
              f"step pair moves about {FLOATS_PER_PAIR} floats per clone parameter")
        for r in rows:
            floor = memory_floor(r["arch"], device, bandwidth)
            best = min(v for k, v in r["seconds_per_target"].items() if k != "plain loop")
            pair_ms = 2e3 * best / r["steps_per_target"]
            print(f"{r['arch']:5} {floor['params']:>9,} parameters, {floor['bytes_per_pair'] / 1e6:6.2f} MB per pair: "
                  f"traffic time {floor['floor_ms_per_pair']:.3f} ms per pair; best engine row {pair_ms:.3f} ms "
                  f"({pair_ms / floor['floor_ms_per_pair']:.1f}x the traffic time)")
    if args.breakdown:
        print("\none clone step over 10 targets, median ms: stacked (engine) / looped")
        for arch in args.archs.split(","):
            b = breakdown(arch, device)
            print(f"{arch:6} clone fit forward-backward {b['fit stacked']:7.2f} / {b['fit looped']:7.2f}   "
                  f"fused Adam step {b['adam stacked']:7.2f} / {b['adam looped']:7.2f}")


if __name__ == "__main__":
    main()

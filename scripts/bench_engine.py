"""Engine overhead and batched trials, measured side by side in one run.

For each workload (one mnist5k image, or a batch of 8 for the FedLeak parts) four ways of running it
alternate in every repeat:

- plain:      the original algorithm as a plain PyTorch loop, written out below (one trial);
- 1 trial:    the engine with one trial (what a one-restart attack or an UnSplit shared-mode target runs);
- batched:    the engine with R trials together (`mode="batched"`);
- sequential: the engine with the same R trials one after another (`mode="sequential"`).

Workloads: DLG on the sigmoid LeNet (L-BFGS, 20 inner iterations per step, labels optimised jointly),
Inverting Gradients on the ConvNet (cosine + TV, signed Adam, box, step decay), the FedLeak parts
on the ConvNet at batch 8: L1 + cosine on a top-R% mask of the dummy gradient, then + activation L1
(read off the simulator's forward pass), then + the two-point gradient blend; and the FedLeak attack
itself (`fedleak.quick`, labels known) against its plain loop. The table shows median milliseconds per
trial-step (an L-BFGS step counts as one) and two ratios: engine with one trial / plain loop (lower is
better) and sequential / batched (the batched speed-up), plus the mode `mode="auto"` picks. The load average is printed before and after.

    python scripts/bench_engine.py --repeats 5
    python scripts/bench_engine.py --quick          # a check that everything runs, in seconds

`--compile` adds the attacks compiled (`compile="on"`, `attacks.engine.compiled`) beside eager: each
workload runs in a child process twice, first with an empty inductor cache (a fresh
`TORCHINDUCTOR_CACHE_DIR`: cold) and then with the cache the first child filled (warm). Each child times
the eager attack (median of the repeats) and one compiled run, whose compile seconds are taken out of its
steps; it prints both per step, their ratio, the compile time and the steps after which the compile has
paid for itself. `--compile-only` skips the eager table.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attacks.engine import (L1, Adam, Block, BoxClamp, Cosine, EngineOptions, FedSGDGradient, Objective, Prior, Schedule,
                            Sum, run, tv_l1)
from attacks.hfl.dlg import DLG
from attacks.hfl.fedleak import FedLeak
from attacks.hfl.invgrad import InvertingGradients
from attacks.hfl.observations import observe_fedsgd
from attacks.hfl.fedleak.parts import GradientBlend, TopMagnitude, activation_l1
from attacks.registry import preset as registry_preset
from attacks.hfl.variables import initial_variables
from vfl import data as datasets
from vfl.models.hfl import build_hfl_model
from vfl.runtime import hardware, resolve_device, timed

from compile_children import cold_and_warm, print_compiled

FEDLEAK = {"fraction": 0.5, "alpha": 1e-5, "beta": 1e-4, "blend": 0.7, "k": 0.01, "lr": 0.1}
"""FedLeak's settings (R = 50%, alpha TV, beta activation L1, lambda' = 0.7); k and lr are ours."""


# --- the original algorithms as plain loops (one trial) ---------------------------------------------

def preset(name):
    return registry_preset(name).settings()


def _own_copy(model: nn.Module) -> nn.Module:
    """The model as the original code holds it: a module whose parameters take gradients."""
    model = copy.deepcopy(model)
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def plain_dlg(model: nn.Module, x0: torch.Tensor, logits0: torch.Tensor, observed, steps: int) -> torch.Tensor:
    """mit-han-lab/dlg main.py: L-BFGS on dummy data and soft labels, summed squared gradient differences."""
    model = _own_copy(model)
    x, logits = x0.clone().requires_grad_(True), logits0.clone().requires_grad_(True)
    params = list(model.parameters())
    optimizer = torch.optim.LBFGS([x, logits])

    def closure():
        optimizer.zero_grad()
        logp = F.log_softmax(model(x), -1)
        loss = torch.mean(torch.sum(-F.softmax(logits, -1) * logp, 1))
        grads = torch.autograd.grad(loss, params, create_graph=True)
        diff = sum(((g - o) ** 2).sum() for g, o in zip(grads, observed))
        diff.backward()
        return diff

    for _ in range(steps):
        optimizer.step(closure)
    return x.detach()


def plain_invgrad(model: nn.Module, x0: torch.Tensor, y: torch.Tensor, observed, iterations: int,
                  tv: float = 1e-4, lr: float = 0.1) -> torch.Tensor:
    """inversefed GradientReconstructor (--optim ours): cosine over all layers + TV, signed Adam, box [0,1],
    learning rate x0.1 at 3/8, 5/8, 7/8 of the run."""
    model = _own_copy(model)
    x = x0.clone().requires_grad_(True)
    params = list(model.parameters())
    optimizer = torch.optim.Adam([x], lr=lr)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=[int(iterations * f) for f in (3 / 8, 5 / 8, 7 / 8)], gamma=0.1)
    for _ in range(iterations):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        dot = sum((g * o).sum() for g, o in zip(grads, observed))
        norm = sum(g.pow(2).sum() for g in grads).sqrt() * sum(o.pow(2).sum() for o in observed).sqrt()
        cost = 1 - dot / norm + tv * ((x[..., 1:, :] - x[..., :-1, :]).abs().mean()
                                      + (x[..., :, 1:] - x[..., :, :-1]).abs().mean())
        cost.backward()
        x.grad.sign_()
        optimizer.step()
        scheduler.step()
        with torch.no_grad():
            x.clamp_(0, 1)
    return x.detach()


def plain_fedleak(model: nn.Module, x0: torch.Tensor, y: torch.Tensor, observed, iterations: int, *,
                  activations: bool, blend: bool, whole: bool = False) -> torch.Tensor:
    """FedLeak (Alg. 1): L1 + cosine on the top-R% entries of the dummy gradient (per layer, or over the
    whole gradient with `whole`), TV, optionally the L1 of the ReLU outputs (read by forward hooks in the
    same forward pass) and the two-point gradient blend, whose probe reuses the entries chosen at x."""
    s = FEDLEAK
    model = _own_copy(model)
    x = x0.clone().requires_grad_(True)
    params = list(model.parameters())
    seen: list[torch.Tensor] = []
    for m in model.modules():                         # the copy is ours: its hooks die with it
        if activations and isinstance(m, nn.ReLU):
            m.register_forward_hook(lambda m, i, o: seen.append(o))
    optimizer = torch.optim.Adam([x], lr=s["lr"])

    def select(grads):
        if whole:
            flat = torch.cat([g.detach().abs().flatten() for g in grads])
            cut = torch.topk(flat, math.ceil(s["fraction"] * flat.numel())).values[-1]
            return [(g.detach().abs() >= cut).to(g.dtype) for g in grads]
        masks = []
        for g in grads:
            flat = g.detach().abs().flatten()
            k = max(1, int(round(s["fraction"] * flat.numel())))
            masks.append((g.detach().abs() >= torch.topk(flat, k).values[-1]).to(g.dtype))
        return masks

    def distance(x, masks=None):
        seen.clear()
        grads = torch.autograd.grad(F.cross_entropy(model(x), y), params, create_graph=True)
        masks = select(grads) if masks is None else masks
        gm = [g * m for g, m in zip(grads, masks)]
        om = [o * m for o, m in zip(observed, masks)]
        l1 = sum((a - b).abs().sum() for a, b in zip(gm, om))
        a, b = torch.cat([t.reshape(-1) for t in gm]), torch.cat([t.reshape(-1) for t in om])
        cosine = 1 - (a * b).sum() / (a.square().sum().sqrt() * b.square().sum().sqrt()).clamp_min(1e-30)
        tv = (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()
        total = l1 + cosine + s["alpha"] * tv
        if activations:
            total = total + s["beta"] * sum(t.abs().sum() for t in seen)
        return total, masks

    for _ in range(iterations):
        value, masks = distance(x)
        direction = torch.autograd.grad(value, x)[0]
        if blend:
            probe = (x + s["k"] * direction / direction.norm().clamp_min(1e-12)).detach().requires_grad_(True)
            at_probe = torch.autograd.grad(distance(probe, masks)[0], probe)[0]
            direction = (1 - s["blend"]) * direction + s["blend"] * at_probe
        x.grad = direction
        optimizer.step()
        with torch.no_grad():
            x.clamp_(0, 1)
    return x.detach()


# --- workloads ---------------------------------------------------------------------------------------

@dataclass
class Workload:
    name: str
    steps: int
    plain: Callable[[], object]
    engine: Callable[[int, str], str]
    """(trials, mode) -> the mode the engine ran."""


def fedleak_engine(network: nn.Module, observation, x0: torch.Tensor, y: torch.Tensor, iterations: int, *,
                   activations: bool, blend: bool, mode: str) -> str:
    s = FEDLEAK
    params = dict(observation.model.params)
    mask = TopMagnitude(s["fraction"])
    priors = (Prior("tv", "x", tv_l1, s["alpha"]),)
    if activations:        # the ReLU outputs of the simulator's own forward pass, as the plain loop reads them
        priors += (Prior("activations", "x", activation_l1, s["beta"], on_simulation=True),)
    simulator = FedSGDGradient(network, record=(nn.ReLU,) if activations else ())
    objective = Objective(simulator, Sum(((1.0, L1(subset=mask)), (1.0, Cosine(subset=mask)))), priors)
    hooks = ((GradientBlend(s["blend"], s["k"]),) if blend else ()) + (BoxClamp(),)
    target = {"observed": list(observation.gradient),
              "context": {"params": params, "buffers": dict(observation.model.buffers), "labels": y}}
    schedule = Schedule((Block(("x",), Adam(s["lr"]), iterations, hooks=hooks),))
    return run(objective, {"x": x0}, target, schedule, EngineOptions(mode=mode)).mode


def ran(attack, observation, mode: str) -> str:
    """Run `attack` in trials mode `mode`; the mode that ran."""
    engine = EngineOptions(mode=mode).recording()
    attack(observation, seed=0, engine=engine)
    return engine.report.mode


def workloads(device: torch.device, args) -> list[Workload]:
    images = datasets.load("mnist5k")
    x, y = images.images[:1].to(device), images.labels[:1].to(device)
    lenet = observe_fedsgd(build_hfl_model("lenet", seed=0).to(device), x, y, arch="lenet")
    convnet = observe_fedsgd(build_hfl_model("convnet", seed=0).to(device), x, y, arch="convnet")
    r = args.restarts
    dlg = replace(preset("dlg.original"), iterations=args.dlg_steps)
    ig = replace(preset("invgrad.paper"), iterations=args.ig_iterations, tv=1e-4)
    # the engine's one-trial start (label logits are drawn after all restarts' images)
    start_dlg = initial_variables(lenet, 1, 0, label_logits=True)
    start_ig = initial_variables(convnet, 1, 0, label_logits=False)
    rows = [
        Workload("DLG, LeNet, L-BFGS x20", args.dlg_steps,
                 lambda: plain_dlg(lenet.model.network, start_dlg["x"][0], start_dlg["label_logits"][0],
                                   lenet.gradient, args.dlg_steps),
                 lambda n, mode: ran(DLG(replace(dlg, restarts=n)), lenet, mode)),
        Workload("Inverting Gradients, ConvNet", args.ig_iterations,
                 lambda: plain_invgrad(convnet.model.network, start_ig["x"][0], y, convnet.gradient,
                                       args.ig_iterations),
                 lambda n, mode: ran(InvertingGradients(replace(ig, restarts=n)), convnet, mode)),
    ]
    xb, yb = images.images[:8].to(device), images.labels[:8].to(device)
    batch = observe_fedsgd(build_hfl_model("convnet", seed=0).to(device), xb, yb, arch="convnet")
    x0 = torch.rand(r, *xb.shape, generator=torch.Generator().manual_seed(0)).to(device)
    for label, activations, blend in (("L1 + cosine, top-R% mask", False, False),
                                      ("+ activation L1", True, False),
                                      ("+ gradient blend", True, True)):
        rows.append(Workload(
            f"FedLeak B=8 {label}", args.fedleak_iterations,
            lambda a=activations, b=blend: plain_fedleak(batch.model.network, x0[0], yb, batch.gradient,
                                                         args.fedleak_iterations, activations=a, blend=b),
            lambda n, mode, a=activations, b=blend: fedleak_engine(
                batch.model.network, batch, x0[:n], yb, args.fedleak_iterations, activations=a, blend=b, mode=mode)))
    # the attack itself (fedleak.quick: global top-50%, blend, activation L1, labels known)
    known = observe_fedsgd(build_hfl_model("convnet", seed=0).to(device), xb, yb, arch="convnet", reveal_labels=True)
    quick = replace(preset("fedleak.quick"), iterations=args.fedleak_iterations)
    rows.append(Workload(
        "FedLeak attack B=8 (fedleak.quick)", args.fedleak_iterations,
        lambda: plain_fedleak(known.model.network, x0[0], yb, known.gradient, args.fedleak_iterations,
                              activations=True, blend=True, whole=True),
        lambda n, mode: ran(FedLeak(replace(quick, restarts=n)), known, mode)))
    # Inverting Gradients on the same batch and iterations: FedLeak's cost per iteration relative to it
    ig8 = replace(ig, iterations=args.fedleak_iterations)
    start_ig8 = initial_variables(known, 1, 0, label_logits=False)
    rows.append(Workload(
        "Inverting Gradients B=8 (same batch)", args.fedleak_iterations,
        lambda: plain_invgrad(known.model.network, start_ig8["x"][0], yb, known.gradient, args.fedleak_iterations),
        lambda n, mode: ran(InvertingGradients(replace(ig8, restarts=n)), known, mode)))
    return rows


def measure(w: Workload, trials: int, repeats: int, device: torch.device) -> dict:
    variants = {"plain": w.plain, "one": lambda: w.engine(1, "batched"),
                "batched": lambda: w.engine(trials, "batched"), "sequential": lambda: w.engine(trials, "sequential")}
    for fn in variants.values():                          # warm-up (allocator, vmap tracing, caches)
        fn()
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for k, fn in variants.items():
            seconds[k].append(timed(fn, device))
    ms = {k: 1e3 * statistics.median(v) / (w.steps * (1 if k in ("plain", "one") else trials))
          for k, v in seconds.items()}
    return {"workload": w.name, "steps": w.steps, "trials": trials, "ms_per_trial_step": ms,
            "one_vs_plain": ms["one"] / ms["plain"], "batched_speedup": ms["sequential"] / ms["batched"],
            "auto": _auto(w, trials), "seconds": seconds}


OP_GROUPS = {
    "convolution": ("convolution",),
    "pooling": ("max_pool",),
    "top-R selection": ("kthvalue", "topk"),
}
"""Profiler op-name fragments of the parts whose time does not shrink by batching trials."""


def profile_fedleak(w: Workload, trials: int) -> dict[str, dict[str, float]]:
    """Self CPU seconds per trial-step by op group (the rest is "other": elementwise ops, copies, the
    autograd engine, Python), for the FedLeak attack batched and sequential: what bounds the speed-up."""
    from torch.profiler import ProfilerActivity, profile
    out = {}
    for mode in ("batched", "sequential"):
        w.engine(trials, mode)                                   # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            w.engine(trials, mode)
        groups = dict.fromkeys([*OP_GROUPS, "other"], 0.0)
        for event in prof.key_averages():
            name = next((g for g, parts in OP_GROUPS.items() if any(p in event.key for p in parts)), "other")
            groups[name] += event.self_cpu_time_total / 1e6 / (w.steps * trials)
        out[mode] = groups
    return out


def _auto(w: Workload, trials: int) -> str:
    try:
        return w.engine(trials, "auto")
    except ValueError:                                     # an engine without mode="auto"
        return "-"


# --- compiled against eager ---------------------------------------------------------------------------

def compiled_workloads(device: torch.device, args) -> dict[str, tuple[int, Callable[[str], object]]]:
    """name -> (steps, compile mode -> the attack's Reconstruction): the attacks the eager table times."""
    images = datasets.load("mnist5k")
    x, y = images.images[:1].to(device), images.labels[:1].to(device)
    lenet = observe_fedsgd(build_hfl_model("lenet", seed=0).to(device), x, y, arch="lenet")
    convnet = observe_fedsgd(build_hfl_model("convnet", seed=0).to(device), x, y, arch="convnet")
    xb, yb = images.images[:8].to(device), images.labels[:8].to(device)
    known = observe_fedsgd(build_hfl_model("convnet", seed=0).to(device), xb, yb, arch="convnet", reveal_labels=True)
    r = args.restarts
    dlg = replace(preset("dlg.original"), iterations=args.dlg_steps, restarts=1)
    ig = replace(preset("invgrad.paper"), iterations=args.ig_iterations, tv=1e-4, restarts=r)
    quick = replace(preset("fedleak.quick"), iterations=args.fedleak_iterations, restarts=1)
    return {
        "DLG, LeNet, L-BFGS x20, 1 restart": (args.dlg_steps, lambda c: driven(DLG(replace(dlg, compile=c)), lenet)),
        f"Inverting Gradients, ConvNet, {r} restarts": (
            args.ig_iterations, lambda c: driven(InvertingGradients(replace(ig, compile=c)), convnet)),
        "FedLeak attack B=8 (fedleak.quick), 1 restart": (
            args.fedleak_iterations, lambda c: driven(FedLeak(replace(quick, compile=c)), known)),
    }


def driven(attack, observation):
    """The attack as the driver runs it: engine options from its settings (their `compile`), the report attached."""
    engine = EngineOptions.of(attack.settings)
    return engine.report.attach(attack(observation, seed=0, engine=engine))


def compiled_child(steps: int, attack: Callable[[str], object], repeats: int, device: torch.device) -> dict:
    """Eager (warm-up, then the median of `repeats`) and one compiled run of an attack, in this process."""
    attack("off")
    eager = statistics.median(timed(lambda: attack("off"), device) for _ in range(repeats))
    result = attack("on")
    report = result.extras["compile"]
    return {"eager_ms": 1e3 * eager / steps, "compiled_ms": 1e3 * (result.seconds - report["compile_seconds"]) / steps,
            "compile_seconds": report["compile_seconds"], "compiles": report["compiles"],
            "recompiles": report["recompiles"], "graph_breaks": report["graph_breaks"],
            "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--restarts", type=int, default=4, help="trials of the batched and sequential rows")
    parser.add_argument("--dlg-steps", type=int, default=5, help="L-BFGS steps (x20 inner iterations)")
    parser.add_argument("--ig-iterations", type=int, default=200)
    parser.add_argument("--fedleak-iterations", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--only", default=None, help="run the workloads whose name contains this text")
    parser.add_argument("--quick", action="store_true", help="a few steps and one repeat: checks that it runs")
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON object")
    parser.add_argument("--profile", action="store_true", help="also profile the FedLeak attack row by op group "
                        "(convolutions, pooling, top-R selection, other), batched and sequential")
    parser.add_argument("--compile", action="store_true", help="also time the attacks compiled, cold and warm cache")
    parser.add_argument("--compile-only", action="store_true", help="only the compiled rows")
    parser.add_argument("--compile-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.dlg_steps, args.ig_iterations, args.fedleak_iterations, args.repeats = 1, 8, 2, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    if args.compile_child:
        steps, attack = compiled_workloads(device, args)[args.compile_child]
        print(json.dumps(compiled_child(steps, attack, args.repeats, device)))
        return
    print(f"hardware: {hardware(device)}; {args.restarts} trials; median of {args.repeats} repeats", flush=True)
    if args.compile or args.compile_only:
        child = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                 ("device", "restarts", "dlg_steps", "ig_iterations", "fedleak_iterations", "repeats")]
        child += [f"--threads={torch.get_num_threads()}"]
        names = [n for n in compiled_workloads(device, args) if not args.only or args.only in n]
        compiled_rows = cold_and_warm(os.path.abspath(__file__), names, child)
        print_compiled(compiled_rows)
        if args.compile_only:
            print(f"hardware after: {hardware(device)}")
            if args.json:
                print(json.dumps({"hardware": hardware(device), "compiled": compiled_rows}))
            return
    rows = []
    for w in workloads(device, args):
        if args.only and args.only not in w.name:
            continue
        rows.append(measure(w, args.restarts, args.repeats, device))
        print(f"  {w.name}: done", flush=True)
    width = max(len(r["workload"]) for r in rows)
    head = f"{'workload':<{width}}  {'steps':>5}  {'plain':>8}  {'1 trial':>8}  {'1/plain':>7}  " \
           f"{'batched':>8}  {'seq.':>8}  {'speed-up':>8}  auto"
    print(f"\nms per trial-step (batched and sequential: {args.restarts} trials)\n{head}")
    for r in rows:
        ms = r["ms_per_trial_step"]
        print(f"{r['workload']:<{width}}  {r['steps']:>5}  {ms['plain']:>8.2f}  {ms['one']:>8.2f}  "
              f"{r['one_vs_plain']:>6.2f}x  {ms['batched']:>8.2f}  {ms['sequential']:>8.2f}  "
              f"{r['batched_speedup']:>7.2f}x  {r['auto']}")
    named = {r["workload"].split(" (")[0]: r for r in rows}
    fedleak, ig8 = named.get("FedLeak attack B=8"), named.get("Inverting Gradients B=8")
    if fedleak:
        ms = fedleak["ms_per_trial_step"]
        print(f"\nFedLeak attack, {args.restarts} restarts at batch 8: batched is {fedleak['batched_speedup']:.2f}x "
              f"faster than sequential ({ms['batched']:.1f} vs {ms['sequential']:.1f} ms per trial-step)")
    if fedleak and ig8:
        print(f"FedLeak / Inverting Gradients per iteration, one restart at batch 8: "
              f"{fedleak['ms_per_trial_step']['one'] / ig8['ms_per_trial_step']['one']:.2f}x")
    if args.profile:
        attack = next(w for w in workloads(device, args) if w.name.startswith("FedLeak attack"))
        parts = profile_fedleak(attack, args.restarts)
        print(f"\nFedLeak attack, ms per trial-step by op group (profiler self time, {args.restarts} trials):")
        print(f"{'group':<16}  {'batched':>8}  {'seq.':>8}  {'seq./batched':>12}")
        for group in parts["batched"]:
            b, q = 1e3 * parts["batched"][group], 1e3 * parts["sequential"][group]
            print(f"{group:<16}  {b:>8.2f}  {q:>8.2f}  {q / b if b else float('nan'):>11.2f}x")
    print(f"hardware after: {hardware(device)}")
    if args.json:
        print(json.dumps({"hardware": hardware(device), "rows": rows}))


if __name__ == "__main__":
    main()

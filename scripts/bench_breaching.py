"""The lab's engine against breaching 0.1.2 on the same problems, side by side.

Both sides get the same model weights (the lab's sigmoid LeNet and ConvNet, seed 0), the same mnist5k image,
the same observed gradient and the same starting tensors (the lab's draws: breaching's random initialisation
is replaced by them), and run with the same torch thread count:

- DLG: the sigmoid LeNet, 1 restart, 100 L-BFGS steps (lr 1, 20 inner iterations), images and label logits
  optimised jointly, summed squared gradient differences (breaching's Euclidean objective halves its sum:
  it runs with scale 2 so both minimise the same function);
- Inverting Gradients: the ConvNet, 500 iterations of signed Adam (lr 0.1, x0.1 at 3/8, 5/8, 7/8), cosine
  + TV 1e-4, box [0, 1], labels given, with 8 restarts and with 1 (breaching runs restarts one after
  another; the lab batches them as its `mode="auto"` rule picks). breaching's TV (a padded convolution
  over three colour channels, set here to the digits' one) is its own form of the same anisotropic TV.

breaching runs in its own virtual environment (`--breaching-python`, default /work/breaching-venv/bin/python),
a child process of this script given the problem as a file; it imports only breaching, torch and the lab's
model builder there. The table shows seconds per run on each side (median of the repeats, alternating) and
breaching's time over the lab's. The lab's rows can also be compiled (`--compile on`, or `auto`, which
decides per call): its "whole s" is the whole attack call, compile included (breaching's time is compared
with it), "steps s" the same call less its compile seconds, and "first s" the whole first call, the only
one that compiles in this process (with a warm inductor cache: a fresh process's cost; later calls on a new
objective of the same shapes run the graph compiled then). Under the table, per row: the compiles and
compile seconds of each repeat and what `auto` decided and why (`extras.compile` of the run's metrics).

    python scripts/bench_breaching.py --repeats 3
    python scripts/bench_breaching.py --quick            # a few steps: checks both sides run
    python scripts/bench_breaching.py --dataset photos   # a 32x32 colour photo in place of the digit
    python scripts/bench_breaching.py --plain            # also Inverting Gradients' math as a plain torch loop

breaching 0.1.2 runs in its own environment beside the lab's, with the project's torch and torchvision made
visible to it through a .pth file, so both sides run the same torch build (breaching is not a dependency of
the lab). Without `--no-deps` pip would bring a second torch; the pins are those of the lab's environment:

    python3.11 -m venv /work/breaching-venv
    /work/breaching-venv/bin/pip install --no-deps breaching==0.1.2 hydra-core==1.3.8 omegaconf==2.3.0 \
        antlr4-python3-runtime==4.9.3 lpips==0.1.4 scipy==1.17.1 numpy==2.4.6 pyyaml packaging tqdm
    echo /work/main/.venv/lib/python3.11/site-packages \
        > /work/breaching-venv/lib/python3.11/site-packages/splitlab-torch.pth
"""
from __future__ import annotations

import argparse
import math
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PYTHON = "/work/breaching-venv/bin/python"
IG_TV = 1e-4


# --- the problems (the lab's side builds them; both sides read them) ---------------------------------

def problems(steps_dlg: int, steps_ig: int, restarts: int, dataset: str = "mnist5k") -> dict:
    from attacks.hfl.observations import observe_fedsgd
    from attacks.hfl.variables import initial_variables
    from vfl import data as datasets
    from vfl.models.hfl import build_hfl_model

    images = datasets.load(dataset)
    x, y = images.images[:1], images.labels[:1]
    shape, classes = tuple(datasets.dataset_spec(dataset).image_shape), datasets.dataset_spec(dataset).num_classes
    out = {}
    for name, arch, joint, steps, trials in (("DLG", "lenet", True, steps_dlg, 1),
                                             (f"IG {restarts} restarts", "convnet", False, steps_ig, restarts),
                                             ("IG 1 restart", "convnet", False, steps_ig, 1)):
        observation = observe_fedsgd(build_hfl_model(arch, shape, classes, seed=0), x, y, arch=arch)
        starts = initial_variables(observation, trials, 0, label_logits=joint)
        out[name] = {"dataset": dataset, "arch": arch, "joint": joint, "steps": steps, "trials": trials, "labels": y, "truth": x,
                     "params": dict(observation.model.params), "buffers": dict(observation.model.buffers),
                     "gradient": list(observation.gradient), "starts": starts,
                     "shape": tuple(observation.model.input_shape), "classes": observation.model.num_classes}
    return out


def lab_run(name: str, problem: dict, compile_mode: str):
    """The lab's attack on the problem: its Reconstruction and the CPU seconds of the attack call."""
    from attacks.engine import EngineOptions
    from attacks.hfl.dlg import DLG
    from attacks.hfl.invgrad import InvertingGradients
    from attacks.hfl.observations import observe_fedsgd
    from attacks.registry import preset
    from vfl import data as datasets
    from vfl.models.hfl import build_hfl_model

    images = datasets.load(problem["dataset"])
    observation = observe_fedsgd(build_hfl_model(problem["arch"], problem["shape"], problem["classes"], seed=0),
                                 images.images[:1], images.labels[:1], arch=problem["arch"])
    if problem["joint"]:
        settings = replace(preset("dlg.original").settings(), iterations=problem["steps"], restarts=1,
                           compile=compile_mode)
        attack, init = DLG(settings), problem["starts"]
    else:
        settings = replace(preset("invgrad.paper").settings(), iterations=problem["steps"],
                           restarts=problem["trials"], tv=IG_TV, compile=compile_mode)
        attack, init = InvertingGradients(settings), {"x": problem["starts"]["x"]}
    engine = EngineOptions.of(settings, mode="auto")        # as the driver builds them: compile from settings
    start = time.process_time()
    result = engine.report.attach(attack(observation, seed=0, engine=engine, init=init))
    return result, time.process_time() - start


def plain_ig(problem: dict) -> tuple[float, float, torch.Tensor]:
    """Inverting Gradients' math as a plain torch loop with nothing around it (no engine, no trace, no best
    iterate per step): cross-entropy, the parameter gradient with `create_graph`, 1 - cosine against the observed
    gradient + TV, its gradient in the image, signed Adam at lr 0.1 with the step decay, the box. Restarts run one
    after another, as breaching runs them. The objective as one writes it by hand in eager torch (the cosine summed
    layer by layer, `torch.optim.Adam` without its fused kernel): a reference to compare both sides' steps with,
    not a floor. Returns (seconds, the best restart's loss at its last step, its final image)."""
    import torch.nn.functional as F
    from attacks.engine.priors import tv_l1
    from vfl.models.hfl import build_hfl_model

    model = build_hfl_model(problem["arch"], problem["shape"], problem["classes"], seed=0).eval()
    model.load_state_dict({**problem["params"], **problem["buffers"]})
    params = list(model.parameters())
    observed = [g.detach() for g in problem["gradient"]]
    observed_norm = torch.sqrt(sum(g.pow(2).sum() for g in observed))
    steps, labels = problem["steps"], problem["labels"]
    milestones = [int(steps * f) for f in (3 / 8, 5 / 8, 7 / 8)]
    best = (math.inf, None)
    start = time.perf_counter()
    for start_image in problem["starts"]["x"]:
        x = start_image.clone().requires_grad_(True)
        optimizer = torch.optim.Adam([x], lr=0.1)
        decay = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, 0.1)
        for _ in range(steps):
            gradient = torch.autograd.grad(F.cross_entropy(model(x), labels), params, create_graph=True)
            dot = sum((g * o).sum() for g, o in zip(gradient, observed))
            norm = torch.sqrt(sum(g.pow(2).sum() for g in gradient))
            loss = 1 - dot / (norm * observed_norm) + IG_TV * tv_l1(x)
            (x.grad,) = torch.autograd.grad(loss, [x])
            x.grad.sign_()
            optimizer.step()
            decay.step()
            with torch.no_grad():
                x.clamp_(0, 1)
        if float(loss.detach()) < best[0]:
            best = (float(loss.detach()), x.detach().clone())
    return time.perf_counter() - start, best[0], best[1]


def psnr_of(image: torch.Tensor, truth: torch.Tensor) -> float:
    from attacks.metrics import psnr
    return float(psnr(image.detach().float().reshape(truth.shape), truth.float())[0])


# --- breaching's side (runs in breaching's environment) -----------------------------------------------

def breaching_child(path: str, name: str) -> dict:
    import breaching
    from omegaconf import OmegaConf
    from vfl.models.hfl import build_hfl_model

    problem = torch.load(path, weights_only=False)[name]
    model = build_hfl_model(problem["arch"], problem["shape"], problem["classes"], seed=0)
    model.load_state_dict({**problem["params"], **problem["buffers"]})
    steps, trials = problem["steps"], problem["trials"]
    if problem["joint"]:
        cfg = breaching.get_attack_config("deepleakage", overrides=[
            f"optim.max_iterations={steps}", "objective.scale=2.0", "restarts.num_trials=1", f"optim.callback={steps}"])
    else:
        cfg = breaching.get_attack_config("invertinggradients", overrides=[
            f"optim.max_iterations={steps}", f"restarts.num_trials={trials}", f"optim.callback={steps}",
            f"regularization.total_variation.scale={IG_TV}"])
    setup = {"device": torch.device("cpu"), "dtype": torch.float}
    attacker = breaching.attacks.prepare_attack(model, torch.nn.CrossEntropyLoss(), cfg, setup)
    channels = problem["shape"][0]
    for regularizer in attacker.regularizers:     # its TV filters three colour channels; the digits have one
        if hasattr(regularizer, "groups") and not regularizer.double_opponents and channels != regularizer.groups:
            regularizer.weight = regularizer.weight[:2 * channels]
            regularizer.groups = channels
    starts = problem["starts"]
    images = iter(starts["x"])                # trial r starts from the lab's restart r

    def initialise(shape):                    # the lab's starting tensors instead of breaching's draws
        if problem["joint"] and tuple(shape) == tuple(starts["label_logits"][0].shape):
            value = starts["label_logits"][0]  # the label template and each trial's logits
        else:
            value = next(images)
        assert tuple(value.shape) == tuple(shape), (tuple(value.shape), tuple(shape))
        return value.to(torch.float).clone().requires_grad_(True)

    attacker._initialize_data = initialise
    metadata = OmegaConf.create({"shape": list(problem["shape"]), "modality": "vision", "task": "classification",
                                 "classes": problem["classes"], "mean": [0.0] * problem["shape"][0],
                                 "std": [1.0] * problem["shape"][0]})
    payload = [{"parameters": [p.detach() for p in problem["params"].values()],
                "buffers": [b for b in problem["buffers"].values()] or None, "metadata": metadata}]
    shared = [{"gradients": [g.detach() for g in problem["gradient"]], "buffers": None,
               "metadata": {"num_data_points": 1, "labels": None if problem["joint"] else problem["labels"],
                            "local_hyperparams": None}}]
    start, cpu = time.perf_counter(), time.process_time()
    reconstructed, stats = attacker.reconstruct(payload, shared, {}, dryrun=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    final = [v[-1] for k, v in stats.items() if k.endswith("_Val") and v]
    torch.save(reconstructed["data"].detach().cpu(), f"{path}.{name}.rec.pt")
    return {"seconds": seconds, "cpu_seconds": cpu, "final_loss": min(final) if final else None,
            "threads": torch.get_num_threads(), "reconstruction": f"{path}.{name}.rec.pt"}


def run_breaching(python: str, path: str, name: str, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([python, __file__, "--breaching-child", path, "--name", name, "--threads", str(threads)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"breaching failed on {name}: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def breaching_available(python: str) -> str | None:
    """None when `python` imports breaching 0.1.2, else why not (one line)."""
    if not Path(python).exists():
        return f"no breaching environment at {python} (this script's docstring says how to make one)"
    done = subprocess.run([python, "-c", "import breaching, importlib.metadata as m; print(m.version('breaching'))"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        return f"breaching does not import in {python}: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    if done.stdout.strip().splitlines()[-1] != "0.1.2":
        return f"{python} has breaching {done.stdout.strip()}, not 0.1.2"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--breaching-python", default=DEFAULT_PYTHON)
    parser.add_argument("--dlg-steps", type=int, default=100)
    parser.add_argument("--ig-iterations", type=int, default=500)
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--dataset", default="mnist5k", help="where the one image comes from (photos: a 32x32 "
                        "colour photo; default mnist5k, the figures in docs/benchmarks.md)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads on both sides (default: torch's)")
    parser.add_argument("--compile", default="off", choices=("off", "on", "auto"), help="the lab's compile option")
    parser.add_argument("--quick", action="store_true", help="2 DLG steps, 8 IG iterations, one repeat")
    parser.add_argument("--only", default=None, help="comma-separated problems to run (DLG, IG 8 restarts, IG 1 restart: "
                        "a prefix is enough, e.g. --only DLG)")
    parser.add_argument("--plain", action="store_true", help="also time Inverting Gradients' math as a plain torch "
                        "loop (no engine; restarts one after another) in this process, beside both sides")
    parser.add_argument("--breaching-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--name", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.breaching_child:
        print(json.dumps(breaching_child(args.breaching_child, args.name)))
        return
    if args.quick:
        args.dlg_steps, args.ig_iterations, args.repeats = 2, 8, 1
    missing = breaching_available(args.breaching_python)
    if missing:
        print(f"breaching 0.1.2 is not available, so nothing is compared: {missing}")
        return
    from vfl.runtime import hardware
    threads = torch.get_num_threads()
    print(f"hardware: {hardware(torch.device('cpu'))}; {args.dataset}'s first image; both sides at {threads} torch threads; "
          f"median of {args.repeats} repeats, alternating", flush=True)
    cases = problems(args.dlg_steps, args.ig_iterations, args.restarts, args.dataset)
    if args.only:
        wanted = [w.strip().lower() for w in args.only.split(",")]
        cases = {k: v for k, v in cases.items() if any(k.lower().startswith(w) for w in wanted)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="splitlab-breaching-") as folder:
        path = os.path.join(folder, "problems.pt")
        torch.save(cases, path)
        for name, problem in cases.items():
            lab, whole, reports, theirs, lab_cpu, their_cpu, plain = [], [], [], [], [], [], []
            for _ in range(args.repeats):
                if args.plain and not problem["joint"]:
                    seconds, plain_loss, plain_image = plain_ig(problem)
                    plain.append(seconds)
                    plain_psnr = psnr_of(plain_image, problem["truth"])
                # the engine's own clock (its steps, compile seconds taken out); breaching's reconstruct() call;
                # and each side's process CPU seconds over the same call (steadier on a shared machine)
                result, cpu = lab_run(name, problem, args.compile)
                report = result.extras.get("compile", {})
                compile_seconds = report.get("compile_seconds", 0.0)
                whole.append(result.seconds)
                lab.append(result.seconds - compile_seconds)
                reports.append(report)
                lab_cpu.append(cpu if not compile_seconds else math.nan)   # a compile's CPU is partly in its workers
                best = int(result.loss.argmin())
                lab_loss, lab_psnr = float(result.loss[best]), psnr_of(result.trials[best], problem["truth"])
                other = run_breaching(args.breaching_python, path, name, threads)
                theirs.append(other["seconds"])
                their_cpu.append(other["cpu_seconds"])
                their_loss = other["final_loss"]
                their_psnr = psnr_of(torch.load(other["reconstruction"]), problem["truth"])
            if plain:
                print(f"  {name}: plain torch loop {statistics.median(plain):.2f} s (median of {len(plain)}; "
                      f"{[round(p, 2) for p in plain]}), {1e3 * statistics.median(plain) / (problem['steps'] * problem['trials']):.2f} "
                      f"ms per restart-step; PSNR {plain_psnr:.2f} dB, loss at the last step {plain_loss:.3g}", flush=True)
            rows.append((name, problem["steps"], statistics.median(whole), statistics.median(lab), whole[0],
                         statistics.median(theirs), statistics.median(lab_cpu), statistics.median(their_cpu),
                         lab_loss, their_loss, lab_psnr, their_psnr, reports))
            print(f"  {name}: done", flush=True)
    print(f"\n{'problem':<16} {'steps':>6} {'lab: whole s':>12} {'steps s':>8} {'first s':>8} {'breaching s':>12} "
          f"{'breaching / lab whole':>22} {'CPU s: lab':>11} {'breaching':>10} {'ratio':>7}  PSNR dB: lab / breaching  "
          f"loss: lab best / breaching last recorded")
    for (name, steps, whole, lab, first, theirs, lab_cpu, their_cpu, lab_loss, their_loss, lab_psnr, their_psnr,
         _) in rows:
        ratio = "-" if math.isnan(lab_cpu) else f"{their_cpu / lab_cpu:.2f}x"
        print(f"{name:<16} {steps:>6} {whole:>12.2f} {lab:>8.2f} {first:>8.2f} {theirs:>12.2f} "
              f"{theirs / whole:>21.2f}x {lab_cpu:>11.2f} {their_cpu:>10.2f} {ratio:>7}  {lab_psnr:>7.2f} / {their_psnr:<9.2f}  "
              f"{lab_loss:.3g} / {their_loss if their_loss is None else f'{their_loss:.3g}'}")
    print(f"lab compile: {args.compile}; hardware after: {hardware(torch.device('cpu'))}")
    for name, *_, reports in rows:
        if any(reports):
            print(f"  {name}: compiles per repeat {[r.get('compiles', 0) for r in reports]}, compile s "
                  f"{[r.get('compile_seconds', 0.0) for r in reports]}; "
                  + "; ".join(f"repeat {i + 1}: {r.get('reason')}" for i, r in enumerate(reports)))


if __name__ == "__main__":
    main()

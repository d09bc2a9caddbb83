"""What `device_check.py` runs, and how long each part is expected to take: the jobs of its two profiles (the GPU
check and its CPU smoke at toy sizes) with their estimates and the basis of each.

Importing this module imports neither torch nor the lab's attacks, so `device_check.py --plan` prints in a fraction
of a second.

The estimates (seconds on one H100; nothing in the lab has been timed on a GPU yet, so they are a model):

- STARTUP_S: a fresh Python process importing torch and the lab, creating its CUDA context and loading mnist5k;
  RUN_OVERHEAD_S: an attack run's own set-up, metrics and figures (4-11 s of the CPU reference's wall time beyond
  the attack's seconds, on the loaded 2-core CPU; a third of the least on a fast core).
- Engine steps at the lab's sizes (LeNet, ConvNet, the split CNN and MLP clients, batch <= 16) are bound by the
  host launching kernels, not by the GPU's arithmetic: a forward, backward and double-backward pass of a 4-6 layer
  network launches about 200-300 kernels, and eager PyTorch spends about 10 us of host time on each, so
  SMALL_STEP_MS per Adam step, LBFGS_ITER_MS per L-BFGS iteration (the two-loop recursion and its one host read
  on top), UNSPLIT_STEP_MS per UnSplit step (all ten targets in one batched step), TRAIN_STEP_MS per training batch
  (a label attack's steps are its victim's training rounds),
  and FSHA_STEP_MS per FSHA round (four networks' forward and backward passes and a gradient penalty's double
  backward).
- ResNet10 at batch 16 on 28 x 28 digits adds arithmetic: about 0.2 GMAC per image forward, so a FedLeak step (two
  double-backward evaluations, about 12 forward passes) is about 76 GFLOP, 4 ms at an assumed 20 TFLOP/s reached by
  TF32 convolutions at this small batch, plus about 600 kernel launches (6 ms): FEDLEAK_RESNET_STEP_MS;
  Inverting Gradients makes one such evaluation per step: IG_RESNET_STEP_MS.
- A compiled run adds the lab's own expected cold compile time per program (COLD_COMPILE_SECONDS in
  attacks/engine/compilation.py, within the 16-61 s measured on the CPU).
- Jobs in the pool share the GPU and 16 cores with up to POOL_JOBS - 1 others (each compiling with
  COMPILE_THREADS of inductor's workers): their estimates are multiplied by POOL_SLOWDOWN, and the pool's time is
  the schedule of those estimates, longest first, on POOL_JOBS slots.
- The quick presets' step counts are those the CPU reference (device_reference_cpu.json) recorded.

While it runs, the check scales every estimate by how long the jobs it has finished took against their own
estimates (the median ratio, kept within 0.5-4x), and starts a job only when its scaled estimate fits.
"""
from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from pathlib import Path

from attack_commands import COMMANDS, LABELS, PRESETS, SPLIT_ONLY, VFL, with_options

SCRIPTS = Path(__file__).resolve().parent
REFERENCE = SCRIPTS / "device_reference_cpu.json"
"""The CPU's numbers for the same commands (`device_check.py --cpu-reference` writes it)."""

PLAN_LIMIT_S = 480.0
"""The plan must fit 8 minutes by its own estimate (one device command may run 10)."""
DEADLINE_S = 540.0
"""The check's hard stop: running jobs are stopped so that packing ends before 9 minutes."""
PACK_RESERVE_S = 25.0
"""Kept for finishing the sweeps, writing the report and packing the files."""

STARTUP_S = 12.0
RUN_OVERHEAD_S = 1.5
SMALL_STEP_MS = 3.0
LBFGS_ITER_MS = 4.0
UNSPLIT_STEP_MS = 2.0
TRAIN_STEP_MS = 1.5
FSHA_STEP_MS = 10.0
FEDLEAK_RESNET_STEP_MS = 10.0
IG_RESNET_STEP_MS = 5.0
COLD_COMPILE_SECONDS = 60.0
POOL_JOBS = 10
COMPILE_THREADS = 2
POOL_SLOWDOWN = 1.5

ENGINE = tuple(COMMANDS)
"""The attacks `--compile` applies to."""
ATTACKS = ENGINE + tuple(SPLIT_ONLY)
TIMED_ALONE = tuple(a for a in ATTACKS if a not in VFL)
"""The attacks run one after another with nothing beside them; the VFL attacks on tabular data (small dense steps,
nothing the GPU's timing would say much of) run as one job in the pool, so they never lengthen the check."""
LBFGS = {"dlg", "idlg", "tgias-ro"}
PROGRAMS = {"unsplit": 2}
"""Compiled programs per run (one per step kind; UnSplit has an input step and a clone step)."""


@dataclass(frozen=True)
class Job:
    stage: str                      # "attacks", "pool", "benchmarks"
    name: str                       # unique and file-safe
    argv: tuple[str, ...]           # run with the Python interpreter
    estimate: float                 # seconds, from `basis`
    basis: str
    alone: bool = False             # nothing else runs beside it (its timings are the point)
    group: str | None = None        # the sweep subset a cell job belongs to


@dataclass(frozen=True)
class Group:
    """A subset of a shipped grid, run cell by cell in the pool and shipped as `name` when every cell is ok."""
    name: str
    grid: str                       # a shipped sweep (`--paper`), or a sweep file
    paper_size: bool
    where: dict[str, tuple[str, ...]]
    why: str

    def source(self) -> list[str]:
        return ["--paper", self.grid] if not self.grid.endswith(".toml") else [self.grid]

    def sweep_args(self) -> list[str]:
        return [*self.source(), *(["--paper-size"] if self.paper_size else []),
                *[f"--where={k}={','.join(v)}" for k, v in self.where.items()]]


@dataclass(frozen=True)
class Profile:
    name: str                       # "device" or "smoke"
    device: str
    sizes: dict[str, dict] = field(default_factory=dict)        # attack -> options replacing the quick preset's
    spec_smoke: bool = False        # an attack without `sizes` takes its spec's smoke options (its own smallest run)
    compile_attacks: tuple[str, ...] = ENGINE
    bench_engine: tuple[str, ...] = ("--repeats", "3")
    bench_unsplit: tuple[str, ...] = ("--rounds", "5", "--repeats", "2")
    pool_jobs: int = POOL_JOBS
    compile_threads: int = COMPILE_THREADS   # inductor's compile workers per process (1: no worker processes)
    plan_limit: float = PLAN_LIMIT_S
    deadline: float = DEADLINE_S


DEVICE = Profile("device", "cuda")
SMOKE = Profile(
    "smoke", "cpu",
    sizes={"dlg": {"iterations": 1}, "idlg": {"iterations": 1}, "invgrad": {"iterations": 2},
           "gi": {"iterations": 2}, "fedleak": {"iterations": 2, "batch_size": 2},
           "awa": {"iterations": 2, "batch_size": 2}, "agic": {"iterations": 2, "batch_size": 2},
           "tgias-ro": {"iterations": 1, "batch_size": 2},
           "unsplit": {"iterations": 1, "epochs": 1, "arch": "small-mlp"},
           "fsha": {"iterations": 4, "width": 0.0625, "batch_size": 8, "eval_images": 10}},
    spec_smoke=True,
    compile_attacks=("unsplit",),
    bench_engine=("--quick", "--only", "DLG"),
    bench_unsplit=("--quick", "--archs", "mlp", "--targets", "2"),
    pool_jobs=2, compile_threads=1, plan_limit=900.0, deadline=1200.0)
"""The same check end to end on the CPU at toy sizes: one attack compiled, on the small MLP (a C++ build per
program costs the CPU tens of seconds; inductor builds in the compiling process itself, as the pool keeps both
cores busy), the label and VFL attacks at their specs' smoke sizes (their paper presets train a victim for epochs),
the benchmarks' quick forms, and toy sweeps written beside the run (smoke_grids)."""


def reference() -> dict:
    """The CPU reference (empty when it was never written)."""
    return json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {"attacks": {}}


def attack_argv(name: str, profile: Profile) -> list[str]:
    """`splitlab` arguments of attack `name`'s quick preset (or PRESETS') on the profile's device (without --out)."""
    argv = COMMANDS.get(name) or SPLIT_ONLY[name]
    sizes = profile.sizes.get(name)
    if sizes is None and profile.spec_smoke:
        from attacks import registry           # here, not at the top: the GPU check's plan imports nothing of the lab

        sizes = registry.spec(name).smoke
    return with_options(argv, preset=PRESETS.get(name, f"{name}.quick"), device=profile.device, **(sizes or {}))


def _step_ms(name: str) -> float:
    if name in LABELS:                          # a label attack's steps are the victim's training rounds
        return TRAIN_STEP_MS
    return {"unsplit": UNSPLIT_STEP_MS, "fsha": FSHA_STEP_MS}.get(name, LBFGS_ITER_MS if name in LBFGS else
                                                                  SMALL_STEP_MS)


def attack_estimate(name: str, profile: Profile, steps: dict[str, int]) -> float:
    """Seconds of one quick run on the device, process start-up excluded (the runner starts once for all); an
    L-BFGS step is up to 20 iterations."""
    if profile.name == "smoke":
        return 15.0
    return RUN_OVERHEAD_S + steps.get(name, 1000) * _step_ms(name) / 1e3 * (20 if name in LBFGS else 1)


def grids(profile: Profile, mnist: bool, folder: Path) -> list[Group]:
    """The paper-size subset: FedLeak against Inverting Gradients (ResNet10, batch 16, 10,000 iterations, seeds
    0-2), TGIAs-RO's Algorithm 1 at its budget (300 rounds of 20 L-BFGS iterations per copy, a fresh state every
    round, T = 10 and 1, ReLU LeNet, seeds 0-2), and JAST's Table 1 at the paper's 10 epochs (on full MNIST where
    the data root has it, else on mnist5k, the CPU grid's data)."""
    if profile.name == "smoke":
        return smoke_grids(folder)
    jast = (Group("jast-table1-paper", "jast-table1", True, {"dataset": ("mnist",)},
                  "JAST Table 1 on full MNIST at the paper's 10 epochs, seeds 0-4") if mnist else
            Group("jast-table1-gpu", "jast-table1", False, {},
                  "JAST Table 1 at the paper's 10 epochs on mnist5k (the CPU grid; full MNIST is not in the data "
                  "root), seeds 0-4: the GPU's numbers beside the CPU's shipped ones"))
    return [Group("fedleak-baselines-paper", "fedleak-baselines", True,
                  {"attack": ("fedleak", "invgrad"), "seed": ("0", "1", "2")},
                  "FedLeak vs Inverting Gradients, ResNet10, batch 16, 10,000 iterations, seeds 0-2"),
            Group("tgias-algorithm1-paper", "tgias-algorithm1", True,
                  {"seed": ("0", "1", "2")},
                  "TGIAs-RO Algorithm 1 as the paper states it (median, a fresh L-BFGS state every round) at "
                  "R_g = 300 rounds of 20 L-BFGS iterations against DLG on one gradient (T = 1, its state "
                  "carried), seeds 0-2"),
            jast]


SMOKE_GRIDS = {
    "smoke-fedleak": ('command = "hfl"\ndescription = "smoke: FedLeak vs Inverting Gradients"\n'
                      '[fixed]\nimages = "seed"\narch = "convnet"\nbatch-size = 2\n'
                      '[zip]\nattack = ["fedleak", "invgrad"]\npreset = ["fedleak.quick", "invgrad.quick"]\n'
                      'iterations = [2, 2]\nlabels = ["known", "known"]\n'
                      '[axes]\nseed = [0]\n[paper.fixed]\nbatch-size = 2\n[paper.zip]\n'
                      'attack = ["fedleak", "invgrad"]\npreset = ["fedleak.paper", "invgrad.paper"]\n'
                      'iterations = [2, 2]\nlabels = ["known", "known"]\n'),
    "smoke-tgias": ('command = "hfl"\ndescription = "smoke: TGIAs-RO Algorithm 1"\n'
                    '[fixed]\nimages = "seed"\nattack = "tgias-ro"\nobserve = "rounds"\npreset = "tgias-ro.quick"\n'
                    'labels = "known"\nbatch-size = 2\naggregator = "median"\n'
                    '[axes]\ntemporal = [2]\niterations = [1]\nseed = [0]\n'
                    '[paper.fixed]\npreset = "tgias-ro.paper"\n'),
    "smoke-jast": ('command = "attack unsplit"\ndescription = "smoke: JAST Table 1"\n'
                   '[fixed]\npreset = "quick"\nclone = "per-target"\ncut-layer = 1\nepochs = 1\niterations = 1\n'
                   '[axes]\narch = ["cnn"]\nseed = [0]\n'),
}
"""Toy grids shaped like the device's: two with paper tables (run with --paper-size), one without."""


def smoke_grids(folder: Path) -> list[Group]:
    folder.mkdir(parents=True, exist_ok=True)
    groups = []
    for name, text in SMOKE_GRIDS.items():
        path = folder / f"{name}.toml"
        path.write_text(text)
        paper = "[paper." in text
        groups.append(Group(f"{name}-{'paper' if paper else 'gpu'}", str(path), paper, {}, "toy grid"))
    return groups


def cell_estimate(group: Group, swept: dict[str, str], profile: Profile) -> float:
    """Seconds of one cell on the device, in its own `splitlab sweep` process."""
    if profile.name == "smoke":
        return 25.0
    if group.grid == "fedleak-baselines":
        per_step = FEDLEAK_RESNET_STEP_MS if swept.get("attack") == "fedleak" else IG_RESNET_STEP_MS
        return STARTUP_S + 10_000 * per_step / 1e3
    if group.grid == "tgias-algorithm1":
        rounds = int(swept.get("iterations", 300))
        return STARTUP_S + rounds * 20 * LBFGS_ITER_MS / 1e3 * (1.5 if swept.get("temporal") == "10" else 1.0)
    training = (60_000 if group.paper_size else 4_000) / 64 * 10       # batches of 64, 10 epochs
    return STARTUP_S + training * TRAIN_STEP_MS / 1e3 + 200 * 40 * UNSPLIT_STEP_MS / 1e3


def pool_makespan(estimates: list[float], slots: int) -> float:
    """The pool's time: jobs longest first, each on the slot that frees first."""
    free = [0.0] * max(1, slots)
    for estimate in sorted(estimates, reverse=True):
        heapq.heapreplace(free, free[0] + estimate)
    return max(free)


BENCH_ENGINE_STEPS = 14_000
"""Engine steps `bench_engine.py` makes at its default sizes over 3 repeats (7 workloads, each as a plain loop, one
trial, 4 trials batched and 4 sequential: 200 Inverting Gradients steps, 30 FedLeak steps, 5 x 20 DLG iterations)."""
BENCH_UNSPLIT_STEPS = 2 * 2 * 5 * 40 * 32
"""UnSplit steps `bench_unsplit.py --rounds 5 --repeats 2` makes: 2 clients x 2 repeats x 5 rounds of 20 + 20
steps, for 10 targets looped in three variants and batched in two (about 32 single-target steps per round step)."""


def mnist_in(root: Path | None) -> bool:
    """Whether the data root holds full MNIST's idx files (the loader checks them again when it runs)."""
    raw = (root or Path()) / "MNIST" / "raw"
    return root is not None and all((raw / f).is_file() for f in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte"))


def group_cells(group: Group) -> list[dict[str, str]]:
    """The swept values of each cell the group runs, as `--where` texts."""
    from splitlab.sweep_file import arg_text, load_sweep, parse_where

    file = Path(group.grid) if group.grid.endswith(".toml") else None
    sweep = load_sweep(file, None if file else group.grid, group.paper_size)
    chosen = parse_where(sweep, [f"{k}={','.join(v)}" for k, v in group.where.items()])
    return [{k: arg_text(v) for k, v in cell.swept} for cell in sweep.cells() if cell.has(chosen)]


def build(profile: Profile, work: Path, data_root: Path | None = None) -> tuple[list[Job], list[Group]]:
    """Every job of the check, in the order the stages run them, and the sweep subsets the pool's cells belong to."""
    ref = reference()["attacks"]
    steps = {name: int(r["steps"]) for name, r in ref.items() if isinstance(r.get("steps"), (int, float))}
    check = str(SCRIPTS / "device_check.py")
    eager = STARTUP_S + sum(attack_estimate(a, profile, steps) for a in TIMED_ALONE)
    jobs = [Job("attacks", "attacks-eager", (check, "--run-attacks", str(work / "eager"), "--profile", profile.name,
                                             "--only", *TIMED_ALONE),
                eager, "one process, the quick presets one after another: their CPU step counts at the "
                "launch-bound step times", alone=True),
            Job("pool", "vfl-eager", (check, "--run-attacks", str(work / "eager"), "--profile", profile.name,
                                      "--only", *VFL),
                (STARTUP_S + sum(attack_estimate(a, profile, steps) for a in VFL)) * POOL_SLOWDOWN,
                "one process, the VFL attacks' presets one after another, beside the compiled runs")]
    for name in profile.compile_attacks:
        seconds = (STARTUP_S + attack_estimate(name, profile, steps) + COLD_COMPILE_SECONDS * PROGRAMS.get(name, 1))
        argv = ("-m", "splitlab", *attack_argv(name, profile), "--compile", "on", "--json",
                "--out", str(work / "compiled" / name))
        jobs.append(Job("pool", f"compiled-{name}", argv, seconds * POOL_SLOWDOWN,
                        "start-up, the eager estimate and the lab's cold compile time per program, shared"))
    groups = grids(profile, mnist_in(data_root), work / "grids")
    for group in groups:
        for i, cell in enumerate(group_cells(group)):
            where = [f"--where={k}={v}" for k, v in cell.items()]
            argv = ("-m", "splitlab", "sweep", *group.source(), *(["--paper-size"] if group.paper_size else []),
                    *where, "--executor", "local", "--no-progress", "--out", str(work / "parts" / f"{group.name}-{i}"))
            jobs.append(Job("pool", f"{group.name}-{i}", argv, cell_estimate(group, cell, profile) * POOL_SLOWDOWN,
                            "start-up and the cell's steps at the launch-bound (ResNet10: arithmetic-bound) step "
                            "times, shared", group=group.name))
    device = ("--device", profile.device)
    jobs.append(Job("benchmarks", "bench-engine", (str(SCRIPTS / "bench_engine.py"), *device, *profile.bench_engine,
                                                   "--json"),
                    30.0 if profile.name == "smoke" else STARTUP_S + BENCH_ENGINE_STEPS * SMALL_STEP_MS / 1e3,
                    "its default sizes' engine steps at the launch-bound step time", alone=True))
    jobs.append(Job("benchmarks", "bench-unsplit", (str(SCRIPTS / "bench_unsplit.py"), *device,
                                                    *profile.bench_unsplit),
                    30.0 if profile.name == "smoke" else STARTUP_S + BENCH_UNSPLIT_STEPS * UNSPLIT_STEP_MS / 2e3,
                    "its UnSplit steps at half the batched step time (most are single-target steps)", alone=True))
    return jobs, groups


def total(jobs: list[Job], profile: Profile) -> dict[str, float]:
    """Estimated seconds per stage and in all (the pool's jobs run side by side)."""
    alone = {stage: sum(j.estimate for j in jobs if j.stage == stage) for stage in ("attacks", "benchmarks")}
    pool = pool_makespan([j.estimate for j in jobs if j.stage == "pool"], profile.pool_jobs)
    stages = {"attacks": alone["attacks"], "pool": pool, "benchmarks": alone["benchmarks"], "pack": PACK_RESERVE_S}
    return {**stages, "total": sum(stages.values())}

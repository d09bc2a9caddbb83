"""The lab on a GPU in one command: every attack's quick preset eager and compiled, the engine and UnSplit
benchmarks, and a first paper-size subset, packed into at most 8 files, in well under 10 minutes.

    python scripts/device_check.py --plan            # what it runs, with the estimated seconds of each part
    python scripts/device_check.py --out DIR         # the check (needs CUDA)
    python scripts/device_check.py --cpu-smoke       # the same, end to end, on the CPU at toy sizes
    python scripts/device_check.py --cpu-reference   # the CPU's numbers (device_reference_cpu.json)

Stages, each under the time guard (device_pool.py: a job starts only when its estimate, scaled by how the finished
jobs compared with theirs, fits before the deadline; what would not fit is recorded as skipped):

1. every registered attack's quick preset with `--device cuda`, eager (one process, one attack after another,
   nothing else running), then `--compile on` (each in its own process, inductor's cache cold), beside the CPU's
   numbers for the same command (device_reference_cpu.json; "none" where it has none);
2. in a pool of processes sharing the GPU: the compiled runs and the paper-size subset, cell by cell through the
   lab's own sweeps (`splitlab sweep --paper NAME --paper-size --where ...`): FedLeak against Inverting Gradients
   (ResNet10, batch 16, 10,000 iterations, seeds 0-2), TGIAs-RO's Algorithm 1 at R_g = 300 (ReLU LeNet, seeds
   0-2) and JAST's Table 1 at the paper's 10 epochs (full MNIST when the data root has it, else mnist5k); each
   finished subset is shipped in the shipped-results format (NAME.csv beside NAME.json, as
   scripts/ship_results.py writes) under a name of its own, with the GPU, CUDA and driver in its provenance, and
   the claims ledger's verdicts on it beside those on the CPU's rows;
3. `bench_engine.py` and `bench_unsplit.py` on the GPU, alone;
4. everything packed into 6 files under --out: summary.json, report.md, check.log, results.tar.gz (the shipped
   pairs and sweep reports), runs.tar.gz (every run's config, metrics and log), figures.tar.gz (their PNGs).

On the device machine (Python 3.12, torch 2.11, no network), mlxtend, lpips, pytorch-fid, autodp and optuna
travel as wheels with the lab's own: run `bash scripts/device_wheels.sh` here first (it also stamps the commit
into .whl/, since the copy of the tree sent there has no .git). Then the whole device command, with
`carry: [".whl"]` and `timeout_s: 600` (the check stops its jobs at 515 s and has packed by 540 s):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1; nvidia-smi -L; python3 scripts/device_check.py --out $OUT
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from device_plan import (ATTACKS, DEVICE, PACK_RESERVE_S, REFERENCE, SMOKE, Profile, reference,  # noqa: E402
                         attack_argv, build, total)


def cell_of(argv: list[str]):
    """A `splitlab` command line as a sweep cell, so the lab's own cell runner runs it in process."""
    from splitlab.sweep_file import Cell

    command = []
    while argv[len(command)][:2] != "--":
        command.append(argv[len(command)])
    rest, options = argv[len(command):], []
    i = 0
    while i < len(rest):
        takes_value = i + 1 < len(rest) and not rest[i + 1].startswith("--")
        options.append((rest[i][2:], rest[i + 1] if takes_value else True))
        i += 1 + takes_value
    return Cell(tuple(command), tuple(options), ())


def run_attacks(folder: Path, profile: Profile, names: tuple[str, ...] = ATTACKS) -> None:
    """Each attack's quick preset in this process, one after another, each into folder/NAME (cell.json last)."""
    import torch

    from splitlab.sweep_cells import run_cell

    if profile.device == "cuda":               # the context and cuDNN's first load, outside every attack's clock
        x = torch.randn(8, 1, 28, 28, device="cuda", requires_grad=True)
        torch.nn.functional.conv2d(x, torch.randn(4, 1, 3, 3, device="cuda")).sum().backward()
        torch.cuda.synchronize()
    for name in names:
        record = run_cell(cell_of(attack_argv(name, profile)), folder / name)
        print(json.dumps({"attack": name, "status": record["status"], "seconds": record["seconds"],
                          "error": record["error"]}), flush=True)


def cpu_reference(only: tuple[str, ...] = ()) -> None:
    """Run every quick preset on this CPU (or only these attacks, the others' records kept) and write
    device_reference_cpu.json (times mean what the load allows: the hardware line says how busy the machine was)."""
    import torch

    from device_report import attack_record
    from vfl.runs import git_state
    from vfl.runtime import hardware

    profile = Profile("reference", "cpu")
    before = hardware(torch.device("cpu"))
    kept = {k: v for k, v in reference()["attacks"].items() if k in ATTACKS and k not in only} if only else {}
    names = tuple(a for a in ATTACKS if a in only or a not in kept)        # an attack with no record is measured
    with tempfile.TemporaryDirectory(prefix="splitlab-reference-") as tmp:
        run_attacks(Path(tmp) / "runs", profile, names)
        measured = {name: {"argv": attack_argv(name, profile), **attack_record(Path(tmp) / "runs" / name)}
                    for name in names}
    attacks = {name: kept.get(name) or measured[name] for name in ATTACKS}
    when = {"hardware_before": before, "hardware_after": hardware(torch.device("cpu")), "torch": torch.__version__,
            "python": sys.version.split()[0], "git": git_state(), "measured": datetime.date.today().isoformat()}
    if only:                                    # the earlier provenance stays; this run's is listed beside it
        record = {**reference(), "attacks": attacks}
        record["remeasured"] = [*record.get("remeasured", []), {"attacks": list(names), **when}]
    else:
        record = {"what": "every attack's quick preset on the CPU, one process, one after another (device_check.py "
                          "--cpu-reference): the numbers the GPU check puts its own beside", **when,
                  "attacks": attacks}
    REFERENCE.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {REFERENCE}")


def print_plan(profile: Profile, jobs, groups, data_root: Path | None) -> dict:
    estimates = total(jobs, profile)
    print(f"device check, profile {profile.name} (device {profile.device}); data root "
          f"{data_root or 'none (mnist5k only)'}; pool of {profile.pool_jobs} processes")
    print(f"{'stage':10} {'job':34} {'estimate s':>10}  basis")
    for job in jobs:
        if job.group is None:
            print(f"{job.stage:10} {job.name:34} {job.estimate:10.0f}  {job.basis}")
    for group in groups:
        cells = [j.estimate for j in jobs if j.group == group.name]
        each = f"{min(cells):.0f}-{max(cells):.0f}" if min(cells) != max(cells) else f"{cells[0]:.0f}"
        print(f"{'pool':10} {group.name + f' ({len(cells)} cells)':34} {each:>10}  one process per cell of "
              f"`splitlab sweep {' '.join(group.sweep_args())}`: {group.why}")
    print("estimated seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in estimates.items() if k != "total")
          + f"; total {estimates['total']:.0f} s ({estimates['total'] / 60:.1f} min) against the plan's limit of "
            f"{profile.plan_limit:.0f} s: {'fits' if estimates['total'] <= profile.plan_limit else 'DOES NOT FIT'}")
    print("basis: scripts/device_plan.py's docstring (launch-bound step times, the lab's cold compile time, the "
          "CPU reference's step counts); the run rescales them by what its finished jobs took")
    return estimates


def check(profile: Profile, out: Path, data_root: Path | None) -> int:
    import torch

    from device_pool import Guard
    from device_report import finish

    if profile.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device here; use --cpu-smoke to run the check on the CPU", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="splitlab-device-"))
    jobs, groups = build(profile, work, data_root)
    log_file = open(work / "check.log", "a")

    def log(message: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {message}"
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
           "TORCHINDUCTOR_COMPILE_THREADS": str(profile.compile_threads),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if data_root is not None:
        env["SPLITLAB_DATA"] = str(data_root)
    if profile.device == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    estimates = total(jobs, profile)
    log(f"plan: {len(jobs)} jobs, estimated {estimates['total']:.0f} s; deadline {profile.deadline:.0f} s; "
        f"work folder {work}")
    guard = Guard(profile.deadline - PACK_RESERVE_S, work / "logs", log, env)
    guard.run([j for j in jobs if j.stage == "attacks"], 1, overrun=3.0)
    guard.run([j for j in jobs if j.stage == "pool"], profile.pool_jobs)
    guard.run([j for j in jobs if j.stage == "benchmarks"], 1, overrun=3.0)
    log(f"jobs done at {guard.elapsed():.0f} s; scale of the estimates {guard.scale():.2f}")
    code = finish(profile, work, out, jobs, groups, guard, estimates, log)
    log(f"packed into {out} at {guard.elapsed():.0f} s")
    log_file.close()
    shutil.copy(work / "check.log", out / "check.log")
    if os.environ.get("SPLITLAB_KEEP_WORK") != "1":
        shutil.rmtree(work, ignore_errors=True)
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--plan", action="store_true", help="print the jobs and their estimated seconds, run nothing")
    mode.add_argument("--cpu-smoke", action="store_true", help="the whole check on the CPU at toy sizes")
    mode.add_argument("--cpu-reference", action="store_true", help=f"write {REFERENCE.name} from this CPU")
    mode.add_argument("--run-attacks", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="+", choices=ATTACKS, default=(), metavar="ATTACK",
                        help="with --cpu-reference: measure only these attacks, keep the others' records (the check's own jobs run a subset with it too)")
    parser.add_argument("--profile", default="device", choices=("device", "smoke"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "runs/device-check"),
                        help="where the packed files go (default $OUT, else runs/device-check)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="a data root with full MNIST (JAST's Table 1 then runs on it; default: .data if present)")
    args = parser.parse_args()
    profile = SMOKE if args.cpu_smoke or args.profile == "smoke" else DEVICE
    if args.run_attacks is not None:
        run_attacks(args.run_attacks, profile, tuple(args.only) or ATTACKS)
        return
    if args.cpu_reference:
        cpu_reference(tuple(args.only))
        return
    data_root = args.data_root or (ROOT / ".data" if (ROOT / ".data").is_dir() else None)
    if data_root is not None and not data_root.is_dir():
        print(f"error: --data-root {data_root} is not a directory", file=sys.stderr)
        raise SystemExit(2)
    if args.plan:
        with tempfile.TemporaryDirectory(prefix="splitlab-plan-") as tmp:
            jobs, groups = build(profile, Path(tmp), data_root)
            print_plan(profile, jobs, groups, data_root)
        return
    if args.out.exists() and any(args.out.iterdir()) and not (args.out / "summary.json").is_file():
        print(f"error: --out {args.out} holds files this check did not write; give an empty folder", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(check(profile, args.out, data_root))


if __name__ == "__main__":
    main()

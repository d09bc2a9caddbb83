"""What `device_check.py` brings back: each attack's numbers beside the CPU's, the sweeps' subsets shipped in the
shipped-results format with the device in their provenance (and the ledger's verdicts on them beside those on the
CPU's rows), the benchmarks' output, and the packing of it all into at most 8 files."""
from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Callable

from attack_commands import with_options
from device_plan import ATTACKS, ENGINE, Group, Job, Profile, attack_argv, reference

METRICS = ("psnr", "ssim", "image_mse", "label_accuracy", "accuracy")
MEMBER_CAP = 15 * 2 ** 20
"""Bytes (uncompressed) a packed archive holds at most: the device brings back files of up to 16 MiB."""
PACKED = ("summary.json", "report.md", "check.log", "results.tar.gz", "runs.tar.gz", "figures.tar.gz")
STAMP = Path(__file__).resolve().parents[1] / ".whl" / "source.json"
"""The commit the wheels were made from (scripts/device_wheels.sh): the device's copy of the tree has no .git."""


def source() -> dict | None:
    """The code's commit: from git where this is a checkout, else from the wheel bundle's stamp."""
    from vfl.runs import git_state

    state = git_state()
    if state is None and STAMP.is_file():
        state = {**_json(STAMP), "from": "the wheel bundle's stamp (scripts/device_wheels.sh)"}
    return state


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def attack_record(run_dir: Path) -> dict:
    """One attack run's outcome: the cell record's status and wall time, metrics.json's seconds and metrics."""
    cell, metrics = _json(run_dir / "cell.json"), _json(run_dir / "metrics.json")
    compile_report = (metrics.get("extras") or {}).get("compile") or {}
    record = {"status": cell.get("status", "ok" if metrics else "missing"), "error": cell.get("error"),
              "wall": cell.get("seconds"), "seconds": metrics.get("seconds"), "steps": metrics.get("steps")}
    record.update({k: metrics[k] for k in METRICS if isinstance(metrics.get(k), (int, float))})
    if compile_report:
        keys = ("mode", "compiled", "reason", "compiles", "recompiles", "graph_breaks", "compile_seconds")
        record["compile"] = {k: compile_report.get(k) for k in keys}
    return record


def _fmt(value, digits: int = 2) -> str:
    return "none" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def attack_rows(work: Path, records: dict[str, dict], profile: Profile) -> list[dict]:
    """Per attack: the CPU reference (where it ran the same command), the device's eager run and its compiled run
    (seconds net of compiling)."""
    cpu = reference()["attacks"]
    rows = []
    for name in ATTACKS:
        eager = attack_record(work / "eager" / name)
        job = records.get(f"compiled-{name}")
        if job is None:
            why = "no engine steps to compile" if name not in ENGINE else f"not compiled in the {profile.name} check"
            compiled = {"status": "not applicable", "error": why}
        elif job["status"] == "ok":
            compiled = attack_record(work / "compiled" / name)
        else:
            compiled = {"status": job["status"], "error": job.get("reason")}
        if compiled.get("seconds") is not None and compiled.get("compile"):
            compiled["seconds_net"] = compiled["seconds"] - (compiled["compile"].get("compile_seconds") or 0.0)
        ref = cpu.get(name) or {}
        if with_options(ref.get("argv") or [], device=profile.device) != attack_argv(name, profile):
            ref = {}                                     # another command (the smoke's toy sizes): no reference
        rows.append({"attack": name, "cpu": {k: ref.get(k) for k in ("seconds", "steps", *METRICS) if k in ref} or None,
                     "eager": eager, "compiled": compiled,
                     "cpu_over_eager": (ref["seconds"] / eager["seconds"]) if ref.get("seconds") and
                     eager.get("seconds") else None})
    return rows


def attacks_markdown(rows: list[dict]) -> str:
    head = ("| attack | CPU s | eager s | CPU / eager | compiled s (net) | compile s | graphs / recompiles / breaks "
            "| PSNR CPU | PSNR eager | PSNR compiled | not ok |\n|" + "---|" * 11)
    lines = [head]
    for r in rows:
        cpu, eager, compiled = r["cpu"] or {}, r["eager"], r["compiled"]
        c = compiled.get("compile") or {}
        counts = f"{c.get('compiles')} / {c.get('recompiles')} / {c.get('graph_breaks')}" if c else "-"
        status = "; ".join(f"{k} {v['status']}" + (f" ({v['error']})" if v.get("error") else "")
                           for k, v in (("eager", eager), ("compiled", compiled))
                           if v.get("status") not in ("ok", "not applicable")) or "-"
        ratio = f"{r['cpu_over_eager']:.2f}x" if r["cpu_over_eager"] else "none"
        lines.append(f"| {r['attack']} | {_fmt(cpu.get('seconds'))} | {_fmt(eager.get('seconds'))} | "
                     f"{ratio} | {_fmt(compiled.get('seconds_net'))} | "
                     f"{_fmt(c.get('compile_seconds'), 1)} | {counts} | {_fmt(cpu.get('psnr'))} | "
                     f"{_fmt(eager.get('psnr'))} | {_fmt(compiled.get('psnr'))} | {status} |")
    return "\n".join(lines)


def _device(cells: Path) -> dict:
    """The GPU (name, CUDA, driver) the cells ran on, from their config.json; the CPU's line where none."""
    for config in sorted(cells.glob("*/config.json")):
        environment = _json(config).get("environment", {})
        if environment.get("cuda"):
            return environment["cuda"]
    from vfl.runtime import hardware
    import torch

    return {"name": hardware(torch.device("cpu"))}


def ship_group(group: Group, work: Path, cells: int, slots: int, log: Callable[[str], None]) -> dict:
    """Gather a finished subset's cells into one sweep directory, let `splitlab sweep` aggregate them (every cell
    finished, so it runs none), and ship its results as NAME.csv and NAME.json into work/results."""
    from splitlab.claims import LEDGER, judge
    from splitlab.claims.results import read_csv, ship
    from splitlab.cli import app

    final = work / "sweeps" / group.name
    for part in sorted((work / "parts").glob(f"{group.name}-*")):
        for cell in (part / "cells").iterdir():
            (final / "cells").mkdir(parents=True, exist_ok=True)
            shutil.move(str(cell), final / "cells" / cell.name)
    code = app(["sweep", *group.sweep_args(), "--executor", "local", "--no-progress", "--out", str(final)],
               prog_name="splitlab", standalone_mode=False)
    if code not in (0, None):
        return {"shipped": False, "reason": f"aggregating the cells exited {code}"}
    # ship() keeps paper-size sweeps from replacing the CPU grid's shipped results: this subset ships under a
    # name of its own, so it is given the results and cells, and the sweep's record goes into the provenance after
    stage = work / "ship" / group.name
    stage.mkdir(parents=True)
    (stage / "results.csv").symlink_to(final / "results.csv")
    (stage / "cells").symlink_to(final / "cells")
    csv_path = ship(stage, group.name, root=work / "results")
    meta_path = csv_path.with_suffix(".json")
    meta = _json(meta_path)
    if "git" not in meta:                            # the cells ran from a copy without .git
        meta["git"] = source()
    meta.update({"command": "splitlab sweep " + " ".join(group.sweep_args()), "subset": group.why,
                 "device": _device(final / "cells"), "sweep_record": _json(final / "sweep.json"),
                 "run_by": f"scripts/device_check.py: each of the {cells} cells in its own `splitlab sweep` process, "
                           f"up to {slots} side by side on one device"})
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    rows = read_csv(csv_path)
    verdicts = []
    for claim in LEDGER:
        if claim.measure is not None and claim.measure.sweep == group.grid:
            before = judge(claim)
            after = judge(claim, lambda sweep, rows=rows: rows if sweep == group.grid else None)
            verdicts.append({"claim": claim.id, "before": before.verdict, "before_lab": before.lab,
                             "after": after.verdict, "after_lab": after.lab, "after_reason": after.reason})
    log(f"shipped {group.name}: {len(rows)} cells; {len(verdicts)} claims read {group.grid}")
    return {"shipped": True, "csv": csv_path.name, "cells": len(rows), "verdicts": verdicts,
            "summary": (final / "report.md").read_text() if (final / "report.md").is_file() else ""}


def _archive(path: Path, members: list[tuple[Path, str]], log: Callable[[str], None]) -> None:
    """A gzipped tar of `members` (file, name inside), smallest first, stopping at MEMBER_CAP bytes."""
    size, left = 0, []
    with tarfile.open(path, "w:gz") as tar:
        for file, name in sorted(members, key=lambda m: m[0].stat().st_size):
            if size + file.stat().st_size > MEMBER_CAP:
                left.append(name)
                continue
            tar.add(file, arcname=name)
            size += file.stat().st_size
    if left:
        log(f"{path.name}: {len(left)} files left out to stay under {MEMBER_CAP >> 20} MiB, e.g. {left[-1]}")


def pack(work: Path, out: Path, log: Callable[[str], None]) -> None:
    """results.tar.gz, runs.tar.gz and figures.tar.gz from the work folder (summary.json, report.md and check.log
    are written beside them)."""
    files = [p for p in work.rglob("*") if p.is_file() and p.relative_to(work).parts[0] not in ("inductor", "locks")
             and not p.name.startswith(".")]
    named = [(p, str(p.relative_to(work))) for p in files]
    results = [(p, n) for p, n in named if n.startswith("results/") or
               (n.startswith("sweeps/") and n.count("/") == 2)]
    runs = [(p, n) for p, n in named if p.suffix in (".json", ".log", ".csv", ".out", ".err", ".md", ".toml")
            and (p, n) not in results]
    figures = [(p, n) for p, n in named if p.suffix == ".png"]
    for name, members in (("results.tar.gz", results), ("runs.tar.gz", runs), ("figures.tar.gz", figures)):
        _archive(out / name, members, log)


def finish(profile: Profile, work: Path, out: Path, jobs: list[Job], groups: list[Group], guard,
           estimates: dict, log: Callable[[str], None]) -> int:
    """Ship the finished subsets, write summary.json and report.md, pack; the exit code (1 if a job failed)."""
    import torch

    from vfl.runtime import cuda_provenance, hardware

    shipped = {}
    for group in groups:
        cells = [j for j in jobs if j.group == group.name]
        states = [guard.records.get(j.name, {}).get("status") for j in cells]
        if cells and all(s == "ok" for s in states):
            try:
                shipped[group.name] = ship_group(group, work, len(cells), profile.pool_jobs, log)
            except Exception as exc:                 # noqa: BLE001 - a report, not a crash: the rest still packs
                shipped[group.name] = {"shipped": False, "reason": f"{type(exc).__name__}: {exc}"}
        else:
            shipped[group.name] = {"shipped": False, "reason": f"{states.count('ok')} of {len(cells)} cells ok: "
                                                               + ", ".join(sorted(set(map(str, states))))}
    device = torch.device(profile.device)
    rows = attack_rows(work, guard.records, profile)
    bench = {j.name: (work / "logs" / f"{j.name}.out").read_text(errors="replace")
             if (work / "logs" / f"{j.name}.out").is_file() else "" for j in jobs if j.stage == "benchmarks"}
    summary = {"profile": profile.name, "hardware": hardware(device), "cuda": cuda_provenance(),
               "torch": torch.__version__, "source": source(), "estimates": estimates,
               "elapsed": round(guard.elapsed(), 1),
               "scale": round(guard.scale(), 3), "jobs": guard.records, "attacks": rows, "subsets": shipped,
               "cpu_reference": {k: v for k, v in reference().items() if k != "attacks"}}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    skipped = [f"- {n}: {r['status']}, {r.get('reason', '')}" for n, r in guard.records.items() if r["status"] != "ok"]
    parts = [f"# Device check ({profile.name})\n", f"{summary['hardware']}; torch {torch.__version__}; "
             f"{summary['elapsed']:.0f} s in all (estimated {estimates['total']:.0f} s; the finished jobs took "
             f"{summary['scale']:.2f}x their estimates)\n",
             "## Attacks: quick presets\n", f"Eager and compiled on {profile.device}; CPU: the reference ("
             + (summary["cpu_reference"].get("hardware_before") or "none") + "), where it ran the same command.\n",
             attacks_markdown(rows) + "\n", "## Paper-size subsets\n"]
    for name, result in shipped.items():
        parts.append(f"### {name}\n")
        if not result.get("shipped"):
            parts.append(f"not shipped: {result['reason']}\n")
            continue
        parts.append(result["summary"] + "\n")
        parts += [f"- {v['claim']}: {v['before']} -> {v['after']} ({v['after_lab']})" for v in result["verdicts"]]
        parts.append("")
    parts.append("## Benchmarks\n")
    parts += [f"### {name}\n\n```\n{text.strip()}\n```\n" for name, text in bench.items()]
    parts += ["## Not run or not finished\n", "\n".join(skipped) or "none", ""]
    (out / "report.md").write_text("\n".join(parts) + "\n")
    pack(work, out, log)
    return 1 if any(r["status"] == "failed" for r in guard.records.values()) else 0

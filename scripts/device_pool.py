"""The time-budget guard of `device_check.py`: it runs the check's jobs as child processes, alone or side by side,
starts a job only when its estimate (scaled by how the finished jobs compared with theirs) fits before the
deadline, records what it skipped and why, and stops what is still running at the deadline.
"""
from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from device_plan import Job

POLL_S = 0.2
STOP_GRACE_S = 10.0
"""Seconds between SIGTERM (a sweep stops like Ctrl-C, keeping its finished cells) and SIGKILL."""
SCALE_BOUNDS = (0.5, 4.0)


class Guard:
    """Runs jobs before `deadline` (seconds on `clock` since `start`), logging to `log`; `records` holds each job's
    outcome: ok, failed, skipped (did not fit) or stopped (still running at the deadline)."""

    def __init__(self, deadline: float, logs: Path, log: Callable[[str], None], env: dict[str, str],
                 clock: Callable[[], float] = time.monotonic):
        self.clock, self.start, self.deadline = clock, clock(), deadline
        self.logs, self.log, self.env = logs, log, env
        self.records: dict[str, dict] = {}
        logs.mkdir(parents=True, exist_ok=True)

    def elapsed(self) -> float:
        return self.clock() - self.start

    def scale(self) -> float:
        """How long the finished jobs took against their estimates: the median ratio, within SCALE_BOUNDS."""
        ratios = [r["seconds"] / r["estimate"] for r in self.records.values()
                  if r["status"] == "ok" and r["estimate"] > 0]
        if not ratios:
            return 1.0
        return min(max(statistics.median(ratios), SCALE_BOUNDS[0]), SCALE_BOUNDS[1])

    def fits(self, job: Job, until: float) -> bool:
        """Whether `job` is expected to end before `until`; if not it is recorded as skipped, with why."""
        expected, left = job.estimate * self.scale(), until - self.elapsed()
        if expected <= left:
            return True
        self.records[job.name] = {**_describe(job), "status": "skipped", "seconds": 0.0,
                                  "reason": f"estimated {expected:.0f} s (x{self.scale():.2f} of the plan's), "
                                            f"{max(left, 0):.0f} s left"}
        self.log(f"skip {job.name}: {self.records[job.name]['reason']}")
        return False

    def _launch(self, job: Job) -> subprocess.Popen:
        self.log(f"start {job.name}: {' '.join(job.argv)}")
        out, err = (open(self.logs / f"{job.name}.{kind}", "w") for kind in ("out", "err"))
        with out, err:
            process = subprocess.Popen([sys.executable, *job.argv], stdout=out, stderr=err, env=self.env,
                                       start_new_session=True)       # its own group: a stop reaches its children
        process.started, process.expected = self.elapsed(), job.estimate * self.scale()
        process.job = job
        process.alongside = 0
        return process

    def _finish(self, process: subprocess.Popen, stopped: bool, why: str = "running at the deadline") -> dict:
        job, seconds = process.job, self.elapsed() - process.started
        rc = process.returncode
        status = "stopped" if stopped else "ok" if rc == 0 else "failed"
        record = {**_describe(job), "status": status, "rc": rc, "seconds": round(seconds, 2),
                  "started_at": round(process.started, 1), "alongside": process.alongside}
        if status != "ok":
            record["reason"] = (why if stopped else
                                _last_line(self.logs / f"{job.name}.err") or f"exit code {rc}")
        self.records[job.name] = record
        self.log(f"{status} {job.name}: {seconds:.1f} s (estimate {job.estimate:.0f} s)"
                 + (f"; {record['reason']}" if status != "ok" else ""))
        return record

    def run(self, jobs: list[Job], slots: int, until: float | None = None, overrun: float | None = None) -> None:
        """Run `jobs` with at most `slots` at once, longest first; each starts only if it fits before `until`
        (default: the deadline); what still runs at the deadline, or past `overrun` times its scaled estimate, is
        stopped (a job run alone holds up every stage after it)."""
        until = self.deadline if until is None else until
        pending = sorted(jobs, key=lambda j: -j.estimate)
        running: list[subprocess.Popen] = []
        while pending or running:
            while pending and len(running) < slots:
                job = pending.pop(0)
                if self.fits(job, until):
                    running.append(self._launch(job))
            for process in running:
                process.alongside = max(process.alongside, len(running) - 1)
            time.sleep(POLL_S)
            for process in [p for p in running if p.poll() is not None]:
                running.remove(process)
                self._finish(process, stopped=False)
            if overrun is not None:
                for process in [p for p in running if self.elapsed() - p.started > overrun * p.expected]:
                    _stop(process)
                    running.remove(process)
                    self._finish(process, stopped=True, why=f"ran past {overrun:g}x its estimate")
            if running and self.elapsed() >= self.deadline:
                for process in running:
                    _stop(process)
                for process in running:
                    self._finish(process, stopped=True)
                running = []
                for job in pending:
                    self.fits(job, until)                   # recorded as skipped: no time is left
                pending = []


def _describe(job: Job) -> dict:
    return {k: v for k, v in asdict(job).items() if k != "argv"} | {"argv": list(job.argv)}


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the job's process group, SIGKILL after STOP_GRACE_S."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""

"""When the engine compiles and what it cost: the `compile` option's modes, `auto`'s rule, the C++ compiler
and on-disk cache inductor needs, dynamo's counters, and the report a run returns (`Compilation`). The
compiled programs themselves are `attacks.engine.compiled`.
"""
from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import sys
import tempfile
import time
import types
from typing import Any, Callable, Sequence

import torch

from attacks.engine import compiled, source_keys
from attacks.engine.compiled import (PROGRAMS_ATTRIBUTE, CompiledStep, _hook_traced, _overrides, _Program,
                                     compiled_in_process, signature_text)
from attacks.engine.optim import LBFGS
from attacks.engine.trials import Trials
from vfl.errors import SplitlabError
from vfl.inductor_env import CACHE_VARIABLE, UNUSABLE_CACHE_VARIABLE
from vfl.options import Check
from vfl.runtime import wait_for
from vfl.validate import check_choice

__all__ = ["COMPILE_MODES", "Compilation", "compile_extras", "compile_mode", "cxx_compiler", "cache_dir",
           "cache_problem", "check_can_compile", "AUTO_PROBE_STEPS", "AUTO_PAYBACK", "COLD_COMPILE_SECONDS",
           "WARM_FRACTION"]


COMPILE_MODES = ("off", "on", "auto")

AUTO_PROBE_STEPS = 4
"""`compile="auto"` times this many eager steps (after the first, which pays one-off set-up) before deciding."""
AUTO_PAYBACK = 3.0
"""Where no compiled step of the run's signatures was ever timed (`auto`'s fallback): `auto` compiles when the
run's remaining eager time is at least this many times the expected compile time (a compiled step 1.5x as fast
as eager saves a third of the remaining time, which then covers the compile). Once a compiled run on this
device and thread count has been timed, `auto` uses that measured pace instead (`_paced_decision`)."""
PACE_MIN_STEPS = 3
"""Compiled steps a run must time (after its compile) before their pace is recorded for `auto`."""
COLD_COMPILE_SECONDS = 60.0
"""Expected compile time of a step with nothing in the cache: the top of the 16-61 s measured for the attacks'
steps on a quiet 2-core CPU (docs/benchmarks.md), so that `auto` errs towards eager."""
WARM_FRACTION = 0.1
"""A step compiled before into the same cache costs about this fraction of its cold compile (dynamo still
traces; inductor's FX graph and AOT caches skip the code generation and the C++ build): 5-16% measured."""
NO_COMPILER = "no C++ compiler (inductor looks for $CXX or g++)"
COSTS_FILE = "splitlab_compile_seconds.json"
"""Measured compile times per step signature, kept beside inductor's cache for `auto`'s estimate."""


def cxx_compiler() -> str | None:
    """The C++ compiler inductor's CPU backend would run (its `cpp.cxx` candidates, `$CXX` or g++), or None."""
    import torch._inductor.config as inductor
    candidates = inductor.cpp.cxx if isinstance(inductor.cpp.cxx, (list, tuple)) else (inductor.cpp.cxx,)
    return next((shutil.which(c) for c in candidates if c and shutil.which(c)), None)


def cache_dir() -> str:
    """Where inductor keeps compiled graphs between processes: `$TORCHINDUCTOR_CACHE_DIR`, else
    `<tempdir>/torchinductor_<user>` (inductor's default; /tmp/torchinductor_root here). Inductor's own
    function is used once inductor is loaded; before, its default is worked out here, since importing
    inductor takes seconds that a run `auto` leaves eager should not pay."""
    for variable in (UNUSABLE_CACHE_VARIABLE, CACHE_VARIABLE):      # the first: one set aside as unusable
        if os.environ.get(variable):
            return os.path.abspath(os.environ[variable])
    loaded = sys.modules.get("torch._inductor.runtime.cache_dir_utils")
    if loaded is not None:
        return os.path.abspath(loaded.default_cache_dir())
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return os.path.abspath(os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)))


def cache_problem() -> str | None:
    """Why inductor could not keep its compiled code in `cache_dir()` (not a folder, not writable, a full
    disk: a page is written there and removed), or None. Asked only when a run is about to compile."""
    path = cache_dir()
    if os.path.lexists(path) and not os.path.isdir(path):
        return f"{path} (${CACHE_VARIABLE}) is a file, not a folder"
    try:
        os.makedirs(path, exist_ok=True)                  # what inductor does first
        with tempfile.TemporaryFile(dir=path) as probe:   # removed on close, whatever happens
            probe.write(bytes(4096))
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return f"{path} (${CACHE_VARIABLE}) cannot be written ({exc.strerror or exc})"
    return None


def check_can_compile() -> None:
    """Refuse, in one line and before anything is written, a run asked to compile (`compile="on"`) that could
    not: no C++ compiler for inductor's CPU code, or an inductor cache it cannot write."""
    if compiled.BACKEND != "inductor":          # a test's backend builds no C++ and keeps no cache
        return
    if cxx_compiler() is None:
        raise SplitlabError(f"--compile on needs a C++ compiler for inductor's CPU code; {NO_COMPILER} was found: "
                            "install one, or use --compile auto (eager without one) or off")
    problem = cache_problem()
    if problem is not None:
        raise SplitlabError(f"--compile on: inductor's cache {problem}; point ${CACHE_VARIABLE} at a writable "
                            "folder with room, or use --compile off")


def compile_mode() -> Check:
    """The `compile` option's check: one of `COMPILE_MODES`, and "on" only where compiling can work."""
    def run(name: str, value: object) -> str:
        mode = check_choice(name, value, COMPILE_MODES)
        if mode == "on":
            check_can_compile()
        return mode
    return Check(str, run, "one of " + ", ".join(COMPILE_MODES), COMPILE_MODES,
                 refused="not-" + "-".join(COMPILE_MODES))


def _notice(message: str) -> None:
    print(f"splitlab: {message}", file=sys.stderr)


# --- dynamo's counters -------------------------------------------------------------------------------

def _counters() -> tuple[int, int]:
    """(graphs compiled, graph breaks) so far in this process. A break dynamo cannot resume from (one inside
    a loop) skips the whole frame and is counted as "unimplemented", not as a graph break: both count."""
    from torch._dynamo.utils import counters
    return (counters["stats"]["unique_graphs"],
            sum(counters["graph_break"].values()) + sum(counters["unimplemented"].values()))


def _frames(code: types.CodeType) -> int:
    """How many times dynamo compiled this code object's frame (its cache entries): 1 + its recompiles."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    return len(_debug_get_cache_entry_list(code))




class Compilation:
    """One `run`'s compile choice and what it cost: builds the compiled steps, decides for `auto`, and
    reports compiles, recompiles, graph breaks and compile seconds (`EngineResult.extra["compile"]`)."""

    def __init__(self, mode: str, total_steps: int, device: torch.device):
        self.mode = mode
        self.total_steps = total_steps
        self.device = device
        self.active = mode == "on"
        self.decided = mode != "auto"
        self.reason = {"off": "not asked", "on": "asked", "auto": "deciding"}[mode]
        self.compile_seconds = 0.0
        self.compiles = self.graph_breaks = 0
        self.programs: dict[int, tuple[_Program, int, int]] = {}   # id -> (program, frames before, first compiles)
        self.signatures: list[str] = []
        self.steps_done = 0
        self.probe_start: float | None = None
        self.estimate: dict[str, float] = {}
        self.compiled_steps, self.compiled_step_seconds = 0, 0.0     # compiled calls that compiled nothing
        if mode == "on":                    # checked when the settings were built; again for a direct engine call
            check_can_compile()                 # (auto looks only once it would compile)

    # the loop asks for each block run's step once compiling is on
    def step_for(self, objective, state: Trials, run) -> Callable | None:
        if not self.active:
            return None
        if self.mode == "auto" and isinstance(run.block.optimizer, LBFGS):
            return None                     # see `stays_eager`: auto leaves L-BFGS blocks eager
        refused = [type(h).__name__ for h in run.block.hooks if _overrides(h, "on_grads") and not _hook_traced(h)]
        if refused:                     # a gradient hook with state of its own would be traced at one state
            if self.mode == "on":
                _notice(f"block on {', '.join(run.block.update)} runs eagerly: hook {refused[0]} keeps state")
            return None
        # building the step is part of the compile's cost (auto learns from it): loading dynamo and inductor
        # the first time, torch's source keys, the eager evaluation that leaves the taps the trace reads
        start = time.perf_counter()
        if compiled.BACKEND == "inductor":
            source_keys.reuse(cache_dir())      # before the first compile: torch's hashing skipped when known
        step = CompiledStep(self, objective, state, run)
        self.compile_seconds += time.perf_counter() - start
        if id(step.program) not in self.programs:
            # a program's code may hold graphs of earlier programs (`compiled._shared_code`): only the frames
            # this run adds count, and a new program's first one (or a program never run) is no recompile
            frames = _frames(step.program.code)
            self.programs[id(step.program)] = (step.program, frames, 1 if step.new or not frames else 0)
            self.signatures.append(signature_text(objective, step.signature))
        return step

    def call(self, program: _Program, *args, timed: bool = True):
        """Run `program`, counting what it compiled; a call that compiled nothing is a compiled step whose
        time `auto` learns from (`timed`: it is one whole step; an L-BFGS evaluation is not)."""
        graphs, breaks = _counters()
        start = time.perf_counter()
        out = program(*args)
        after_graphs, after_breaks = _counters()
        if after_graphs != graphs or after_breaks != breaks:
            self.compile_seconds += time.perf_counter() - start
            self.compiles += after_graphs - graphs
            self.graph_breaks += after_breaks - breaks
        elif timed and self.device.type == "cpu":     # a CPU step has finished when it returns; a GPU's is only queued
            self.compiled_steps += 1
            self.compiled_step_seconds += time.perf_counter() - start
        return out

    # --- auto ---------------------------------------------------------------------------------------
    def after_step(self, objective, signatures: Callable[[], list[tuple]]) -> bool:
        """Called after every eager step while `auto` is deciding (`signatures`: the run's blocks'
        `step_signature`s); True once it switches compiling on."""
        self.steps_done += 1
        if self.decided:
            return False
        if self.steps_done == 1:
            wait_for(self.device)               # on a GPU the clock must see finished steps, not queued ones
            self.probe_start = time.perf_counter()
            return False
        if self.steps_done < 1 + AUTO_PROBE_STEPS:
            return False
        wait_for(self.device)                   # two host syncs per run, while deciding only
        pace = (time.perf_counter() - self.probe_start) / AUTO_PROBE_STEPS
        left = self.total_steps - self.steps_done
        remaining = pace * left
        unique = list(dict.fromkeys(signatures()))
        expected = self.expected_compile_seconds(objective, unique)
        self.estimate = {"eager_seconds_per_step": pace, "remaining_eager_seconds": remaining,
                         "expected_compile_seconds": expected}
        self.decided = True
        compiled_pace = self.measured_compiled_pace(objective, unique)
        if compiled_pace is not None:
            saved = left * (pace - compiled_pace)
            self.estimate |= {"compiled_seconds_per_step": compiled_pace, "saved_seconds": saved}
            self.active = saved >= expected
            self.reason = (f"{left} steps left x ({pace * 1e3:.3g} ms eager - {compiled_pace * 1e3:.3g} ms compiled, "
                           f"measured) = {saved:.1f} s saved {'>=' if self.active else '<'} {expected:.1f} s expected "
                           "compile")
        else:
            self.active = remaining >= AUTO_PAYBACK * expected
            self.reason = (f"{remaining:.1f} s of eager steps left {'>=' if self.active else '<'} "
                           f"{AUTO_PAYBACK:g} x {expected:.1f} s expected compile (no compiled step of these "
                           "signatures timed here yet)")
        if self.active and cxx_compiler() is None:
            _notice(f"--compile auto runs eagerly: {NO_COMPILER} was found")
            self.active, self.reason = False, "no C++ compiler"
        elif self.active and (problem := cache_problem()) is not None:
            _notice(f"--compile auto runs eagerly: inductor's cache {problem}")
            self.active, self.reason = False, "inductor's cache unusable"
        return self.active

    def stays_eager(self, runs: Sequence = ()) -> bool:
        """`auto` before the first step: a run too short to probe, or one whose blocks are all L-BFGS, stays
        eager. A compiled L-BFGS evaluation was slower than eager where it was measured (DLG on LeNet, 0.89x
        cold and 0.96x warm per step, docs/benchmarks.md), so `auto` never compiles one; `on` still does."""
        if self.mode != "auto" or self.decided:
            return False
        if self.total_steps <= 1 + AUTO_PROBE_STEPS:
            self.reason = f"{self.total_steps} steps: too short to repay a compile"
        elif runs and all(isinstance(r.block.optimizer, LBFGS) for r in runs):
            self.reason = "L-BFGS only: its compiled evaluations were measured slower than eager"
        else:
            return False
        self.decided = True
        return True

    @staticmethod
    def expected_compile_seconds(objective, signatures: list[tuple]) -> float:
        """What compiling these steps should cost: nothing for a program this objective already has (an
        earlier run with it compiled it) or whose signature has a graph in this process (an earlier attack
        call's, which a new objective of the same shapes and settings reuses untraced); a warm compile for a
        step this cache has compiled before (its measured warm time with this backend, or WARM_FRACTION of
        its cold one); else COLD_COMPILE_SECONDS."""
        programs = objective.__dict__.get(PROGRAMS_ATTRIBUTE, {})
        known = _read_costs()
        total = 0.0
        for signature in signatures:
            text = signature_text(objective, signature)
            if signature in programs or compiled_in_process(text):
                continue
            entry = known.get(text, {})
            warm, cold = _cost_key("warm"), _cost_key("cold")
            if warm in entry:
                total += entry[warm]
            elif cold in entry or text in _IN_PROCESS:
                total += entry.get(cold, COLD_COMPILE_SECONDS) * WARM_FRACTION
            else:
                total += COLD_COMPILE_SECONDS
        return total

    def measured_compiled_pace(self, objective, signatures: list[tuple]) -> float | None:
        """Seconds per compiled step of these signatures on this device and thread count, as an earlier run
        into this cache timed them (one step runs each block's signature once: the blocks' paces are
        averaged, as the run's steps mix them), or None where any was never timed."""
        known, key = _read_costs(), _pace_key(self.device)
        paces = [known.get(signature_text(objective, s), {}).get(key) for s in signatures]
        if not paces or any(not isinstance(p, (int, float)) or p <= 0 for p in paces):
            return None
        return sum(paces) / len(paces)

    def finish(self) -> dict[str, Any]:
        recompiles = 0
        for program, before, first in self.programs.values():
            recompiles += max(_frames(program.code) - before - first, 0)
        new = [s for s in self.signatures if s not in _IN_PROCESS]
        if self.compiles and new:
            _record_costs(new, self.compile_seconds / len(new))
        if self.compiled_steps >= PACE_MIN_STEPS and self.signatures:
            _record_pace(self.signatures, _pace_key(self.device), self.compiled_step_seconds / self.compiled_steps)
        _IN_PROCESS.update(self.signatures)
        report = {"mode": self.mode, "compiled": bool(self.programs), "reason": self.reason,
                  "compiles": self.compiles, "recompiles": recompiles, "graph_breaks": self.graph_breaks,
                  "compile_seconds": round(self.compile_seconds, 3)}
        if self.mode != "off":
            report["cache_dir"] = cache_dir()
        if self.estimate:
            report["auto"] = {k: round(v, 4) for k, v in self.estimate.items()}
        return report


_IN_PROCESS: set[str] = set()
"""Step signatures compiled in this process (a later run reuses the program, or retraces from a warm cache)."""


def _read_costs() -> dict:
    try:
        with open(os.path.join(cache_dir(), COSTS_FILE)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _pace_key(device: torch.device) -> str:
    """Where a compiled step's pace is kept: per backend (a test's `aot_eager` is not inductor), device kind and
    torch thread count, which set it."""
    return f"step_seconds_{compiled.BACKEND}_{device.type}_{torch.get_num_threads()}t"


def _cost_key(kind: str) -> str:
    """Where a cold or warm compile's seconds are kept: per backend, as a test's `aot_eager` traces without
    inductor's code generation and C++ build, so its compile times say nothing of inductor's."""
    return f"{kind}_{compiled.BACKEND}"


def _record_costs(signatures: list[str], seconds: float) -> None:
    """Remember what compiling these steps cost, as cold (first) or warm (later) compiles into this cache."""
    known = _read_costs()
    for s in signatures:
        entry = known.setdefault(s, {})
        entry[_cost_key("warm" if _cost_key("cold") in entry else "cold")] = round(seconds, 3)
    _write_costs(known)


def _record_pace(signatures: list[str], key: str, seconds: float) -> None:
    """Remember the seconds per compiled step of a run of these signatures (the latest run's)."""
    known = _read_costs()
    for s in signatures:
        known.setdefault(s, {})[key] = round(seconds, 6)
    _write_costs(known)


def _write_costs(known: dict) -> None:
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        path = os.path.join(cache_dir(), COSTS_FILE)
        with open(path + ".tmp", "w") as f:
            json.dump(known, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass                            # an unwritable cache only loses the estimate


def compile_extras(*results) -> dict[str, Any]:
    """`{"compile": report}` for a Reconstruction's extras, the reports of several engine runs summed (the first
    run's reason and estimate, with every run's distinct reason under `reasons`); nothing when compiling was
    off, so an eager run's metrics.json is what it was before the option existed."""
    reports = [r.extra["compile"] for r in results if "compile" in r.extra]
    if not reports or all(r["mode"] == "off" for r in reports):
        return {}
    total = dict(reports[0])
    for r in reports[1:]:
        for k in ("compiles", "recompiles", "graph_breaks"):
            total[k] += r[k]
        total["compile_seconds"] = round(total["compile_seconds"] + r["compile_seconds"], 3)
        total["compiled"] = total["compiled"] or r["compiled"]
    if len(reports) > 1:                # every run decides for itself (UnSplit: one per target): each reason kept
        total["runs"] = len(reports)
        total["runs_compiled"] = sum(bool(r["compiled"]) for r in reports)
        total["reasons"] = list(dict.fromkeys(r["reason"] for r in reports))
    return {"compile": total}

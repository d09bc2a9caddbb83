"""Run directories: every command leaves `config.json`, `metrics.json`, images and `run.log` behind.

Writes are atomic (temporary file in the same directory, then `os.replace`), so an interrupted run
never leaves a half-written `metrics.json` or checkpoint. Nothing here creates a directory before
the caller has validated its inputs: build the config first, then `Run.create`, which refuses a
directory that holds another run's files (unless told to overwrite) or that a live run holds.

Every run directory holds a marker, `.splitlab-run.json`: the run's id and the name of every file the
run wrote (each name handed out by `Run.file` is recorded before the file is written). `--overwrite`
removes exactly those files and only when nothing else is there, so no user's file is ever deleted.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import fcntl
import functools
import io
import json
import math
import os
import platform
import re
import subprocess
import sys
import uuid
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from vfl.errors import SplitlabError
from vfl.runtime import cuda_provenance
from vfl.files import read_bounded
from vfl.filesystem import check_out_dir
from vfl.native_output import capture_native_output, release_native_output
from vfl.preflight import inputs_checked

METRIC_KEYS = (
    "accuracy", "image_mse", "image_mse_minmax", "activation_mse", "psnr", "ssim",
    "lpips", "fid", "label_accuracy", "seconds",
)
"""Metric names shared across the lab; commands use these keys for the same quantities."""


def to_jsonable(value: Any) -> Any:
    """Plain JSON types only; non-finite floats become null (a NaN is never written as a result)."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return to_jsonable(value.detach().cpu().tolist())
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (Path, torch.device, torch.dtype)):
        return str(value)
    return value


def dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, allow_nan=False, sort_keys=False)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:                       # name the file being written, not its temporary twin
        if exc.filename not in (None, str(tmp), tmp):
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_torch_save(obj: Any, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


CORE_PACKAGES = ("torch", "torchvision", "numpy", "scipy", "scikit-image", "matplotlib", "typer", "rich",
                 "lpips", "pytorch-fid", "mlxtend", "autodp")
OPTIONAL_PACKAGES = ("ray", "optuna", "scikit-learn")
"""Distributions whose versions every run records (the optional ones only when installed)."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    versions = {name: _version(name) for name in CORE_PACKAGES}
    versions["torch"] = torch.__version__         # with its build tag (+cu130, +cpu), which metadata drops
    versions.update({name: v for name in OPTIONAL_PACKAGES if (v := _version(name)) is not None})
    return versions


@functools.lru_cache(maxsize=1)
def git_state() -> dict[str, Any] | None:
    """Commit and dirtiness of the checkout this package runs from, or None (installed copy, no git).

    Only the checkout whose top level holds this package counts: an installed copy inside some other
    repository (a venv under a project) must not report that repository's commit."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != root:
            return None
        return {"commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    """Versions, code and hardware, stored with every run so a number can be traced to where it came from."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "splitlab": _version("splitlab"),
        "packages": package_versions(),
        "git": git_state(),
        "cpu_threads": torch.get_num_threads(),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cuda": cuda_provenance(),
    }


def default_run_dir(command: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / command.replace(" ", "-") / f"{stamp}-{uuid.uuid4().hex[:6]}"


LOCK_NAME = ".lock"
"""Held (flock) by the live run; left behind when it ends, since deleting a lock file races with a
process that has just opened it."""


def _acquire(path: Path) -> tuple[int, bool]:
    """Open and exclusively lock `path/.lock` without waiting; (fd, whether this call created the file)."""
    lock = path / LOCK_NAME
    try:
        try:
            fd, created = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            fd, created = os.open(lock, os.O_RDWR), False
    except OSError as exc:
        raise SplitlabError(f"run directory {path} is not writable ({exc.strerror}); "
                            "pass --out a writable place") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise SplitlabError(f"run directory {path} is in use by another run (pid {holder}); "
                            "wait for it to finish or pass another --out") from None
    return fd, created


RECORD_BYTES = 64 << 20
"""The bound on a run's own JSON records read back (marker, config.json): far above any the lab writes."""
def _write_pid(fd: int, path: Path) -> None:
    """Say in the held lock which process runs in `path` (a full disk names the lock file)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise OSError(exc.errno, exc.strerror, str(path / LOCK_NAME)) from None


MARKER_NAME = ".splitlab-run.json"
MARKER_FORMAT = "splitlab-run/1"


def _read_marker(path: Path) -> dict[str, Any] | None:
    """The marker of run directory `path`, or None when there is none or it is not one splitlab wrote."""
    try:
        marker = json.loads(read_bounded(path / MARKER_NAME, limit=RECORD_BYTES, what="run marker"))
    except (SplitlabError, ValueError):
        return None
    if (not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT or not isinstance(marker.get("files"), list)
            or not all(isinstance(name, str) for name in marker["files"])):
        return None
    return marker


def _is_leftover(name: str, recorded: set[str]) -> bool:
    """A temporary file `atomic_write_bytes` leaves when a run is killed mid-write of a recorded file."""
    head, _, tail = name.rpartition("/")
    match = re.fullmatch(r"\.(.+)\.[0-9a-f]{8}\.tmp", tail)
    return match is not None and (f"{head}/{match[1]}" if head else match[1]) in recorded | {MARKER_NAME}


def _run_files(path: Path) -> list[Path]:
    """Every entry of run directory `path` (files first, then their folders, deepest first) when all of them
    are the run's own: recorded in its marker, or a sub-run it recorded whose own files are all its own.
    Otherwise a one-line error naming the first entry splitlab did not write; nothing is removed."""
    marker = _read_marker(path)
    if marker is None:
        raise SplitlabError(f"run directory {path} is not empty and was not written by splitlab (no {MARKER_NAME}); "
                            "--overwrite replaces only splitlab's runs, pass another --out")
    recorded = set(marker["files"])
    parents = {name.rsplit("/", i)[0] for name in recorded for i in range(1, name.count("/") + 1)}
    owned: list[Path] = []

    def walk(folder: Path, prefix: str) -> None:
        for entry in sorted(folder.iterdir()):
            name = prefix + entry.name
            if entry.is_dir() and not entry.is_symlink():
                if name in recorded and (entry / MARKER_NAME).is_file():
                    owned.extend(_run_files(entry))          # a sub-run: its own marker says what it wrote
                    owned.append(entry)
                    continue
                if name in parents or name in recorded:
                    walk(entry, name + "/")
                    owned.append(entry)
                    continue
            elif name in recorded or name in (LOCK_NAME, MARKER_NAME) or _is_leftover(name, recorded):
                owned.append(entry)
                continue
            raise SplitlabError(f"run directory {path} holds {entry}, which splitlab did not write; --overwrite "
                                "replaces only what a run wrote: move that file away or pass another --out")

    walk(path, "")
    return owned


def _empty(path: Path) -> None:
    """Remove what the previous run in `path` wrote (all of it, or nothing), but the lock; symlinks are
    removed, never followed."""
    for entry in _run_files(path):
        if entry == path / LOCK_NAME:
            continue
        if entry.is_dir() and not entry.is_symlink():
            entry.rmdir()                                    # emptied above: files come before their folder
        else:
            entry.unlink()


_OPEN_RUNS: contextvars.ContextVar[list | None] = contextvars.ContextVar("splitlab_open_runs", default=None)


@contextlib.contextmanager
def closing_runs() -> Iterator[list["Run"]]:
    """Close (unlock) every run created inside the block when it ends, however it ends: a command run in
    process (tests, sweeps, notebooks) never leaves a directory locked behind it. Yields the list of them."""
    token = _OPEN_RUNS.set([])
    try:
        yield _OPEN_RUNS.get()
    finally:
        for run in _OPEN_RUNS.get():
            run.close()
        _OPEN_RUNS.reset(token)


class Run:
    """One run directory. Create it (`Run.create`) only after the inputs were validated.

    A created run holds an exclusive lock on its directory until `close()` (or the end of a `with`
    block, or of the process), so two runs never write into one directory."""

    def __init__(self, path: Path, command: str, _lock_fd: int | None = None):
        self.path = Path(path)
        self.command = command
        self._lock_fd = _lock_fd
        self.id: str | None = None
        self._written: list[str] | None = None     # names recorded in the marker (a created run only)
        self.path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def create(cls, command: str, config: dict[str, Any], out: Path | None = None, *,
               overwrite: bool = False) -> "Run":
        """Make (or take) the directory, lock it and write `config.json`.

        An existing non-empty directory is refused and left as it was, unless `overwrite`, which removes
        the previous run's files first (a directory never mixes two runs' files); a directory holding
        anything a run did not write is refused even then. A directory another live run holds is
        refused either way; the lock is checked first so that is what the error says."""
        path = Path(out) if out is not None else default_run_dir(command)
        check_out_dir(path)
        inputs_checked()                     # a command only being checked (a sweep's cell) stops here
        fresh = not path.exists()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SplitlabError(f"cannot create run directory {path} ({exc.strerror}); "
                                "pass --out a writable place") from None
        fd, created = _acquire(path)
        try:
            if any(entry.name != LOCK_NAME for entry in path.iterdir()):
                if not overwrite:
                    raise SplitlabError(f"run directory {path} is not empty; pass another --out, "
                                        "or --overwrite to replace what is there")
                _empty(path)
        except BaseException:
            if created:                      # leave a refused directory exactly as it was
                (path / LOCK_NAME).unlink(missing_ok=True)
            os.close(fd)
            raise
        _write_pid(fd, path)
        run = cls(path, command, fd)
        run.id, run._written, run._fresh = uuid.uuid4().hex, [], fresh
        run._write_marker()
        run.write_json("config.json", {
            "command": command,
            "argv": list(sys.argv),
            "created": _dt.datetime.now().isoformat(timespec="seconds"),
            "config": config,
            "environment": environment(),
        })
        run.log(f"{command}: run directory {run.path}")
        capture_native_output(run.path / "run.log", run)      # torch's C++ output: into run.log
        if _OPEN_RUNS.get() is not None:
            _OPEN_RUNS.get().append(run)
        return run

    def close(self) -> None:
        """Release the directory's lock (idempotent), and the terminal's stderr if the run held it."""
        release_native_output(self)
        if self._lock_fd is not None:
            os.close(self._lock_fd)       # closing the descriptor drops the flock
            self._lock_fd = None

    def discard(self) -> None:
        """Remove every file this run wrote, and its directory when this run made it (a refused result is no run)."""
        if self._written is None or getattr(self, "_reopened", False):     # a reopened run keeps what it had
            return
        for name in [*reversed(self._written or []), MARKER_NAME, LOCK_NAME]:
            if not (self.path / name).is_dir() or (self.path / name).is_symlink():    # a sub-run stays
                (self.path / name).unlink(missing_ok=True)
        self.close()
        if getattr(self, "_fresh", False):
            with contextlib.suppress(OSError):
                self.path.rmdir()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lock_fd", None) is not None:
            self.close()

    def _write_marker(self) -> None:
        atomic_write_text(self.path / MARKER_NAME, json.dumps(
            {"format": MARKER_FORMAT, "id": self.id, "command": self.command, "files": self._written}, indent=1) + "\n")

    def file(self, name: str) -> Path:
        """The path of `name` in the run directory, recorded in the marker as the run's own (before the
        caller writes it, so a run killed mid-write still owns the file)."""
        if self._written is not None and name not in self._written:
            self._written.append(name)
            self._write_marker()
        return self.path / name

    def log(self, message: str) -> None:
        stamp = _dt.datetime.now().isoformat(timespec="seconds")
        with open(self.file("run.log"), "a") as fh:
            fh.write(f"{stamp} {message}\n")

    def write_json(self, name: str, obj: Any) -> Path:
        path = self.file(name)
        atomic_write_text(path, dumps(obj) + "\n")
        return path

    def write_metrics(self, metrics: dict[str, Any]) -> Path:
        return self.write_json("metrics.json", metrics)

    def save_figure(self, name: str, figure) -> Path:
        """Save a matplotlib figure atomically as PNG and close it."""
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
        plt.close(figure)
        path = self.file(name)
        atomic_write_bytes(path, buffer.getvalue())
        return path

    def record(self, metrics: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """The result record a command prints with `--json`."""
        return to_jsonable({"command": self.command, "run_dir": str(self.path), "metrics": metrics, **extra})

    @classmethod
    def reopen(cls, command: str, out: Path | None) -> "Run":
        """Take back the run directory `out` of an earlier `command` to continue it (`--resume`): lock it and
        keep its files. Refused when it is not such a run, or another live run holds it."""
        if out is None:
            raise SplitlabError("--resume needs --out: the run directory to continue")
        path = Path(out)
        try:
            recorded = json.loads((path / "config.json").read_text()).get("command")
        except (OSError, ValueError, AttributeError):
            raise SplitlabError(f"--resume: {path} is not a run directory (no readable config.json); pass the "
                                f"--out of the {command} run to continue") from None
        if recorded != command:
            raise SplitlabError(f"--resume: {path} holds a {recorded!r} run, not a {command!r} one; pass the "
                                f"--out of the {command} run to continue")
        inputs_checked()
        fd, _ = _acquire(path)
        _write_pid(fd, path)
        run = cls(path, command, fd)
        marker = _read_marker(path)
        if marker is not None:                  # it goes on recording what it writes, so --overwrite replaces it
            run.id, run._written, run._reopened = marker.get("id"), list(marker["files"]), True
        run.log(f"{command}: resumed in {run.path}")
        capture_native_output(run.path / "run.log", run)
        if _OPEN_RUNS.get() is not None:
            _OPEN_RUNS.get().append(run)
        return run

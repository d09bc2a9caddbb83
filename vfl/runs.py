"""Run directories: every command leaves `config.json`, `metrics.json`, images and `run.log` behind.

Writes are atomic (temporary file in the same directory, then `os.replace`), so an interrupted run
never leaves a half-written `metrics.json` or checkpoint. Nothing here creates a directory before
the caller has validated its inputs: build the config first, then `Run.create`.
"""
from __future__ import annotations

import datetime as _dt
import io
import json
import math
import os
import platform
import sys
import uuid
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

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
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_torch_save(obj: Any, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def environment() -> dict[str, Any]:
    """Versions and hardware, stored with every run so a number can be traced to where it came from."""
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "splitlab": version("splitlab"),
        "torch": torch.__version__,
        "torchvision": version("torchvision"),
        "numpy": np.__version__,
        "cpu_threads": torch.get_num_threads(),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    return env


def default_run_dir(command: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / command.replace(" ", "-") / f"{stamp}-{uuid.uuid4().hex[:6]}"


class Run:
    """One run directory. Create it only after the inputs were validated."""

    def __init__(self, path: Path, command: str):
        self.path = Path(path)
        self.command = command
        self.path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def create(cls, command: str, config: dict[str, Any], out: Path | None = None, *, overwrite: bool = False) -> "Run":
        """Make the directory and write `config.json` (resolved config plus environment)."""
        run = cls(Path(out) if out is not None else default_run_dir(command), command)
        run.write_json("config.json", {
            "command": command,
            "created": _dt.datetime.now().isoformat(timespec="seconds"),
            "config": config,
            "environment": environment(),
        })
        run.log(f"{command}: run directory {run.path}")
        return run

    def file(self, name: str) -> Path:
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

"""Device choice and seeding, kept in one place so every command resolves them the same way."""
from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import threading
import time
import zlib
from typing import Callable, Iterable, Iterator

import numpy as np
import torch

from vfl.errors import SplitlabError


_DEVICES = "use auto, cpu or cuda[:N]"


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` picks CUDA when present, else the CPU; otherwise `cpu` or `cuda[:N]` with that GPU present.

    torch accepts many more names (meta, mps, xla, cpu:3, cuda:99) that fail later or silently compute
    nothing (meta); they are refused here, before anything is loaded or written."""
    text = str(name).strip().lower()
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        raise SplitlabError(f"unknown device {name!r}; {_DEVICES}") from None
    if device.type == "cpu" and device.index in (None, 0):
        return torch.device("cpu")
    if device.type != "cuda":
        raise SplitlabError(f"device {name!r} cannot run the lab; {_DEVICES}")
    if not torch.cuda.is_available():
        raise SplitlabError(f"device {name!r} asked for but CUDA is not available here; use --device cpu or auto")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise SplitlabError(f"device {name!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}; "
                            f"{_DEVICES}")
    return device


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the body (building a model: torch initialises weights from its global stream) with the CPU
    stream seeded to `seed`, and restore the caller's stream afterwards: library code never leaves
    the global generator changed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def stream_seed(seed: int, stream: str, index: int = 0) -> int:
    """A seed of its own for one named random stream (and item `index` of it), derived from `seed`: the
    streams are independent of each other and of anything seeded with `seed` itself. The attacks draw
    from such streams, so an attacker never starts from the victim's initialisation by sharing a seed."""
    return int(np.random.SeedSequence([seed, zlib.crc32(stream.encode()), index]).generate_state(1)[0])


def generator(seed: int) -> torch.Generator:
    """A CPU generator of its own (data order, noise draws) seeded with `seed`."""
    return torch.Generator().manual_seed(seed)


def adam(params: Iterable[torch.Tensor], lr: float, *, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
         amsgrad: bool = False, fused: bool = True) -> torch.optim.Adam:
    """The lab's one Adam. Fused by default: the same update in one kernel, several times faster than
    torch's per-tensor loop on CPU and GPU."""
    return torch.optim.Adam(list(params), lr=lr, betas=betas, eps=eps, amsgrad=amsgrad, fused=fused)


def wait_for(device: torch.device) -> None:
    """Block until the device has run its queued work: CUDA kernels run asynchronously, so a clock read
    without this times only their launch. Nothing to wait for on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of one call of `fn`, the device's queued work included."""
    wait_for(device)
    start = time.perf_counter()
    fn()
    wait_for(device)
    return time.perf_counter() - start


def hardware(device: torch.device) -> str:
    """One line naming what a benchmark ran on: the GPU, or the CPU model, cores, torch threads and the
    load average (flagged when other processes share the machine, since timings then mean less)."""
    if device.type == "cuda":
        return (f"GPU {torch.cuda.get_device_name(device)} (torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"driver {driver_version() or 'unknown'})")
    model = platform.processor() or "CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        busy = os.getloadavg()[0]
        load = f", load average {busy:.1f}" + (" (shared with other processes)" if busy > 1.5 else "")
    return (f"CPU {model}, {os.cpu_count()} logical cores, {torch.get_num_threads()} torch threads "
            f"(torch {torch.__version__}){load}")


def driver_version() -> str | None:
    """The NVIDIA driver's version ("580.159.04"), or None where none answers: from NVML (the nvidia-ml-py
    package) when it is installed, else from `nvidia-smi`. torch reports the CUDA version it was built with,
    not the driver's."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:                       # noqa: BLE001 - no NVML (not installed, no driver): try nvidia-smi
        pass
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines and lines[0].strip() else None


def cuda_provenance() -> dict | None:
    """What a number measured on the GPU ran on (None without CUDA): the current GPU's name, compute
    capability and memory, the CUDA version torch was built with, cuDNN's, the driver's, and the GPU count."""
    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"device": f"cuda:{index}", "name": torch.cuda.get_device_name(index),
            "capability": f"{props.major}.{props.minor}", "memory_gib": round(props.total_memory / 2 ** 30, 1),
            "cuda": torch.version.cuda, "cudnn": cudnn, "driver": driver_version(),
            "count": torch.cuda.device_count()}


class Uninterrupted:
    """`with UNINTERRUPTED:` a block that a Ctrl-C or `kill` must not cut in two (a frame's bytes and the count of
    what was written): under `terminate_as_interrupt` the interrupt waits for the block's end. Blocks never wait
    on a peer inside, so the wait is microseconds. Counted in the main thread only, where signal handlers run."""
    depth = 0
    pending = False

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():    # where signal handlers run
            Uninterrupted.depth += 1

    def __exit__(self, *exc) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        Uninterrupted.depth -= 1
        if Uninterrupted.pending and not Uninterrupted.depth:
            Uninterrupted.pending = False
            raise KeyboardInterrupt


UNINTERRUPTED = Uninterrupted()


@contextlib.contextmanager
def terminate_as_interrupt():
    """`kill PID` stops a run as Ctrl-C does: an attack still writes what it reached, a wire program tells its
    peers and keeps its saved epochs. Either waits for an `UNINTERRUPTED` block to end.

    Only the first: it puts the handler from before any of these blocks back (nested in another, as a command's
    inside the lab's entry point, the outer one's first), so a second `kill` or Ctrl-C ends a run that hangs
    while writing. A Ctrl-C the process ignores (started in the background) stays ignored.
    """
    current = signal.getsignal(signal.SIGINT)
    watched = [signal.SIGTERM] + ([signal.SIGINT] if current is signal.default_int_handler
                                  or getattr(current, "original", None) is not None else [])
    previous: dict[int, object] = {}
    original: dict[int, object] = {}

    def interrupt(signum, frame):
        signal.signal(signum, original[signum])
        if Uninterrupted.depth:
            Uninterrupted.pending = True
            return
        raise KeyboardInterrupt
    interrupt.original = original
    try:
        for signum in watched:
            previous[signum] = signal.signal(signum, interrupt)
            outer = getattr(previous[signum], "original", None)
            original[signum] = outer[signum] if outer is not None and signum in outer else previous[signum]
    except ValueError:                      # not the main thread (an embedding app): leave signals alone
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

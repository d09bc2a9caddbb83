"""The Ray executor: each cell a Ray task, at most `--concurrency` in flight. Ray is imported only here.

Without `--address` the sweep always starts its own private local Ray instance
(`ray.init(address="local")`), whatever cluster runs on the machine, was left behind by a kill, or
is named by RAY_ADDRESS; it shuts that instance down at the end.

With `--address HOST:PORT` it joins that cluster. Joining must finish within `JOIN_TIMEOUT_S`: the
head's port must accept a connection and answer as a gRPC (HTTP/2) server within
`CONNECT_TIMEOUT_S`, then `ray.init` must return. Otherwise the sweep stops with one line and exit
code 2, before anything is written.
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import select
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from splitlab.sweep_cells import last_line, lost_record, run_cell
from splitlab.sweep_file import Cell
from vfl.errors import SplitlabError

RAY_HINT = "ray is not installed; install it with: pip install 'ray>=2.9'"
CONNECT_TIMEOUT_S = 5.0
JOIN_TIMEOUT_S = 30.0
# An HTTP/2 client's opening (the preface and an empty SETTINGS frame): a gRPC server answers with its
# own SETTINGS frame, anything else (an HTTP/1 dashboard, ssh, a closed socket) does not.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


def import_ray(address: Optional[str]):
    """Import ray (a one-line install hint if missing) with the environment it reads at import."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
            (Path.home() / ".ray" / "auth_token").is_file()
        if token and "RAY_AUTH_MODE" not in os.environ:  # as `ray start` does when a token is there
            os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
    except ImportError:
        raise SplitlabError(RAY_HINT) from None
    return ray


def parse_address(address: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) of a Ray head, or a one-line error."""
    if "://" in address or address in ("auto", "local"):
        raise SplitlabError(f"--address {address!r}: give the Ray head's HOST:PORT (`ray start --head --port`, "
                            "6379 by default); without --address the sweep starts its own local Ray instance")
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SplitlabError(f"--address {address!r} is not HOST:PORT (for example 10.0.0.5:6379)")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise SplitlabError(f"--address {address!r}: write an IPv6 host in brackets, like [::1]:6379") from None
    return host, int(port)


def probe_head(address: str) -> None:
    """The head's port accepts a connection and answers as gRPC within CONNECT_TIMEOUT_S."""
    host, port = parse_address(address)
    reason = None
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return                                   # a TLS head expects a TLS hello first
            conn.sendall(_H2_HELLO)
            answer = b""
            while len(answer) < 9:
                chunk = conn.recv(9 - len(answer))
                if not chunk:
                    break
                answer += chunk
    except TimeoutError:
        reason = f"no answer within {CONNECT_TIMEOUT_S:g} s"
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
    else:
        if len(answer) < 9 or answer[3] != _H2_SETTINGS:
            raise SplitlabError(f"--address {address} is not a Ray head (it does not answer as gRPC); give the "
                                "port given to `ray start --head --port` (6379 by default)")
    if reason is not None:
        raise SplitlabError(f"cannot reach a Ray head at --address {address} ({reason}); start one with "
                            "`ray start --head` or drop --address to run on a local instance")


def _ray_log_line(text: str) -> str:
    """The last line Ray's C++ client logged, without its timestamp and source prefix."""
    return re.sub(r"^\[[^]]*\]\s*\S+:\d+:\s*", "", last_line(text))


@contextlib.contextmanager
def _bounded_and_quiet(seconds: float, message: str) -> Iterator[Callable[[], str]]:
    """Run the block with file descriptor 2 captured (Ray's C++ client logs every failed attempt there;
    the sweep says one line instead); end the process with `error: MESSAGE` (exit 2) unless the block
    finishes within `seconds`, and at once on Ctrl-C or SIGTERM (exit 130). Yields a function giving
    the last line Ray logged.

    `ray.init` can block inside that C++ client for minutes, where neither an exception nor a Python
    signal handler reaches it: a watcher thread waits on the deadline and on the signal wake-up
    socket instead. The join happens before the sweep writes anything, so ending the process leaves
    no trace."""
    sys.stderr.flush()
    saved = os.dup(2)
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 2)
    wake_r, wake_w = socket.socketpair()
    wake_w.setblocking(False)
    try:
        previous_wake = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    except ValueError:                                   # not the main thread: no signal reaches us anyway
        previous_wake = None
    done = threading.Event()

    def logged() -> str:
        return _ray_log_line(os.pread(log.fileno(), os.fstat(log.fileno()).st_size, 0).decode(errors="replace"))

    def watch() -> None:
        deadline = time.monotonic() + seconds
        while not done.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                said = logged()
                os.write(saved, f"error: {message}{f' (Ray: {said})' if said else ''}\n".encode())
                os._exit(2)
            if select.select([wake_r], [], [], min(left, 0.2))[0]:
                if {signal.SIGINT, signal.SIGTERM} & set(wake_r.recv(64)):
                    os.write(saved, b"interrupted while joining the Ray cluster; nothing was written\n")
                    os._exit(130)

    watcher = threading.Thread(target=watch, name="ray-join-deadline", daemon=True)
    watcher.start()
    try:
        yield logged
    finally:
        done.set()
        watcher.join()
        if previous_wake is not None:
            signal.set_wakeup_fd(previous_wake)
        wake_r.close()
        wake_w.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        log.close()


@dataclass
class RayPlan:
    ray: Any                                             # the imported module
    concurrency: int
    threads: int
    cpus: int
    nodes: list[str]
    inherited_threads: Optional[int] = None
    """OMP_NUM_THREADS the local instance's workers inherited at start (None: a joined cluster's)."""


def _join(address: str, common: dict):
    """Import ray and join the cluster at `address`, all within JOIN_TIMEOUT_S."""
    with _bounded_and_quiet(JOIN_TIMEOUT_S, f"could not join the Ray cluster at --address {address} within "
                            f"{JOIN_TIMEOUT_S:g} s; check that it is a running Ray head this machine can "
                            "reach") as logged:
        probe_head(address)
        ray = import_ray(address)
        try:
            ray.init(address=address, **common)
        except Exception as exc:                         # noqa: BLE001 - cannot join the cluster
            said = logged()
            hint = ("; the cluster uses token authentication: give its token in RAY_AUTH_TOKEN or ~/.ray/auth_token"
                    if "auth" in f"{exc} {said}".lower() else "")
            raise SplitlabError(f"cannot join the Ray cluster at {address}: {type(exc).__name__}"
                                f"{f' (Ray: {said})' if said else ''}{hint}") from None
    return ray


def _start_local(concurrency: Optional[int], threads: Optional[int], common: dict):
    """Import ray and start a new private instance with this machine's CPUs; RAY_ADDRESS is hidden too,
    so none of its processes points elsewhere. Returns ray and the OMP_NUM_THREADS its workers inherit."""
    ray = import_ray(None)
    local = os.cpu_count() or 1
    inherited = threads or max(1, local // (concurrency or local))
    # Workers inherit the driver's environment: with OMP_NUM_THREADS set here the tasks need no
    # runtime_env, and Ray's pre-started workers serve them instead of new ones (~1.4 s saved).
    saved = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "RAY_ADDRESS")}
    os.environ["OMP_NUM_THREADS"] = str(inherited)
    os.environ.pop("RAY_ADDRESS", None)
    try:
        ray.init(address="local", num_cpus=local, include_dashboard=False, **common)
    except Exception as exc:                             # noqa: BLE001 - Ray could not start here
        stop_ray()
        raise SplitlabError(f"could not start a local Ray instance ({type(exc).__name__}: "
                            f"{last_line(str(exc))}); run with --executor local") from None
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return ray, inherited


def start_ray(address: Optional[str], concurrency: Optional[int], threads: Optional[int]) -> RayPlan:
    """Start a private local Ray instance (or join `address`); resolve concurrency and threads per task."""
    import logging

    common = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address:
        ray = _join(address, common)
        inherited = None
    else:
        ray, inherited = _start_local(concurrency, threads, common)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    cpus = int(sum(n.get("Resources", {}).get("CPU", 0) for n in alive)) or 1
    node_max = int(max((n.get("Resources", {}).get("CPU", 0) for n in alive), default=1)) or 1
    concurrency = concurrency or cpus
    threads = threads or max(1, cpus // concurrency)
    if threads > node_max:
        stop_ray()
        raise SplitlabError(f"--threads {threads} is more than the largest Ray node's {node_max} CPUs")
    return RayPlan(ray, concurrency, threads, cpus, [n["NodeID"] for n in alive], inherited)


def stop_ray() -> None:
    """Shut the sweep's private instance down (its processes end) or leave the joined cluster; safe to
    repeat, and a no-op when Ray was never imported."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        with contextlib.suppress(Exception):
            ray.shutdown()


def run_ray(plan: RayPlan, pending: list[tuple[Cell, Path]], display) -> None:
    """At most `plan.concurrency` cells in flight, each a Ray task with `plan.threads` CPUs and threads."""
    ray = plan.ray
    env = {} if plan.inherited_threads == plan.threads else \
        {"runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(plan.threads)}}}
    task = ray.remote(_ray_task).options(num_cpus=plan.threads, max_retries=0, **env)
    queue, inflight = list(pending), {}
    try:
        while queue or inflight:
            while queue and len(inflight) < plan.concurrency:
                cell, cell_dir = queue.pop(0)
                inflight[task.remote(cell, str(cell_dir), plan.threads)] = (cell, cell_dir)
                display.started(cell)
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                cell, cell_dir = inflight.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as exc:                 # noqa: BLE001 - the worker died (OOM, node lost)
                    record = lost_record(cell, cell_dir, last_line(str(exc)) or type(exc).__name__)
                display.finished(record)
    except BaseException:
        for ref in inflight:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise


def _ray_task(cell: Cell, cell_dir: str, threads: int) -> dict:
    """A Ray task: run the cell on this worker and say where it ran."""
    import ray

    context = ray.get_runtime_context()
    where = {"executor": "ray", "node_id": context.get_node_id(), "worker_id": context.get_worker_id()}
    return run_cell(cell, Path(cell_dir), threads=threads, where=where)

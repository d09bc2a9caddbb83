"""`splitlab sweep` on Ray: its own private local instance whatever cluster runs (or was killed) on the
machine, joining a cluster with --address, a bounded join, and no Ray process left behind.

Clusters here are started with `ray start --block` in a session of their own and ended by killing that
session (`ray stop` would end every Ray process of this user on the machine)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitlab.cli import app
from splitlab.sweep_ray import JOIN_TIMEOUT_S

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("one_thread")]

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
RAY_BIN = Path(sys.executable).with_name("ray")
TINY = """
command = "train"
[fixed]
arch = "small-mlp"
epochs = 1
device = "cpu"
[axes]
seed = [0, 1]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    return {**env, **extra}


def _ray_processes(session_pid: int) -> list[str]:
    """Command lines of live Ray processes of the session started by process `session_pid` (its session
    directory is named `session_<time>_<pid>`)."""
    pattern = re.compile(rf"session_[0-9_-]+_{session_pid}(/|\b)")
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z" and pattern.search(cmdline):
                found.append(f"{proc.name} {cmdline[:120]}")
    return found


@contextmanager
def _head(**env):
    """A Ray head on 127.0.0.1 with one CPU; yields (address, the `ray start` process)."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")        # short: Ray's socket paths have a length limit
    head = subprocess.Popen([str(RAY_BIN), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                             "--num-cpus=1", "--block", "--include-dashboard=false", f"--temp-dir={temp}",
                             "--disable-usage-stats"], env=_env(**env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:                  # the GCS accepts connections
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert head.poll() is None, "ray start --head exited"
            time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not come up within 90 s")
        yield f"127.0.0.1:{port}", head
    finally:
        _signal_session(head.pid, signal.SIGTERM)           # the session we started, nothing else
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        _signal_session(head.pid, signal.SIGKILL)           # whatever of it is left
        shutil.rmtree(temp, ignore_errors=True)


def _signal_session(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def _cluster_nodes(address: str, **env) -> set[str]:
    code = ("import ray, json; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
            "print(json.dumps([n['NodeID'] for n in ray.nodes() if n['Alive']])); ray.shutdown()" % address)
    done = subprocess.run([sys.executable, "-c", code], env=_env(**env), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _sweep_process(grid: Path, out: Path, *args: str, **env) -> tuple[subprocess.CompletedProcess, int]:
    """Run a sweep in its own process; returns the result and the process id (its Ray session's name)."""
    command = [sys.executable, "-m", "splitlab", "sweep", str(grid), "--out", str(out), "--no-progress", "--json",
               *args]
    with subprocess.Popen(command, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr), proc.pid


def _results(out: Path) -> dict:
    """Per cell: status, swept values and metrics, timings left out."""
    cells = {}
    for path in (out / "cells").glob("*/cell.json"):
        record = json.loads(path.read_text())
        metrics = json.loads((path.parent / "metrics.json").read_text())
        cells[record["cell"]] = (record["status"], record["swept"],
                                 {k: v for k, v in metrics.items() if "second" not in k})
    return cells


def _nodes_of(out: Path) -> set[str]:
    return {json.loads(p.read_text())["where"]["node_id"] for p in (out / "cells").glob("*/cell.json")}


@pytest.mark.slow(seconds=160)
def test_without_address_a_sweep_runs_on_its_own_instance_whatever_cluster_runs_or_was_killed(tmp_path):
    grid = tmp_path / "tiny.toml"
    grid.write_text(TINY)
    alone, alone_pid = _sweep_process(grid, tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr[-2000:]
    expected = _results(tmp_path / "alone")
    assert len(expected) == 2 and {s for s, _, _ in expected.values()} == {"ok"}
    pids = [alone_pid]

    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex}     # the cluster's own, not the sweeps'
    with _head(**token) as (address, head):
        assert _ray_processes(head.pid)                      # the session check sees a live cluster's processes
        # RAY_ADDRESS (or /tmp/ray/ray_current_cluster) makes a plain ray.init() join this cluster
        beside, pid = _sweep_process(grid, tmp_path / "beside", RAY_ADDRESS=address)
        pids.append(pid)
        assert beside.returncode == 0, beside.stderr[-2000:]
        assert _results(tmp_path / "beside") == expected
        cluster = _cluster_nodes(address, **token)
        assert len(cluster) == 1 and not (_nodes_of(tmp_path / "beside") & cluster)   # not on the cluster
        assert head.poll() is None and _ray_processes(head.pid)                      # which is still up
        _signal_session(head.pid, signal.SIGKILL)            # the cluster dies; its address stays behind
        head.wait(timeout=30)
        after_kill, pid = _sweep_process(grid, tmp_path / "after-kill", RAY_ADDRESS=address)
        pids.append(pid)
        assert after_kill.returncode == 0, after_kill.stderr[-2000:]
        assert _results(tmp_path / "after-kill") == expected
    assert all(json.loads(run.stdout)["ok"] == 2 for run in (alone, beside, after_kill))
    time.sleep(1.0)                                          # a killed process leaves /proc a moment later
    assert [_ray_processes(pid) for pid in pids] == [[], [], []]   # each sweep shut its own instance down


@pytest.mark.slow(seconds=30)
def test_address_runs_cells_on_an_existing_ray_cluster(tmp_path, monkeypatch):
    # this cluster's own token, in the environment before ray is imported (it reads the mode then)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", uuid.uuid4().hex)
    ray = pytest.importorskip("ray")
    with _head() as (address, _):                           # started with the token of this environment
        out = tmp_path / "out"
        grid = tmp_path / "tiny.toml"
        grid.write_text(TINY)
        result = runner.invoke(app, ["sweep", str(grid), "--address", address, "--concurrency", "1", "--out",
                                     str(out), "--no-progress"])
        assert result.exit_code == 0, result.output
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        try:
            cluster_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        finally:
            ray.shutdown()
        records = [json.loads(p.read_text()) for p in (out / "cells").glob("*/cell.json")]
        assert len(records) == 2 and {r["status"] for r in records} == {"ok"}
        assert {r["where"]["node_id"] for r in records} <= cluster_nodes and len(cluster_nodes) == 1
        assert all(r["where"]["executor"] == "ray" and r["where"]["pid"] != os.getpid() for r in records)
        assert all(r["torch_threads"] == 1 and r["omp_num_threads"] == "1" for r in records)
        assert json.loads((out / "sweep.json").read_text())["address"] == address


class _FakeGrpcHead:
    """Answers every connection with an HTTP/2 SETTINGS frame, then never a reply: a port that passes
    the sweep's probe while Ray's client waits on it for minutes."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.clients = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.clients.append(conn)
            conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

    def close(self):
        self.server.close()
        for conn in self.clients:
            conn.close()


@pytest.mark.slow(seconds=40)
def test_a_join_that_does_not_finish_in_time_is_one_line_and_writes_nothing(tmp_path):
    grid = tmp_path / "tiny.toml"
    grid.write_text(TINY)
    fake = _FakeGrpcHead()
    try:
        started = time.monotonic()
        done, _ = _sweep_process(grid, tmp_path / "out", "--address", fake.address)
        seconds = time.monotonic() - started
    finally:
        fake.close()
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: could not join the Ray cluster at --address "
                                                   f"{fake.address} within {JOIN_TIMEOUT_S:g} s"), done.stderr
    assert seconds < JOIN_TIMEOUT_S + 30 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_sigterm_while_joining_ends_the_sweep_at_once_and_writes_nothing(tmp_path):
    grid = tmp_path / "tiny.toml"
    grid.write_text(TINY)
    fake = _FakeGrpcHead()
    sweep = subprocess.Popen([sys.executable, "-m", "splitlab", "sweep", str(grid), "--out", str(tmp_path / "out"),
                              "--address", fake.address], env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not fake.clients:                              # the sweep's probe: the join has begun
            assert time.monotonic() < deadline and sweep.poll() is None, "the sweep never began to join"
            time.sleep(0.1)
        time.sleep(3.0)                                      # ray imported, inside ray.init: deaf to Python handlers
        stopped = time.monotonic()
        sweep.send_signal(signal.SIGTERM)
        _, stderr = sweep.communicate(timeout=15)
        seconds = time.monotonic() - stopped
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        fake.close()
    assert sweep.returncode == 130 and seconds < 15, stderr    # not the join's own timeout
    assert len(stderr.strip().splitlines()) == 1 and "nothing was written" in stderr
    assert not (tmp_path / "out").exists()

"""Failures after every check passed: a disk that is full, fills up or turns read-only while a command
writes, a run directory another run holds, a signal, and torch's C++ output. Each ends in one line on
stderr with exit code 2 (130 for a signal), no traceback, no temporary file left, and what the run wrote
kept where it is.

A test cannot fill or remount a disk, so `disk` makes the kernel's answer where the lab would meet it:
`os.fsync` of a file under the faked folder fails as a full (ENOSPC) or read-only (EROFS) disk does, and
`os.access` says a read-only folder is not writable."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitlab.cli import app
from vfl.runs import Run

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
HQ = ["hfl", "--attack", "dlg", "--preset", "dlg.quick", "--restarts", "1", "--iterations", "2"]
TRAIN = ["train", "--arch", "small-mlp", "--epochs", "1"]


class Disk:
    """Fakes a folder's file system: `fail(folder, code, after=name)` makes every write of a file under
    `folder` fail with `code` (only from the first file whose name holds `after` on, when given); a folder
    read-only from the start (EROFS, no `after`) is also not writable to `os.access`."""

    def __init__(self, monkeypatch):
        self.rules: list[tuple[str, int, str | None]] = []
        self.failing: set[str] = set()
        real_fsync, real_access = os.fsync, os.access

        def fsync(fd):
            path = os.readlink(f"/proc/self/fd/{fd}")
            for folder, code, after in self.rules:
                if path.startswith(folder) and (after is None or after in path or folder in self.failing):
                    self.failing.add(folder)
                    raise OSError(code, os.strerror(code))        # as the kernel: no file name
            return real_fsync(fd)

        def access(path, mode, **kwargs):
            if mode & os.W_OK and any(str(path).startswith(f) for f, code, after in self.rules
                                      if code == errno.EROFS and after is None):
                return False
            return real_access(path, mode, **kwargs)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "access", access)

    def fail(self, folder: Path, code: int, after: str | None = None) -> Path:
        self.rules.append((str(folder), code, after))
        return folder


@pytest.fixture
def disk(monkeypatch):
    return Disk(monkeypatch)


def _one_line(result, *parts: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and "Traceback" not in result.output, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(p in lines[0] for p in parts), result.stderr
    return lines[0]


def _no_temporary_files(folder: Path) -> None:
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def _progress_then_one_line(result, *parts: str) -> None:
    """A run-time failure: progress lines (bars, the pace line) may come first; one `error:` line ends it."""
    lines = [line for line in result.stderr.strip().splitlines() if "━" not in line and "at the pace of" not in line]
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(p in lines[0] for p in parts), result.stderr


# --- read-only and full disks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [HQ, ["serve", "--secret-file", "{tmp}/secret"],
                                  ["sweep", "--paper", "jast-table1", "--where", "seed=0", "--where", "arch=mlp",
                                   "--executor", "local", "--no-progress"]], ids=["hfl", "serve", "sweep"])
def test_an_out_on_a_read_only_disk_is_refused_before_anything_is_written(argv, tmp_path, disk):
    (tmp_path / "secret").write_text("0123456789abcdef" * 3 + "\n")
    (tmp_path / "secret").chmod(0o600)              # a secret only its owner can read
    ro = disk.fail(tmp_path / "ro", errno.EROFS)
    (ro / "existing").mkdir(parents=True)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--out", str(ro / "existing")]
    _one_line(runner.invoke(app, argv), "not writable")
    assert list(ro.rglob("*")) == [ro / "existing"]


@pytest.mark.parametrize("argv", [HQ, TRAIN + ["--transport", "tcp"]], ids=["hfl", "train-tcp"])
def test_a_full_disk_ends_the_command_in_one_line(argv, tmp_path, disk):
    full = disk.fail(tmp_path / "full", errno.ENOSPC)
    _one_line(runner.invoke(app, argv + ["--out", str(full / "run")]), "No space left on device",
              str(full / "run"), "free some space or write elsewhere")
    _no_temporary_files(tmp_path)
    assert not (full / "run" / "party-0").exists()              # no client was started


@pytest.mark.parametrize("argv,last", [(HQ, "metrics.json"), (TRAIN, "checkpoint.pt")], ids=["hfl", "train"])
def test_a_disk_that_fills_up_mid_run_keeps_what_the_run_wrote(argv, last, tmp_path, disk):
    full = disk.fail(tmp_path / "full", errno.ENOSPC, after=last)
    result = runner.invoke(app, argv + ["--out", str(full / "run")])
    _progress_then_one_line(result, f"No space left on device ({full / 'run' / last})",
                            f"what the run finished is kept in {full / 'run'}")
    assert json.loads((full / "run" / "config.json").read_text())["command"] == argv[0]
    assert "run directory" in (full / "run" / "run.log").read_text()
    _no_temporary_files(tmp_path)


def test_a_disk_that_turns_read_only_mid_run_ends_in_one_line(tmp_path, disk):
    ro = disk.fail(tmp_path / "disk", errno.EROFS, after="metrics.json")     # writable until the metrics
    _progress_then_one_line(runner.invoke(app, HQ + ["--out", str(ro / "run")]), "Read-only file system",
                            "write to a writable place")


def test_a_sweep_into_a_full_disk_ends_in_one_line(tmp_path, disk):
    grid = tmp_path / "two.toml"
    grid.write_text('command = "train"\n[fixed]\narch = "small-mlp"\nepochs = 1\n[axes]\nseed = [0, 1]\n')
    full = disk.fail(tmp_path / "full", errno.ENOSPC)
    result = runner.invoke(app, ["sweep", str(grid), "--executor", "local", "--no-progress", "--out", str(full / "sw")])
    _one_line(result, f"No space left on device ({full / 'sw' / 'sweep.toml'})")
    _no_temporary_files(tmp_path)


def test_a_run_directory_removed_mid_run_ends_in_one_line(tmp_path, monkeypatch):
    import shutil

    from attacks.hfl import cli as hfl_cli
    real = hfl_cli.execute

    def removing(prepared, run, **kwargs):
        shutil.rmtree(run.path)
        return real(prepared, run, **kwargs)
    monkeypatch.setattr(hfl_cli, "execute", removing)
    _progress_then_one_line(runner.invoke(app, HQ + ["--out", str(tmp_path / "run")]), "No such file or directory")



FULL_IN_CHILD = """import errno, os
_at = os.environ.get("SPLITLAB_TEST_FULL_AT")
if _at:                                     # this process's disk is full for every file whose path starts so
    _fsync = os.fsync
    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(_at):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return _fsync(fd)
    os.fsync = fsync
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["checkpoints/.epoch-0001.pt", ".bottom.pt"], ids=["mid-epoch", "after-session"])
def test_a_full_disk_in_a_tcp_trainings_client_ends_the_training_in_one_line(where, tmp_path, monkeypatch):
    """The feature party is its own process: a write it cannot make (its epoch checkpoint during the session, its
    model after the server said goodbye) fails the training that started it, exit 2 and one line naming the
    file, never an exit 0 without the party's files."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(FULL_IN_CHILD)      # loaded by the client process only
    out = tmp_path / "run"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("SPLITLAB_TEST_FULL_AT", str(out / "party-0" / where))
    result = runner.invoke(app, TRAIN + ["--transport", "tcp", "--json", "--out", str(out)])
    _one_line(result, "party 0", "No space left on device", str(out / "party-0"))
    assert not (out / "metrics.json").exists() and not (out / "checkpoint.pt").exists()


def test_a_failed_command_whose_stderr_is_full_still_exits_2(monkeypatch):
    """stderr redirected to a full disk cannot take the one error line: the exit code still says the command
    failed (2), not an unseen traceback with exit code 1."""
    import io

    import typer

    from vfl.cli_output import handles_errors
    from vfl.errors import SplitlabError

    class FullDisk(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    @handles_errors
    def failing():
        raise SplitlabError("the disk filled up")
    monkeypatch.setattr(sys, "stderr", FullDisk())
    with pytest.raises(typer.Exit) as stopped:
        failing()
    assert stopped.value.exit_code == 2

# --- a run directory in use, a signal -------------------------------------------------------------------------

def test_a_second_tcp_training_into_a_live_runs_directory_is_refused(tmp_path):
    with Run.create("train", {}, tmp_path / "run"):
        result = runner.invoke(app, TRAIN + ["--transport", "tcp", "--epochs", "2", "--out", str(tmp_path / "run")])
        _one_line(result, "is in use by another run", f"(pid {os.getpid()})")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".lock", ".splitlab-run.json", "config.json",
                                                                     "run.log"]


@pytest.mark.slow
def test_sigterm_stops_a_local_sweep_promptly_and_records_no_failed_cell(tmp_path):
    grid = tmp_path / "medium.toml"
    grid.write_text('command = "train"\n[fixed]\narch = "small-mlp"\nepochs = 3\n[axes]\nseed = [0, 1, 2, 3, 4, 5]\n')
    out = tmp_path / "sw"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "splitlab", "sweep", str(grid), "--executor", "local",
                                "--no-progress", "--out", str(out)], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (out / "cells").exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    time.sleep(3)
    process.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and time.monotonic() - stopped < 20 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("interrupted: finished cells are kept")
    records = [json.loads(p.read_text()) for p in out.glob("cells/*/cell.json")]
    assert all(r["status"] == "ok" for r in records)


# --- torch's C++ output -----------------------------------------------------------------------------------------

def test_what_cpp_code_writes_to_stderr_goes_to_run_log(tmp_path, monkeypatch, capfd):
    from attacks.hfl import cli as hfl_cli
    real = hfl_cli.execute

    def noisy(*args, **kwargs):
        os.write(2, b"[W socket.cpp:464] [c10d] The server socket has failed to listen\n")
        return real(*args, **kwargs)
    monkeypatch.setattr(hfl_cli, "execute", noisy)
    result = runner.invoke(app, HQ + ["--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "socket.cpp" not in capfd.readouterr().err
    assert "socket.cpp:464" in (tmp_path / "run" / "run.log").read_text()


@pytest.mark.slow
def test_a_run_time_error_is_one_line_however_much_cpp_code_printed(tmp_path):
    script = ("import os, sys\nfrom attacks.hfl import cli\nfrom vfl.errors import SplitlabError\n"
              "def failing(*args, **kwargs):\n"
              "    for i in range(30):\n        os.write(2, b'[W ProcessGroupGloo.cpp:%d] frame\\n' % i)\n"
              "    raise SplitlabError('the peer went away')\n"
              "cli.execute = failing\nfrom splitlab.cli import main\n"
              f"sys.argv = ['splitlab', *{HQ!r}, '--out', {str(tmp_path / 'run')!r}]\nmain()\n")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == ["error: the peer went away"], done.stderr
    assert (tmp_path / "run" / "run.log").read_text().count("ProcessGroupGloo.cpp") == 30

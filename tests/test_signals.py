"""`kill PID` (SIGTERM) stops every command as Ctrl-C does: one line on stderr saying where what the run finished
is kept, exit code 130, the run directory as the lab leaves it (its config, log and ownership record), never the
signal's own status. Each process is started here, on this machine only, and killed in a `finally`."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "label-norm": ["attack", "label-norm", "--task", "binary", "--positive", "0", "--epochs", "50"],
    "train": ["train", "--arch", "small-mlp", "--epochs", "200"],
}


def default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)          # as a terminal's foreground process has it


@pytest.mark.parametrize("command,signum", [("label-norm", signal.SIGTERM), ("train", signal.SIGTERM),
                                            ("train", signal.SIGINT)], ids=["label-norm-sigterm", "train-sigterm",
                                                                             "train-sigint"])
def test_a_command_stopped_by_a_signal_says_so_in_one_line(tmp_path, command, signum):
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "splitlab", *COMMANDS[command], "--device", "cpu", "--json",
                                "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=default_ctrl_c)
    try:
        deadline = time.monotonic() + 60
        while not (out / "run.log").is_file() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        time.sleep(1.0)                                   # into its work
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    lines = [line for line in err.splitlines() if line.strip() and "━" not in line and "at the pace of" not in line]
    # both stop as Ctrl-C does, and CPython may then end by SIGINT itself after the one line (see test_wire_attacks)
    assert process.returncode in (130, -signal.SIGINT), (process.returncode, err)
    assert lines == [f"error: interrupted; what the run finished is kept in {out}"], err
    assert json.loads((out / "config.json").read_text())["argv"][1:3] == COMMANDS[command][:2]
    assert {".splitlab-run.json", "config.json", "run.log"} <= {p.name for p in out.iterdir()}
    assert not [p for p in out.rglob("*.tmp")]

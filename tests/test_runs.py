import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from vfl.errors import SplitlabError
from vfl.runs import Run, atomic_write_text, to_jsonable


def test_run_writes_config_metrics_and_log(tmp_path):
    run = Run.create("train", {"lr": 1e-3, "device": torch.device("cpu")}, tmp_path / "r")
    run.write_metrics({"accuracy": torch.tensor(0.5), "psnr": math.inf, "lpips": float("nan")})
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["config"] == {"lr": 1e-3, "device": "cpu"}
    assert config["environment"]["packages"]["torch"] == torch.__version__
    assert config["argv"] == sys.argv
    git = config["environment"]["git"]                       # the tests run from a checkout
    assert len(git["commit"]) == 40 and isinstance(git["dirty"], bool)
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics == {"accuracy": 0.5, "psnr": None, "lpips": None}     # non-finite never written
    assert "run directory" in (tmp_path / "r" / "run.log").read_text()


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    atomic_write_text(tmp_path / "a.json", "{}")
    atomic_write_text(tmp_path / "a.json", '{"x": 1}')
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 1}


def test_to_jsonable_handles_tensors_and_arrays():
    import numpy as np
    assert to_jsonable({"t": torch.arange(3), "a": np.float32(2.5), "n": np.int64(4)}) == {
        "t": [0, 1, 2], "a": 2.5, "n": 4}


def test_timed_measures_one_call_and_runs_it_once():
    import time as clock
    from vfl.runtime import timed
    calls = []
    seconds = timed(lambda: (calls.append(1), clock.sleep(0.05)), torch.device("cpu"))
    assert calls == [1] and 0.05 <= seconds < 10      # one 0.05 s call (the bound is loose: the machine may be loaded)


def test_hardware_line_names_the_cpu_threads_and_torch():
    from vfl.runtime import hardware
    line = hardware(torch.device("cpu"))
    assert line.startswith("CPU ") and f"{torch.get_num_threads()} torch threads" in line and torch.__version__ in line



class _FakeProps:
    major, minor, total_memory = 9, 0, 80 * 2 ** 30


def _fake_gpu(monkeypatch, driver="580.159.04"):
    """torch's CUDA queries answering as one H100 would: what a run on a GPU records, checked without one."""
    import vfl.runtime
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=None: _FakeProps())
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91300)
    monkeypatch.setattr(vfl.runtime, "driver_version", lambda: driver)


def test_a_run_on_a_gpu_records_the_gpu_cuda_and_driver_in_its_config(tmp_path, monkeypatch):
    _fake_gpu(monkeypatch)
    Run.create("hfl", {"device": "cuda"}, tmp_path / "r").close()
    environment = json.loads((tmp_path / "r" / "config.json").read_text())["environment"]
    assert environment["cuda_device"] == "NVIDIA H100 80GB HBM3"
    assert environment["cuda"] == {"device": "cuda:0", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0",
                                   "memory_gib": 80.0, "cuda": "13.0", "cudnn": 91300, "driver": "580.159.04",
                                   "count": 1}


def test_a_run_without_cuda_records_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    Run.create("hfl", {}, tmp_path / "r").close()
    environment = json.loads((tmp_path / "r" / "config.json").read_text())["environment"]
    assert environment["cuda"] is None and environment["cuda_device"] is None


def test_the_driver_version_comes_from_nvidia_smi_without_nvml(monkeypatch):
    import builtins
    import subprocess
    import vfl.runtime
    real_import = builtins.__import__

    def no_nvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_nvml)
    monkeypatch.setattr(vfl.runtime.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 0, stdout="580.159.04\n", stderr=""))
    assert vfl.runtime.driver_version() == "580.159.04"

    def missing(argv, **kw):
        raise FileNotFoundError(argv[0])

    monkeypatch.setattr(vfl.runtime.subprocess, "run", missing)
    assert vfl.runtime.driver_version() is None


def test_the_hardware_line_on_a_gpu_names_cuda_and_the_driver(monkeypatch):
    from vfl.runtime import hardware
    _fake_gpu(monkeypatch)
    line = hardware(torch.device("cuda"))
    assert line == f"GPU NVIDIA H100 80GB HBM3 (torch {torch.__version__}, CUDA 13.0, driver 580.159.04)"

def _snapshot(directory):
    """Every file's bytes and mtime, to prove a refused run touched nothing."""
    return {p.relative_to(directory): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_finished_runs_directory_is_refused_and_left_byte_identical(tmp_path):
    with Run.create("train", {"seed": 0}, tmp_path / "r") as run:
        run.write_metrics({"accuracy": 0.9})
    before = _snapshot(tmp_path / "r")
    with pytest.raises(SplitlabError, match="is not empty; pass another --out, or --overwrite"):
        Run.create("train", {"seed": 1}, tmp_path / "r")
    assert _snapshot(tmp_path / "r") == before
    (tmp_path / "mine").mkdir()                              # a folder of someone's files: no lock file left
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(SplitlabError, match="not empty"):
        Run.create("train", {}, tmp_path / "mine")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_overwrite_removes_exactly_what_the_previous_run_wrote(tmp_path):
    with Run.create("train", {"seed": 0}, tmp_path / "r") as run:
        run.write_metrics({"accuracy": 0.9})
        run.file("sub/grid.png").parent.mkdir()
        run.file("sub/grid.png").write_bytes(b"x")
        with Run.create("row", {}, run.file("row-0")) as sub:     # a sub-run (splitlab compare's rows)
            sub.write_metrics({})
        (run.path / ".metrics.json.0123abcd.tmp").write_bytes(b"{")   # left by a write the run was killed in
    marker = json.loads((tmp_path / "r" / ".splitlab-run.json").read_text())
    assert marker["id"] == run.id and len(run.id) == 32
    assert marker["files"] == ["config.json", "run.log", "metrics.json", "sub/grid.png", "row-0"]
    with Run.create("train", {"seed": 1}, tmp_path / "r", overwrite=True) as again:
        names = {p.name for p in (tmp_path / "r").iterdir()}
    assert names == {".lock", ".splitlab-run.json", "config.json", "run.log"}
    assert json.loads((tmp_path / "r" / "config.json").read_text())["config"] == {"seed": 1}
    assert json.loads((tmp_path / "r" / ".splitlab-run.json").read_text())["id"] == again.id != run.id


@pytest.mark.parametrize("stranger", ["notes.txt", "sub/notes.txt", "row-0/notes.txt", "empty-folder/"])
def test_overwrite_refuses_a_run_directory_holding_a_file_the_run_did_not_write(tmp_path, stranger):
    with Run.create("train", {"seed": 0}, tmp_path / "r") as run:
        run.file("sub/grid.png").parent.mkdir()
        run.file("sub/grid.png").write_bytes(b"x")
        Run.create("row", {}, run.file("row-0")).close()
    if stranger.endswith("/"):
        (tmp_path / "r" / stranger).mkdir()
    else:
        (tmp_path / "r" / stranger).write_text("mine")
    before = _snapshot(tmp_path / "r")
    with pytest.raises(SplitlabError) as info:
        Run.create("train", {"seed": 1}, tmp_path / "r", overwrite=True)
    assert f"holds {tmp_path / 'r' / stranger.rstrip('/')}, which splitlab did not write" in str(info.value)
    assert "\n" not in str(info.value)
    assert _snapshot(tmp_path / "r") == before                # nothing removed, not even the run's own files


def test_overwrite_never_touches_a_folder_splitlab_did_not_write(tmp_path):
    mine = tmp_path / "mine"                                  # someone's experiment: a config.json of their own
    mine.mkdir()
    (mine / "config.json").write_text('{"mine": 1}')
    (mine / "notes.txt").write_text("keep")
    (tmp_path / "outside.txt").write_text("keep")
    for marker in (None, "{not json", json.dumps({"format": "other", "files": ["config.json"]})):
        if marker is not None:
            (mine / ".splitlab-run.json").write_text(marker)
        before = _snapshot(mine)
        with pytest.raises(SplitlabError, match="was not written by splitlab"):
            Run.create("train", {}, mine, overwrite=True)
        assert _snapshot(mine) == before
    (mine / ".splitlab-run.json").write_text(json.dumps(      # names that leave the folder match nothing in it
        {"format": "splitlab-run/1", "id": "x", "files": ["../outside.txt", "/etc/hostname", "config.json"]}))
    with pytest.raises(SplitlabError, match="notes.txt, which splitlab did not write"):
        Run.create("train", {}, mine, overwrite=True)
    assert (mine / "config.json").is_file() and (tmp_path / "outside.txt").read_text() == "keep"


def test_a_folder_name_too_long_for_the_file_system_is_one_line(tmp_path):
    out = tmp_path / ("x" * 300) / "run"
    with pytest.raises(SplitlabError) as info:
        Run.create("train", {}, out)
    assert str(info.value) == (f"run directory {tmp_path}/{'x' * 40}...(300 characters)/run has a folder name too "
                               "long for the file system (at most 255 bytes); pass a shorter --out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_held_directory_is_refused_to_a_second_run_and_a_second_process(tmp_path):
    out = tmp_path / "r"
    run = Run.create("train", {}, out)
    for overwrite in (False, True):
        with pytest.raises(SplitlabError, match=f"in use by another run \\(pid {os.getpid()}\\)"):
            Run.create("train", {}, out, overwrite=overwrite)
    code = textwrap.dedent(f"""
        from vfl.errors import SplitlabError
        from vfl.runs import Run
        try:
            Run.create("train", {{}}, {str(out)!r}, overwrite=True)
        except SplitlabError as exc:
            print(exc)
        else:
            print("acquired")
    """)
    def other_process():
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout.strip()
    assert other_process() == (f"run directory {out} is in use by another run (pid {os.getpid()}); "
                               "wait for it to finish or pass another --out")
    assert (out / "config.json").is_file()                   # the holder's files are untouched
    run.close()
    assert other_process() == "acquired"                     # released: the other process may take it


@pytest.mark.parametrize("where", ["file", "under-file", "unwritable"])
def test_unusable_out_is_one_line_and_writes_nothing(tmp_path, where):
    (tmp_path / "f").write_text("x")
    out = {"file": tmp_path / "f", "under-file": tmp_path / "f" / "run", "unwritable": tmp_path / "ro" / "run"}[where]
    if where == "unwritable":
        if os.geteuid() == 0:                                # root writes anywhere a mode allows; /sys refuses root
            out = __import__("pathlib").Path("/sys/splitlab-test-run")
        else:
            (tmp_path / "ro").mkdir(mode=0o500)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(SplitlabError) as info:
        Run.create("train", {}, out)
    assert "\n" not in str(info.value) and "--out" in str(info.value)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "f").read_text() == "x" and (where == "file" or not out.exists())


@pytest.mark.parametrize("name", ["meta", "gpu", "", "mps", "xla", "cpu:1", "cuda:99", "cuda:-1", "cuda:x", "cpu,cuda"])
def test_devices_the_lab_cannot_use_are_one_line_errors(name, monkeypatch):
    from vfl.runtime import resolve_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)      # cuda:99 must fail on a GPU machine too
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SplitlabError) as info:
        resolve_device(name)
    assert "\n" not in str(info.value) and "use auto, cpu or cuda[:N]" in str(info.value)


def test_devices_the_lab_can_use(monkeypatch):
    from vfl.runtime import resolve_device
    assert resolve_device("cpu") == resolve_device(" CPU ") == resolve_device("cpu:0") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto") == torch.device("cuda") and resolve_device("cuda:1") == torch.device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(SplitlabError, match="CUDA is not available here; use --device cpu or auto"):
        resolve_device("cuda")


def test_the_time_estimate_comes_at_the_first_tenth_at_the_pace_after_set_up(monkeypatch, capsys):
    from vfl import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    bar = progress._Bar(None, None, 1000, "work")
    clock[0] = 20.0                          # one-off set-up before the first update: 20 s
    bar.advance(10)
    for _ in range(8):                       # then 1 s per 10 steps: 29 s + 90 s left at 100 steps
        clock[0] += 1.0
        bar.advance(10)
    assert capsys.readouterr().err == ""     # 90 of 1000 steps: not a tenth yet, under a minute
    clock[0] += 1.0
    bar.advance(10)
    line = capsys.readouterr().err
    assert line == "work: at the pace of its first 100 of 1000 steps, about 2 min in all, 2 min left\n"
    clock[0] += 1.0
    bar.advance(10)
    assert capsys.readouterr().err == ""     # said once

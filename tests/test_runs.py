import json
import math

import torch

from vfl.runs import Run, atomic_write_text, to_jsonable


def test_run_writes_config_metrics_and_log(tmp_path):
    run = Run.create("train", {"lr": 1e-3, "device": torch.device("cpu")}, tmp_path / "r")
    run.write_metrics({"accuracy": torch.tensor(0.5), "psnr": math.inf, "lpips": float("nan")})
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["config"] == {"lr": 1e-3, "device": "cpu"}
    assert config["environment"]["torch"] == torch.__version__
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
    assert calls == [1] and 0.05 <= seconds < 1.0


def test_hardware_line_names_the_cpu_threads_and_torch():
    from vfl.runtime import hardware
    line = hardware(torch.device("cpu"))
    assert line.startswith("CPU ") and f"{torch.get_num_threads()} torch threads" in line and torch.__version__ in line

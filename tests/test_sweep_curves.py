"""results.csv keeps the lists a sweep file names under [report] curves, one column per entry numbered from 1
(a run's trajectory, BO's f(Q) per trial), so the ledger can read a curve; every other list stays out."""
from __future__ import annotations

import json

import pytest

from splitlab.claims.results import read_csv
from splitlab.sweep_file import parse_sweep
from splitlab.sweep_report import write_results
from vfl.errors import SplitlabError

GRID = 'command = "hfl"\n[fixed]\nattack = "dlg"\n[axes]\nseed = [0, 1]\n'
METRICS = {"psnr": 12.0, "trajectory": {"iterations": [100, 200], "psnr": [9.5, 11.0], "ssim": [0.2, 0.3]},
           "per_image": {"psnr": [1.0, 2.0]}, "labels_true": [3, 1]}


def _write(tmp_path, report: str) -> list[dict]:
    sweep = parse_sweep(GRID + report, "grid", "grid.toml")
    for cell in sweep.cells():
        cell_dir = tmp_path / "cells" / cell.dirname
        cell_dir.mkdir(parents=True)
        (cell_dir / "metrics.json").write_text(json.dumps(METRICS))
        (cell_dir / "cell.json").write_text(json.dumps({"status": "ok", "seconds": 1.0}))
    write_results(sweep, sweep.cells(), tmp_path)
    return read_csv(tmp_path / "results.csv")


def test_a_named_curve_gets_one_column_per_point_numbered_from_one(tmp_path):
    row = _write(tmp_path, '[report]\ncurves = ["trajectory.psnr"]\n')[0]
    assert (row["trajectory.psnr.1"], row["trajectory.psnr.2"]) == ("9.5", "11.0")
    assert "trajectory.psnr.3" not in row and "trajectory.psnr.0" not in row


def test_lists_not_named_stay_out_of_results_csv(tmp_path):
    row = _write(tmp_path, '[report]\ncurves = ["trajectory.psnr"]\n')[0]
    assert not any(k.startswith(("trajectory.ssim", "trajectory.iterations", "per_image", "labels_true"))
                   for k in row)
    assert not any(k.startswith("trajectory.psnr.") for k in _write(tmp_path / "plain", "")[0])


def test_curves_must_be_a_list_of_names():
    with pytest.raises(SplitlabError, match="curves must be a list"):
        parse_sweep(GRID + '[report]\ncurves = "trajectory.psnr"\n', "grid", "grid.toml")

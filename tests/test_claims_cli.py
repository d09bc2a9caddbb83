"""`splitlab claims` on hostile input: options that need --run are refused without it, a refused or
interrupted sweep behind --run ends with its own one line, --run --json prints one JSON object on stdout, and
nothing is written before a refusal."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitlab.cli import app

runner = CliRunner()


def _claims(*args):
    return runner.invoke(app, ["claims", *map(str, args)])


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (result.exit_code,
                                                                                           result.stderr)
    return lines[0]


@pytest.mark.parametrize("args, says", [
    (("--run", "bogus"), "no claim or paper 'bogus'"),                                   # CL01
    (("--run", ""), "no claim or paper ''"),                                             # CL02
    (("--paper", "nosuch"), "no claim or paper 'nosuch'"),                               # CL03
    (("--out", "{file}"), "--out says how to run the sweeps again"),                     # CL05
    (("--executor", "bogus", "--concurrency", "-5"), "--executor, --concurrency say"),   # CL06
    (("--executor", "local"), "only with --run"),
    (("--run", "jast.lem1.sgd", "--executor", "bogus", "--out", "{dir}"), "unknown executor 'bogus'"),  # CL07
    (("--run", "jast.lem1.sgd", "--executor", "local", "--concurrency", "0", "--out", "{dir}"),
     "--concurrency must be at least 1"),                                                # CL08
    (("--run", "jast.lem1.sgd", "--executor", "local", "--concurrency", "2", "--out", "{dir}"),
     "--concurrency needs --executor ray"),                                              # CL09
    (("--deviations", "--run", "jast"), "runs nothing"),                                 # CL12
    (("--paper", "fedleak", "--run", "jast.lem1.sgd", "--out", "{dir}"), "give one of them"),  # CL14
    (("--run", "tgias.tab10.text", "--executor", "local", "--out", "{dir}"), "no measured claim"),  # CL18
])
def test_bad_options_are_refused_in_one_line_before_anything_is_written(tmp_path, args, says):
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    out = tmp_path / "out"
    result = _claims(*(a.format(file=afile, dir=out) for a in args))
    assert says in _one_error_line(result)
    assert afile.read_text() == "keep me\n" and not out.exists()
    assert result.stdout == ""


def test_one_claim_by_paper_selector_prints_one_json_object():                          # CL04
    result = _claims("--paper", "jast.lem1.sgd", "--json")
    assert result.exit_code == 0
    record = json.loads(result.stdout)
    assert [row["id"] for row in record["claims"]] == ["jast.lem1.sgd"]
    assert record["claims"][0]["kind"] == "exact check"


class _Sweep:
    """Stands in for the sweep command behind --run: records its arguments, answers with an exit code."""

    def __init__(self, code, say: str = ""):
        self.code, self.say, self.calls = code, say, []

    def __call__(self, args, **_):
        import sys
        self.calls.append(args)
        if self.say:
            print(self.say, file=sys.stderr)
        print("the sweep's table")                       # stdout: what --json must keep off stdout
        return self.code


@pytest.mark.parametrize("code, line", [
    (2, "error: the sweep directory is a file"),                                          # a refused sweep
    (130, "interrupted: finished cells are kept; run the same command again to resume"),  # CL15, CL20
])
def test_a_refused_or_interrupted_sweep_ends_with_its_own_one_line(tmp_path, monkeypatch, code, line):
    import splitlab.cli

    sweep = _Sweep(code, line)
    monkeypatch.setattr(splitlab.cli, "app", sweep)
    result = _claims("--run", "jast.lem1.sgd", "--executor", "local", "--out", tmp_path / "out", "--json")
    assert result.exit_code == code and result.stdout == ""
    assert result.stderr.strip().splitlines() == [line]
    assert "run the same command again to resume it" not in result.stderr.replace(line, "")
    assert "--no-progress" in sweep.calls[0]                  # no live display without a terminal


def test_a_sweep_with_failed_cells_says_how_to_resume(tmp_path, monkeypatch):
    import splitlab.cli

    monkeypatch.setattr(splitlab.cli, "app", _Sweep(1))
    result = _claims("--run", "jast.lem1.sgd", "--executor", "local", "--out", tmp_path / "out")
    assert "did not finish every cell" in _one_error_line(result)
    assert "run the same command again to resume it" in result.stderr


def _finished_lemmas(out: Path) -> None:
    """A finished jast-lemmas sweep (its one cell's files), so --run resumes it and runs nothing."""
    from splitlab.sweep_file import load_sweep

    cell = load_sweep(paper="jast-lemmas").cells()[0]
    cell_dir = out / "jast-lemmas" / "cells" / cell.dirname
    cell_dir.mkdir(parents=True)
    (cell_dir / "metrics.json").write_text(json.dumps({"matched_by_check": {"lemma1-sgd": True}}))
    (cell_dir / "cell.json").write_text(json.dumps({"status": "ok", "seconds": 1.0}))


@pytest.mark.slow
def test_run_with_json_prints_only_one_json_object_on_stdout(tmp_path):                # CL11, CL17
    out = tmp_path / "ünï ✓ 日本"
    _finished_lemmas(out)
    result = _claims("--run", "jast.lem1.sgd", "--executor", "local", "--out", out, "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert [(row["id"], row["verdict"]) for row in record["claims"]] == [("jast.lem1.sgd", "holds")]
    assert result.stderr == ""                                 # the sweep's table is in its report.md


@pytest.mark.slow
def test_a_sweep_directory_that_is_a_file_is_refused_in_one_line(tmp_path):              # CL10
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    result = _claims("--run", "jast.lem1.sgd", "--executor", "local", "--out", afile)
    _one_error_line(result)
    assert afile.read_text() == "keep me\n"
    assert "resume" not in result.stderr

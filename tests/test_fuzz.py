"""Bad and hostile input over every command: each case must exit 2 with exactly one line on stderr,
leave the output location untouched, and finish within a time limit (no input may hang a command).

The table grows with every new option: add a row for each value an option must refuse."""

import pytest
from typer.testing import CliRunner

from splitlab.cli import app

runner = CliRunner()

NAN, INF = "nan", "inf"
TRAIN = ["train", "--arch", "small-mlp", "--epochs", "1"]
UNSPLIT = ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset", "quick"]
FSHA = ["attack", "fsha", "--iterations", "2", "--width", "0.0625", "--batch-size", "8"]
HFL = ["hfl", "--attack", "invgrad", "--arch", "convnet", "--preset", "invgrad.quick", "--iterations", "2"]
COMPARE = ["compare", "--archs", "small-mlp", "--epochs", "1", "--preset", "quick"]

CASES = [
    # numbers: non-finite, out of range, not an integer
    (TRAIN + ["--lr", NAN], "--lr must be finite"),
    (TRAIN + ["--lr", "-1"], "--lr must be"),
    (TRAIN + ["--epochs", "0"], "--epochs must be"),
    (TRAIN + ["--batch-size", "0"], "--batch-size must be"),
    (TRAIN + ["--seed", "-1"], "--seed must be"),
    (TRAIN + ["--defence", "input-dp:epsilon=nan"], "epsilon=nan is not finite"),
    (TRAIN + ["--defence", "input-dp:epsilon=inf"], "epsilon=inf is not finite"),
    (TRAIN + ["--defence", "input-dp:sigma=nan"], "sigma"),
    (TRAIN + ["--defence", "input-dp:sensitivity=-5"], "sensitivity"),
    (TRAIN + ["--defence", "activation-noise:sigma=inf"], "sigma"),
    (TRAIN + ["--defence", "orthogonal:seed=nan"], "seed"),
    (TRAIN + ["--defence", "orthogonal:seed=1e30"], "seed"),
    (TRAIN + ["--defence", "semi-orthogonal:dim=1e9"], "dim"),
    (["train", "--arch", "mlp-mixer", "--dataset", "mnist5k", "--defence", "patch-orthogonal:patch=3.5"], ""),
    (TRAIN + ["--defence", "orthogonal+"], "empty item"),
    (TRAIN + ["--defence", "+"], "empty item"),
    (TRAIN + ["--defence", "input-dp:epsilon=6,epsilon=7"], "epsilon"),
    (UNSPLIT + ["--lambda-tv", "-1"], "--lambda-tv must be >= 0"),
    (UNSPLIT + ["--lambda-tv", NAN], "--lambda-tv must be finite"),
    (UNSPLIT + ["--lambda-l2", INF], "--lambda-l2 must be finite"),
    (UNSPLIT + ["--iterations", "0"], "must be >= 1"),
    (FSHA + ["--gp-weight", NAN], "gp-weight"),
    (FSHA + ["--width", "0"], "width"),
    (FSHA + ["--lr", "-1"], "--lr"),
    (FSHA + ["--lr-client", "-1"], "--lr"),                # its earlier name, still taken
    (FSHA + ["--cut-layer", "7"], "--cut-layer"),
    (FSHA + ["--level", "7"], "--cut-layer"),
    (FSHA + ["--iterations", "0"], "iterations"),
    (HFL + ["--tv", NAN], "--tv must be finite"),
    (HFL + ["--local-lr", NAN], "--local-lr must be finite"),
    (HFL + ["--restarts", "0"], "--restarts must be >= 1"),
    (HFL + ["--batch-size", "0"], "--batch-size must be"),
    (HFL + ["--defence", "gaussian:sigma=nan"], "sigma"),
    (HFL + ["--defence", "topk:keep=2"], "keep"),
    (HFL + ["--defence", "quant:bits=0"], "bits"),
    # values the option's type refuses (parsed before the command runs)
    (TRAIN + ["--epochs", "abc"], "Invalid value for '--epochs'"),
    (TRAIN + ["--epochs", "3.5"], "Invalid value for '--epochs'"),
    (HFL + ["--restarts", "2.5"], "Invalid value for '--restarts'"),
    (TRAIN + ["--bogus", "1"], "No such option: --bogus"),
    # names
    (TRAIN + ["--optimizer", "rmsprop"], "--optimizer must be one of"),
    (["train", "--arch", "vit"], "unknown architecture 'vit'"),
    (["train", "--dataset", "svhn"], "unknown dataset 'svhn'"),
    (TRAIN + ["--cut-layer", "9"], "has no cut layer 9"),
    (UNSPLIT + ["--clone", "cloned"], "--clone must be one of"),
    (["attack", "unsplit", "--preset", "fast"], "unknown preset 'fast' for unsplit"),
    (["attack", "fsha", "--preset", "dlg.quick"], "preset dlg.quick is for attack dlg, not fsha"),
    (HFL + ["--observe", "temporal"], "--observe must be one of"),
    (["hfl", "--arch", "vgg"], "unknown HFL model"),
    (COMPARE + ["--archs", ""], "--archs"),
    (COMPARE + ["--attacks", "fsha"], "--attacks takes"),
    (["theory", "--only", "lemma-99"], "lemma-99"),
    (["theory", "--dtype", "float16"], "float16"),
    # devices, data, files
    (TRAIN + ["--device", "meta"], "device 'meta'"),
    (TRAIN + ["--device", "cuda:99"], "cuda"),
    (["train", "--dataset", "mnist", "--data-root", "{tmp}/empty"], "no mnist files"),
    (["attack", "unsplit", "--checkpoint", "{tmp}/missing.pt"], "not found"),
    (["attack", "unsplit", "--checkpoint", "{tmp}/garbage.pt"], "corrupt"),
    (["evaluate", "--checkpoint", "{tmp}/garbage.pt"], "corrupt"),
]
OUT_CASES = [
    (TRAIN, "{tmp}/afile", "is a file"),
    (TRAIN, "{tmp}/afile/below", "file"),
    (TRAIN, "{tmp}/finished", "not empty"),
]


def _files(tmp_path):
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("keep me")
    (tmp_path / "finished").mkdir()
    (tmp_path / "finished" / "config.json").write_text("{}")
    return {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}


def _check(tmp_path, args, out, message, before):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = runner.invoke(app, args if args[0] == "evaluate" else args + ["--out", out])    # evaluate writes no run
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1 and message in lines[0], lines
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before   # nothing written or changed


@pytest.mark.parametrize("args,message", CASES, ids=[" ".join(a[-2:]) for a, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, time_limit, args, message):
    before = _files(tmp_path)
    _check(tmp_path, args, str(tmp_path / "run"), message, before)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args,out,message", OUT_CASES, ids=[o for _, o, _ in OUT_CASES])
def test_unusable_out_exits_2_with_one_line(tmp_path, time_limit, args, out, message):
    before = _files(tmp_path)
    _check(tmp_path, args, out.replace("{tmp}", str(tmp_path)), message, before)

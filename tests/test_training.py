"""TrainConfig validation and checkpoint loading options."""
import pytest
import torch
from test_data import write_fake_mnist

from vfl import data
from vfl.errors import SplitlabError
from vfl.training import TrainConfig, TrainedSplit, build_parties, load_checkpoint, load_data, save_checkpoint


@pytest.mark.parametrize("change,message", [
    ({"lr": float("nan")}, "--lr must be finite"), ({"lr": float("inf")}, "--lr must be finite"),
    ({"lr": 0.0}, "--lr must be > 0"), ({"lr": "0.1"}, "--lr must be a number"),
    ({"epochs": 0}, "--epochs must be >= 1"), ({"epochs": 2.5}, "--epochs must be an integer"),
    ({"epochs": 10**9}, "<= 100000"), ({"batch_size": True}, "--batch-size must be an integer"),
    ({"batch_size": 0}, "--batch-size must be >= 1"), ({"seed": -1}, "--seed must be >= 0"),
    ({"seed": 2**63}, "<= 9223372036854775807"), ({"seed": 1.5}, "--seed must be an integer"),
    ({"optimizer": "lion"}, "--optimizer must be one of sgd, momentum"),
    ({"defence": "orthogonal+"}, "has an empty item"), ({"device": "meta"}, "use auto, cpu or cuda"),
])
def test_every_training_number_is_checked_before_anything_runs(change, message):
    with pytest.raises(SplitlabError, match=message):
        TrainConfig(**change)


def test_whole_floats_are_accepted_where_integers_are_asked():
    TrainConfig(epochs=2.0, batch_size=64.0, seed=3.0, device="cpu")     # as JSON may hand them back


def test_a_checkpoint_loads_its_data_from_the_given_root(tmp_path):
    # dp without a given sensitivity re-estimates it from the training data when the checkpoint is loaded
    write_fake_mnist(tmp_path / "data")
    config = TrainConfig(dataset="mnist", arch="small-mlp", defence="input-dp:epsilon=6,delta=0.5", device="cpu",
                         data_root=str(tmp_path / "data"))
    client, server = build_parties(config, torch.device("cpu"), load_data(config)[0].images)
    save_checkpoint(tmp_path / "c.pt", TrainedSplit(config, client, server, 0.5))
    (tmp_path / "data").rename(tmp_path / "moved")
    data._load_cached.cache_clear()                      # as in a new process: the old root is gone
    with pytest.raises(SplitlabError, match=f"no mnist files under {tmp_path / 'data'};.*--data-root"):
        load_checkpoint(tmp_path / "c.pt", "cpu")
    reloaded = load_checkpoint(tmp_path / "c.pt", "cpu", data_root=tmp_path / "moved")
    assert reloaded.config.data_root == str(tmp_path / "moved")
    assert reloaded.client.defences[0].sigma == client.defences[0].sigma
    x = torch.rand(3, 1, 28, 28)
    torch.testing.assert_close(reloaded.client.model(x), client.model(x))
    with pytest.raises(SplitlabError, match=f"no mnist files under {tmp_path / 'elsewhere'}"):
        load_checkpoint(tmp_path / "c.pt", "cpu", data_root=tmp_path / "elsewhere")


def test_a_checkpoint_from_before_the_rename_loads_its_client_noise_as_received_gradient_noise(tmp_path):
    """The feature party's gradient noise was called gradient-noise before that name went to the label party's
    defence; a checkpoint of then loads with the same defence under its new name."""
    from splitlab import api
    from vfl.training import load_checkpoint, save_checkpoint

    trained = api.train("small-mlp", epochs=1, defence="received-gradient-noise:sigma=0.1", progress=False)
    path = save_checkpoint(tmp_path / "checkpoint.pt", trained)
    blob = torch.load(path, weights_only=True)
    blob["config"]["defence"] = "orthogonal+gradient-noise:sigma=0.1"
    torch.save(blob, path)
    loaded = load_checkpoint(path, device="cpu")
    assert loaded.config.defence == "orthogonal+received-gradient-noise:sigma=0.1"


def test_training_counts_the_bytes_across_the_cut_each_way():
    """Every round's activations up and cut gradient down, every evaluation's queries up and predictions down."""
    from vfl.training import train_split

    config = TrainConfig(dataset="wdbc", arch="tabular-mlp", cut_layer=1, epochs=2, batch_size=64, device="cpu")
    train, test = load_data(config)
    trained = train_split(config, train, test, progress=False, query=False)
    width = trained.client.model(train.images[:1]).shape[1]
    rows = 2 * len(train) * width * 4                           # float32 activations (and gradients) per epoch
    queries = 2 * len(test) * width * 4
    assert trained.cut_bytes == {"client": rows + queries, "server": rows + 2 * len(test) * 8}

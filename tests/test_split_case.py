"""The one split case: training and every split attack family's victim are one declaration (`vfl.case.SplitCase`),
a family's own defaults a mapping over it, and `--top` one field of it."""
import dataclasses

import pytest
import torch
from typer.testing import CliRunner

from attacks import registry
from attacks.split.labels.victim import LabelVictim, build_models, task_data, train_victim
from splitlab.cli import app
from vfl.case import SplitCase
from vfl.errors import SplitlabError
from vfl.models import output_cut
from vfl.training import TrainConfig, build_parties
from vfl.wire.launch import check_hosted

runner = CliRunner()


def test_the_label_victim_is_the_split_case_over_the_label_attacks_defaults():
    victim = LabelVictim()
    assert type(victim) is SplitCase is TrainConfig
    assert (victim.task, victim.cut_layer, victim.epochs, victim.top) == ("binary", 6, 2, "model")
    assert LabelVictim(task="multiclass", cut_layer=3).cut_layer == 3
    config = registry.spec("label-norm").experiment.config
    assert config.victim_options is SplitCase and config.victim_defaults == {"task": "binary", "cut_layer": 6,
                                                                            "epochs": 2}


@pytest.mark.parametrize("given,message", [
    ({"parties": 2, "arch": "small-mlp", "cut_layer": 1}, "give --parties 1"), ({"batch_size": 1}, "--batch-size 2 or more"),
    ({"lr": 20.0}, "at most 10"), ({"top": "linear", "aggregate": "sum"}, "drop one of them"),
])
def test_what_the_label_attacks_need_of_the_case_is_refused_in_one_line(given, message):
    with pytest.raises(SplitlabError, match=message):
        LabelVictim(**given)


@pytest.mark.parametrize("case", [dict(parties=3), dict(arch="small-mlp", parties=2, aggregate="sum"), dict(arch="mlp", parties=2),
                                  dict(top="linear")], ids=["cnn-3", "sum-2", "mlp-2", "u-shaped"])
def test_checking_a_case_draws_nothing_from_torchs_global_generator(case):
    # its checks build models, seeded or on the meta device; a check that drew would make the stream after a case
    # depend on which cases a process had checked before (their outcomes are remembered)
    before = torch.random.get_rng_state()
    SplitCase(**case)
    SplitCase(**case)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_top_none_and_aggregate_sum_are_one_setting():
    assert dataclasses.astuple(SplitCase(top="none")) == dataclasses.astuple(SplitCase(aggregate="sum"))
    assert (SplitCase(top="none").aggregate, SplitCase(aggregate="sum").top) == ("sum", "none")


def test_top_linear_gives_the_label_party_the_output_layer_only():
    case = SplitCase(arch="small-mlp", top="linear", device="cpu")
    assert case.cut_layer == output_cut("small-mlp") == 2
    client, server = build_parties(case, torch.device("cpu"))
    x = torch.zeros(3, 1, 28, 28)
    assert tuple(client.model(x).shape) == (3, 10)
    assert [type(m).__name__ for m in server.model] == ["Linear"]


def test_a_label_victim_takes_a_size_changing_input_transform_on_a_dense_model():
    victim = LabelVictim(arch="small-mlp", cut_layer=1, epochs=1, batch_size=1000, device="cpu",
                         defence="semi-orthogonal:dim=1024")
    bottom, _ = build_models(victim)
    assert bottom[1].in_features == 1024
    trained = train_victim(victim, task_data(victim), progress=False)
    assert len(trained.samples) == 4 and 0 <= trained.accuracy <= 1
    with pytest.raises(SplitlabError, match="changes the input size"):
        LabelVictim(defence="semi-orthogonal:dim=1024")          # cnn's convolutions take 28x28 only


def test_a_case_the_wire_cannot_host_is_refused_naming_what_it_hosts():
    with pytest.raises(SplitlabError, match=r"a top model \(--top model\) or aggVFL .* --top linear"):
        check_hosted(SplitCase(arch="small-mlp", top="linear"))
    for hosted in (SplitCase(), SplitCase(aggregate="sum"), SplitCase(top="none")):   # aggVFL sums scores over TCP
        check_hosted(hosted)


def test_the_label_commands_show_their_family_defaults_and_offer_no_party_options():
    def offered(name):
        out = runner.invoke(app, ["attack", name, "--help"], env={"COLUMNS": "200"}).output
        return {line.split()[1]: line for line in out.splitlines() if line.startswith("│ --")}

    label, unsplit = offered("label-norm"), offered("unsplit")
    assert "--top" in label and "--parties" not in label and "--aggregate" not in label
    assert "[default: (6)]" in label["--cut-layer"] and "[default: (binary)]" in label["--task"]
    assert "--top" in unsplit and "--parties" in unsplit and "[default: (1)]" in unsplit["--cut-layer"]


def test_unsplit_refuses_a_case_without_a_cut():
    result = runner.invoke(app, ["attack", "unsplit", "--top", "none"])
    assert result.exit_code == 2 and "--top model or linear" in result.output


def test_a_u_shaped_case_trains_and_its_checkpoint_loads_it_again(tmp_path):
    from vfl.training import load_checkpoint, load_data, save_checkpoint, train_split

    case = SplitCase(arch="small-mlp", top="linear", epochs=1, batch_size=1000, device="cpu")
    trained = train_split(case, *load_data(case), progress=False)
    loaded = load_checkpoint(save_checkpoint(tmp_path / "checkpoint.pt", trained), device="cpu")
    assert loaded.config == case and loaded.config.cut_layer == 2
    for saved, again in ((trained.client.model, loaded.client.model), (trained.server.model, loaded.server.model)):
        assert all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), again.state_dict().values()))


def _few(split: str, n: int = 24):
    from vfl.data import ImageData

    images = torch.rand(n, 1, 28, 28, generator=torch.Generator().manual_seed(n))
    return ImageData("mnist5k", split, images, torch.arange(n) % 10, "random")


@pytest.mark.parametrize("scale,moves", [(0.0, False), (1.0, True)])
def test_a_malicious_server_object_supplies_the_cut_gradients_the_case_trains_on(scale, moves):
    """Role malicious: the attacker's server takes the label party's place in the case's one training path; the
    client steps on exactly the gradients it chose (none: its weights stay as the seed built them)."""
    from vfl.protocol import MaliciousServer
    from vfl.training import build_client, train_split

    case = SplitCase(arch="small-mlp", epochs=2, batch_size=8, optimizer="sgd", lr=0.1, device="cpu")
    server = MaliciousServer(lambda h, step: scale * torch.ones_like(h))
    trained = train_split(case, _few("train"), _few("test"), progress=False, role="malicious", server=server)
    start = build_client(case, torch.device("cpu")).model.state_dict()
    same = all(torch.equal(a, b) for a, b in zip(start.values(), trained.client.model.state_dict().values()))
    assert trained.server is server and same is not moves
    assert len(server.seen.entries) == 2 * 3 + 2 + 1      # 3 rounds an epoch, its test query, the targets' query
    assert trained.accuracy == 0.0                        # it has no task: every prediction is -1


@pytest.mark.parametrize("role,server,message", [
    ("malicious", None, "pass the server object"), ("curious", object(), "is role malicious"),
    ("evil", None, "server role"),
])
def test_a_server_role_and_its_object_must_agree(role, server, message):
    from vfl.training import train_split

    case = SplitCase(arch="small-mlp", epochs=1, device="cpu")
    with pytest.raises(SplitlabError, match=message):
        train_split(case, _few("train"), _few("test"), progress=False, role=role, server=server)

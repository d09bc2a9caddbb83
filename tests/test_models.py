import pytest
import torch

from vfl.errors import SplitlabError
from vfl.models import ARCHITECTURES, arch_spec, build_split, check_input_shape, describe
from vfl.models.split import count_parameters

PAPER_COUNTS = {"cnn": 45_278, "mlp": 2_913_290, "cifar-cnn": 1_609_546}


@pytest.mark.parametrize("name,total", PAPER_COUNTS.items())
def test_total_parameter_counts_match_the_paper(name, total):
    assert count_parameters(arch_spec(name).build()) == total


@pytest.mark.parametrize("name,cut,client", [("small-mlp", 1, 7_850), ("mlp-mixer", 1, 146_816),
                                             ("mlp", 1, 784 * 1024 + 1024), ("cnn", 1, 8 * 25 + 8)])
def test_client_parameter_counts(name, cut, client):
    client_model, _ = build_split(name, cut)
    assert count_parameters(client_model) == client


@pytest.mark.parametrize("name,cut", [(s.name, c) for s in ARCHITECTURES.values() for c in s.cut_layers])
def test_every_cut_gives_the_documented_activation_shape_and_composes(name, cut):
    spec = arch_spec(name)
    torch.manual_seed(0)
    net = spec.build().eval()
    x = torch.rand(2, *spec.input_shape)
    h = net.client(cut)(x)
    assert tuple(h.shape[1:]) == spec.activation_shapes[cut]
    out = net.server(cut)(h)
    assert out.shape == (2, spec.num_classes)
    torch.testing.assert_close(out, net(x))


def test_cut_semantics_follow_the_paper_code():
    # MLP cut 1 = Flatten + first Linear with no activation: activations can be negative.
    client, _ = build_split("mlp", 1, seed=0)
    assert [type(m).__name__ for m in client] == ["Flatten", "Linear"]
    # CNN cut 1 = conv1 + ReLU.
    client, _ = build_split("cnn", 1, seed=0)
    assert [type(m).__name__ for m in client] == ["Conv2d", "ReLU"]


def test_describe_lists_every_pair_with_counts_that_add_up():
    rows = describe()
    assert len(rows) == sum(len(s.cut_layers) for s in ARCHITECTURES.values())
    for row in rows:
        assert row["client_params"] + row["server_params"] == row["total_params"]


def test_bad_names_cuts_and_shapes_raise_one_line_errors():
    with pytest.raises(SplitlabError, match="unknown architecture"):
        arch_spec("transformer")
    with pytest.raises(SplitlabError, match="no cut layer 7"):
        build_split("cnn", 7)
    with pytest.raises(SplitlabError, match="use --arch cifar-cnn or mlp-mixer"):
        check_input_shape(arch_spec("mlp"), (3, 32, 32), "cifar10")


def test_hfl_batchnorm_eval_affine_form_matches_the_stock_layer_to_second_order():
    from vfl.models.hfl import BatchNorm2d
    torch.manual_seed(0)
    ours = BatchNorm2d(4).eval()
    with torch.no_grad():
        ours.running_mean.normal_()
        ours.running_var.uniform_(0.5, 2.0)
        ours.weight.normal_()
        ours.bias.normal_()
    x = torch.randn(2, 4, 5, 5, requires_grad=True)

    def second_order(forward):
        g = torch.autograd.grad(forward(ours, x).pow(3).sum(), (ours.weight, ours.bias), create_graph=True)
        return [forward(ours, x)] + list(torch.autograd.grad(sum(t.square().sum() for t in g), (x, ours.weight)))

    for mine, stock in zip(second_order(BatchNorm2d.forward), second_order(torch.nn.BatchNorm2d.forward)):
        torch.testing.assert_close(mine, stock, rtol=1e-4, atol=1e-5)

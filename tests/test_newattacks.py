"""The VFL benchmark attacks on small fixed cases: batch label inference beats the majority class, the gradient
replacement plants a trigger the unpoisoned model does not answer, ESA solves a logistic regression exactly where
it has as many equations as unknowns, and bad input is one line with exit 2."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from typer.testing import CliRunner

from attacks.split.bli.attack import batch_gradient, invert_batch
from attacks.split.bli.settings import BatchLabelSettings
from attacks.split.feature_inference.esa import EqualitySolving
from attacks.split.feature_inference.view import JointModel, PredictionView
from attacks.split.labels.victim import LabelVictim, task_data, train_victim
from attacks.split.poisoning.experiment import draw_samples
from attacks.split.poisoning.replacement import GradientReplacement
from attacks.split.poisoning.settings import BackdoorSettings
from attacks.split.poisoning.trigger import Trigger
from splitlab.cli import app
from vfl.training import TrainConfig, build_parties


def test_batch_label_inference_recovers_a_batchs_labels_from_its_parameter_gradient_only():
    """A passive party's score model on 8 samples of 4 classes: the labels come back from sum_i J_i^T g_i alone."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 4)).double()
    x, labels = torch.randn(8, 20, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 3, 1, 0, 2])
    scores = model(x).detach().requires_grad_()
    g, = torch.autograd.grad(F.cross_entropy(scores, labels), scores)          # what the label party returns
    observed = batch_gradient(model, x, g)
    found, losses = invert_batch(model, x, observed, 4, BatchLabelSettings(iterations=150),
                                 torch.Generator().manual_seed(0))
    accuracy = float((found.argmax(1) == labels).double().mean())
    assert accuracy >= 0.75, accuracy                                         # the majority class: 2 of 8
    assert losses[-1] < 0.1 * losses[0]


def test_replacement_stamps_only_poisoned_rows_and_hands_back_the_known_targets_gradient():
    trigger = Trigger.for_data(torch.zeros(3, 1, 6, 6).index_fill_(2, torch.tensor([0]), 1.0), 2)
    poison = GradientReplacement(torch.tensor([5]), torch.tensor([7]), trigger, amplify=3.0)
    ids = torch.tensor([5, 6, 7])
    x = poison.inputs(torch.zeros(3, 1, 6, 6), ids)
    assert x[0, 0, -2:, -2:].eq(1).all() and x[1:].eq(0).all()                 # the brightest value, row 0 only
    g = torch.arange(6.0).view(3, 2)
    out = poison.gradient(g, ids)
    assert torch.equal(out[0], 3.0 * g[2]) and torch.equal(out[1:], g[1:]) and poison.replaced == 1


@pytest.mark.slow
def test_gradient_replacement_plants_a_trigger_the_unpoisoned_model_does_not_answer(one_thread):
    """wdbc, the tabular MLP cut after its third hidden layer: the poisoned model labels triggered malignant samples
    benign (the target; the trigger's maximal columns look malignant) far more often than the same model trained
    unpoisoned, and keeps its clean accuracy."""
    victim = LabelVictim(dataset="wdbc", task="binary", positive=0, arch="tabular-mlp", cut_layer=6, epochs=15,
                         batch_size=32, seed=0)
    data = task_data(victim)
    settings = BackdoorSettings(target=0, known=5, poisoned=60, trigger_size=3, amplify=2.0)
    known, poisoned = draw_samples(data.train.labels, settings, 0)
    poison = GradientReplacement(poisoned, known, Trigger.for_data(data.train.images, 3), 2.0)
    rates = []
    for p in (poison, None):
        trained = train_victim(victim, data, None, False, poison=p)
        others = data.test.labels != 0
        with torch.no_grad():
            said = trained.server.predict(trained.client.infer(poison.trigger.apply(data.test.images[others])))
        rates.append((float((said.argmax(1) == 0).double().mean()), trained.accuracy))
    (success, accuracy), (clean_success, clean_accuracy) = rates
    assert poison.replaced > 0
    assert success > clean_success + 0.2, rates
    assert accuracy > 0.85 and clean_accuracy > 0.85, rates


def test_esa_solves_a_logistic_regression_exactly_with_as_many_equations_as_unknowns():
    """Wine's three classes give two equations a sample; the passive party holds one column: exact."""
    config = TrainConfig(dataset="wine", arch="tabular-lr", aggregate="sum", parties=7, task="multiclass", seed=1)
    client, server = build_parties(config, torch.device("cpu"))
    model = JointModel(client, server)
    x = torch.randn(6, 13)
    with torch.no_grad():
        probabilities = torch.softmax(model(x), 1)
    target = [12]                                              # the last party's one column
    own = x.clone()
    own[..., target] = 0
    view = PredictionView(model, own, list(range(12)), target, probabilities, linear=True, pixels=False)
    answer = EqualitySolving()(view)
    assert answer.infers_features and torch.allclose(answer.images, x[:, target], atol=1e-4)
    assert answer.extras["exact"]


@pytest.mark.parametrize("args, message", [
    (["bli", "--cut-layer", "1", "--top", "model"], "needs --top none"),
    (["esa", "--arch", "tabular-mlp"], "logistic regression"),
    (["esa", "--parties", "2", "--held", "2"], "--held 2"),
    (["bli-replace", "--target", "12"], "--target 12"),
    (["gr-backdoor", "--known", "0"], "--known"),
    (["gr-backdoor", "--transport", "tcp"], "does not poison"),
    (["bli", "--batch-size", "0"], "--batch-size must be >= 1"),
    (["bli-replace", "--known", "100000"], "give --known below"),
    (["grn", "--parties", "3", "--held", "3"], "--held 3"),
    (["grn", "--generator-lr", "0"], "--generator-lr must be > 0"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(args, message, tmp_path):
    result = CliRunner().invoke(app, ["attack", *args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "run").exists()


def test_feature_inference_takes_the_columns_the_case_records_under_every_partition():
    """ESA and GRN split the columns as the trained case did: under `correlation` too (its ranking needs the data)."""
    from attacks.split.feature_inference.experiment import columns
    victim = TrainConfig(dataset="wdbc", arch="tabular-lr", aggregate="sum", parties=3, partition="correlation", seed=4)
    each = victim.feature_partition()["columns"]
    assert columns(victim, 1) == (sorted(each[0]), sorted(each[1] + each[2]))

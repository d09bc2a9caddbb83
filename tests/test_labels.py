"""Label inference by the feature party: the leak AUC, each attack on gradients built to the papers' algebra, the
record of what the party received, the victim's models, and one-line refusals of bad input."""
import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from attacks import registry
from attacks.metrics import score
from attacks.metrics.labels import auc, leak_auc
from attacks.split.label_completion.optimizer import MaliciousSGD
from attacks.split.labels.observation import GradientRecord, LabelObservation
from attacks.split.labels.victim import LabelVictim, build_models, task_data, train_victim
from splitlab import api
from splitlab.cli import app
from vfl.errors import SplitlabError

runner = CliRunner()


def attack(name, **settings):
    spec = registry.spec(name)
    return spec.make(spec.settings_for(None, **settings))


def record_of(gradients, sent=None):
    samples = [torch.arange(i * len(g), (i + 1) * len(g)) for i, g in enumerate(gradients)]
    return GradientRecord(tuple(range(len(gradients))), tuple(gradients), tuple(samples),
                          None if sent is None else tuple(sent))


def test_auc_counts_ties_as_half_and_leak_auc_averages_within_rounds():
    positive = torch.tensor([0, 0, 1, 1])
    assert auc(torch.tensor([0.1, 0.2, 0.3, 0.4]), positive) == 1.0
    assert auc(torch.tensor([0.4, 0.3, 0.2, 0.1]), positive) == 0.0
    assert auc(torch.ones(4), positive) == 0.5
    # each round ranks its positive first, but the second round's scores are all higher: pooled < 1
    scores = torch.tensor([0.0, 1.0, 10.0, 11.0, 5.0, 6.0])
    labels, rounds = torch.tensor([0, 1, 0, 1, 0, 0]), torch.tensor([0, 0, 1, 1, 2, 2])
    value, pooled, counted = leak_auc(torch.stack([-scores, scores], 1), labels, rounds)
    assert value == 1.0 and pooled < 1.0 and counted == 2          # round 2 holds one class: not counted


def _binary_gradients(rounds=4, batch=32, d=10, seed=0, without_positive=()):
    """Li et al.'s structure: g_j = (p_j - y_j) v_r, v_r shared in a round, p_j small (imbalanced task)."""
    g = torch.Generator().manual_seed(seed)
    grads, labels = [], []
    for r in range(rounds):
        y = (torch.rand(batch, generator=g) < 0.15).long()
        y[0] = 1
        if r in without_positive:
            y[:] = 0
        p = 0.1 * torch.rand(batch, generator=g)
        v = torch.randn(d, generator=g)
        grads.append((p - y).unsqueeze(1) * v + 1e-3 * torch.randn(batch, d, generator=g))
        labels.append(y)
    return grads, torch.cat(labels)


def test_norm_scoring_ranks_the_positives_first_round_by_round():
    grads, labels = _binary_gradients()
    record = record_of(grads)
    rec = attack("label-norm")(LabelObservation(2, record.targets, record))
    m = score(rec, None, labels)
    assert m["leak_auc"] == 1.0 and m["label_accuracy"] == 1.0 and m["image_mse"] is None
    assert m["baselines"]["majority"]["class"] == 0 and m["extras"]["leak_auc_rounds"] == 4


def test_direction_scoring_reads_the_sign_of_the_cosine_to_a_known_positive():
    grads, labels = _binary_gradients(without_positive=(1,))
    record = record_of(grads)
    hints = {r: (0, 1) for r in (0, 2, 3)}             # row 0 is positive in every round but round 1
    rec = attack("label-direction")(LabelObservation(2, record.targets, record, hints=hints))
    m = score(rec, None, labels)
    assert m["leak_auc"] == 1.0 and m["label_accuracy"] == 1.0
    with pytest.raises(SplitlabError, match="no scored round holds"):
        attack("label-direction")(LabelObservation(2, record.targets, record))


def test_direct_inference_reads_each_label_off_the_gradient_sign():
    torch.manual_seed(0)
    logits, labels = torch.randn(50, 7) * 3, torch.randint(0, 7, (50,))
    g = (torch.softmax(logits, 1) - nn.functional.one_hot(labels, 7)) / 50
    record = record_of([g[:25], g[25:]])
    rec = attack("label-direct")(LabelObservation(7, record.targets, record))
    assert torch.equal(rec.labels[0], labels) and score(rec, None, labels)["leak_auc"] == 1.0
    with pytest.raises(SplitlabError, match="one gradient entry per class"):
        attack("label-direct")(LabelObservation(5, record.targets, record))


@pytest.mark.slow
def test_unsplit_labels_are_recovered_through_an_unknown_linear_output_layer():
    g = torch.Generator().manual_seed(1)
    classes, d, batch = 4, 12, 48
    weight, bias = 0.3 * torch.randn(classes, d, generator=g), 0.1 * torch.randn(classes, generator=g)
    sent, grads, labels = [], [], []
    for _ in range(30):
        a, y = torch.randn(batch, d, generator=g), torch.randint(0, classes, (batch,), generator=g)
        p = torch.softmax(a @ weight.T + bias, 1)
        grads.append((p - nn.functional.one_hot(y, classes)) @ weight / batch)
        sent.append(a)
        labels.append(y)
    labels = torch.cat(labels)
    record = record_of(grads, sent)
    known = torch.stack([torch.nonzero(labels == c)[0, 0] for c in range(classes)])
    observation = LabelObservation(classes, record.targets, record, labelled=(known, labels[known]))
    rec = attack("label-unsplit", iterations=30)(observation)
    assert score(rec, None, labels)["label_accuracy"] > 0.95


def test_the_record_takes_what_the_party_received_in_round_order():
    from vfl.protocol import Activations, CutGradient, Transcript

    transcript = Transcript(keep_tensors=True)
    for step in range(3):
        transcript.record(Activations(step, torch.full((2, 3), float(step))))
        transcript.record(CutGradient(step, torch.full((2, 3), -float(step))))
    samples = [torch.tensor([2 * s, 2 * s + 1]) for s in range(3)]
    record = GradientRecord.from_transcript(transcript, samples)
    assert record.steps == (0, 1, 2) and torch.equal(record.gradients[2], torch.full((2, 3), -2.0))
    assert torch.equal(record.sent[1], torch.ones(2, 3)) and torch.equal(record.targets, torch.arange(6))
    last = record.last(2)
    assert last.steps == (1, 2) and torch.equal(last.rounds, torch.tensor([0, 0, 1, 1]))
    with pytest.raises(SplitlabError, match="shapes only"):
        GradientRecord.from_transcript(_shapes_only(), samples)


def _shapes_only():
    from vfl.protocol import CutGradient, Transcript

    t = Transcript(keep_tensors=False)
    t.record(CutGradient(0, torch.zeros(2, 3)))
    return t


@pytest.mark.slow
def test_the_observing_party_keeps_exactly_the_gradients_the_label_party_returned():
    victim = LabelVictim(arch="small-mlp", cut_layer=1, epochs=1, batch_size=500, device="cpu",
                         send_back="gradient-noise:ratio=0.5")
    data = task_data(victim)
    trained = train_victim(victim, data, progress=False)
    record = GradientRecord.from_transcript(trained.client.seen, trained.samples)
    assert len(record.steps) == 8 and torch.equal(record.targets.sort().values, torch.arange(len(data.train)))
    returned = []
    respond = trained.server.respond

    def capture(message, labels):
        out = respond(message, labels)
        returned.append(out.tensor.clone())
        return out

    trained.server.respond = capture                   # one more round, to compare what crosses the cut
    x, y = data.train.images[:7], data.train.labels[:7]
    from vfl.protocol import exchange
    exchange(trained.client, trained.server, x, y, 99)
    assert torch.equal(trained.client.seen.entries[-1].tensor, returned[0])


def test_the_victim_model_has_one_output_per_class_and_splits_as_top_says():
    shapes = {}
    for top in ("model", "linear", "none"):
        bottom, head = build_models(LabelVictim(top=top, task="binary"))
        x = torch.zeros(1, 1, 28, 28)
        shapes[top] = (tuple(bottom(x).shape), tuple(head(bottom(x)).shape))
    assert shapes == {"model": ((1, 120), (1, 2)), "linear": ((1, 84), (1, 2)), "none": ((1, 2), (1, 2))}
    same = build_models(LabelVictim(task="multiclass", top="model"))[0]
    assert torch.equal(same[0].weight, build_models(LabelVictim(task="binary"))[0][0].weight)


def test_the_malicious_optimiser_scales_a_steady_update_up_to_its_bound():
    p = nn.Parameter(torch.zeros(3))
    opt = MaliciousSGD([p], lr=1.0, momentum=0.0, gamma=1.0, max_ratio=5.0)
    steps = []
    for grad in (torch.tensor([1.0, 1.0, 1.0]), torch.tensor([1.0, -1.0, 10.0])):
        before = p.detach().clone()
        p.grad = grad
        opt.step()
        steps.append(before - p.detach())
    assert torch.equal(steps[0], torch.ones(3))                      # the first step is plain SGD
    assert torch.equal(steps[1], torch.tensor([2.0, -1.0, 50.0]))     # 1 + 1/1 = 2; a sign change: 1; capped at 5


@pytest.mark.parametrize("args,message", [
    (["label-norm", "--task", "multiclass"], "binary task"),
    (["label-direct", "--top", "model"], "needs --top none"),
    (["label-unsplit", "--top", "model"], "needs --top linear"),
    (["label-norm", "--send-back", "marvell:scale=1", "--task", "multiclass"], "binary"),
    (["label-direction", "--send-back", "sparsify:drop=2"], "drop"),
    (["label-norm", "--positive", "12"], "classes 0 to 9"),
    (["label-completion", "--task", "multiclass", "--positive", "3"], "names the positive class of --task binary; this task is multiclass"),
    (["label-norm", "--arch", "mlp-mixer"], "takes 3x32x32"),
    (["label-completion", "--labelled", "0"], "--labelled"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(args, message, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["attack", *args, "--out", str(out)])
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_the_api_and_the_command_agree_and_noise_stops_the_direct_attack(tmp_path):
    common = {"arch": "small-mlp", "epochs": 1, "batch_size": 200, "device": "cpu"}
    outcome = api.attack("label-direct", **common)
    assert outcome.metrics["label_accuracy"] == 1.0 and outcome.metrics["accuracy"] > 0.15          # chance: 0.1
    result = runner.invoke(app, ["attack", "label-direct", "--arch", "small-mlp", "--epochs", "1", "--batch-size",
                                 "200", "--device", "cpu", "--json", "--out", str(tmp_path / "cli")])
    assert json.loads(result.stdout)["metrics"]["accuracy"] == outcome.metrics["accuracy"]
    noisy = api.attack("label-direct", send_back="gradient-noise:ratio=20", **common)
    assert noisy.metrics["label_accuracy"] < 0.6
    with pytest.raises(SplitlabError, match="attacks a binary task"):
        api.attack("label-norm", task="multiclass", cut_layer=1, **common)


def test_the_attacking_party_runs_its_own_bottom_through_its_secret_transform_not_its_noise():
    """label-completion fine-tunes the feature party's own bottom model on its raw inputs: the party knows its
    orthogonal U, so its forward path is x -> xU -> bottom; the input noise it adds to what it sends is not in it."""
    from attacks.split.labels.observation import OwnBottom
    from vfl.defences import parse_defences

    defences = parse_defences("orthogonal:seed=4+input-dp:sigma=5", (1, 28, 28))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 3))
    x = torch.rand(5, 1, 28, 28)
    own = OwnBottom(model, defences)
    assert torch.equal(own(x), model(defences[0].on_input(x, False)))
    assert not torch.allclose(own(x), model(x)) and list(own.parameters()) == list(model.parameters())


def test_a_round_whose_median_norm_is_zero_keeps_finite_scores_and_its_ranking():
    from attacks.split.label_norm.rounds import relative_to_round

    # round 0: most gradients rounded to nothing (as DCAE's bins leave them), round 1: an ordinary round
    norms = torch.tensor([0.0, 0.0, 0.0, 300.0, 150.0, 0.0, 1.0, 2.0], dtype=torch.float64)
    rounds = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])
    scores = relative_to_round(norms, rounds)
    assert torch.isfinite(scores.float()).all()
    assert scores.tolist() == [0.0, 0.0, 0.0, 1.0, 0.5, 0.0, 1.0, 2.0]      # 0: over its largest; 1: its median

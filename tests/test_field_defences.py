"""The field's VFL defences (label-rr, clipped-noise, grad-perturb, mid, nopeek) against the attacks they were made
against, on one fixed small case (small-mlp, cut 1, one epoch, seed 0): at zero strength a whole run is the
undefended run bit for bit; at the paper's strongest setting the attack is measurably weaker; what each did is in
the run's metrics (its cost in accuracy beside it)."""
from __future__ import annotations

import math

import pytest
import torch

from splitlab import api
from vfl.defences import registry
from vfl.defences.gradient_dp import GradPerturb
from vfl.defences.label_dp import RandomisedResponse, keep_probability
from vfl.defences.nopeek import distance_correlation
from vfl.errors import SplitlabError

CASE = dict(arch="small-mlp", cut_layer=1, epochs=1, iterations=1, seed=0)


@pytest.fixture(scope="module")
def undefended():
    return api.attack("label-norm", **CASE).metrics


def label_norm(send_back: str) -> dict:
    return api.attack("label-norm", send_back=send_back, **CASE).metrics


def leak(metrics: dict) -> float:
    """How far the attack's AUC is from chance (an AUC below 0.5 leaks as much, read the other way)."""
    return abs(metrics["leak_auc"] - 0.5)


@pytest.mark.parametrize("zero", ["label-rr:epsilon=100", "clipped-noise:scale=0", "clipped-noise:mechanism=laplace,scale=0"])
def test_a_label_party_defence_at_zero_strength_is_the_undefended_run_bit_for_bit(undefended, zero):
    m = label_norm(zero)
    assert m["leak_auc"] == undefended["leak_auc"] and m["accuracy"] == undefended["accuracy"]
    assert m["label_accuracy"] == undefended["label_accuracy"]


@pytest.mark.parametrize("strongest", ["label-rr:epsilon=1", "clipped-noise:scale=0.1", "grad-perturb:epsilon=0.01",
                                       "mid:lam=10000"])
def test_at_its_strongest_setting_a_label_defence_weakens_the_norm_attack(undefended, strongest):
    m = label_norm(strongest)
    assert leak(undefended) > 0.45                     # the undefended norm attack all but reads the labels
    assert leak(m) < leak(undefended) - 0.15, (strongest, m["leak_auc"])
    assert m["send_back"] == strongest and 0 < m["accuracy"] <= 1 and m["defence_report"]


def test_label_rr_records_the_epsilon_it_computed_and_keeps_labels_at_its_rate(undefended):
    m = label_norm("label-rr:epsilon=1")["defence_report"]
    assert m["label_dp_epsilon"] == pytest.approx(1.0, abs=1e-12)
    assert m["label_rr_keep_probability"] == pytest.approx(math.e / (math.e + 1))
    labels = torch.arange(40_000) % 10
    rr = RandomisedResponse(2.0, 10, seed=3)
    noisy = rr.on_training_labels(labels)
    kept = keep_probability(2.0, 10)
    assert abs(float((noisy == labels).double().mean()) - kept) < 0.01          # ~5 standard errors
    wrong = noisy[noisy != labels] - labels[noisy != labels]
    assert set(torch.unique(wrong % 10).tolist()) == set(range(1, 10))          # every other class, none favoured
    assert torch.equal(rr.on_training_labels(labels), noisy)                     # drawn once: the same every call
    assert keep_probability(100.0, 1000) == 1.0


def test_grad_perturb_is_the_laplace_mechanism_on_the_one_hot_label():
    g = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    per_class = [torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([[0.0, 1.0], [0.0, 1.0]])]
    defence = GradPerturb(epsilon=1.0, seed=0)
    defence.on_training_labels(torch.tensor([0, 1]))
    defence.per_class = per_class
    out = defence.on_send(g, torch.tensor([0, 1]))
    u = out - g                                          # coefficients u_ic on the class gradients e_c
    reference = GradPerturb(epsilon=1.0, seed=0).noise.laplace_like(torch.empty(2, 2))
    assert torch.allclose(u, reference)                  # scale 2 / epsilon, from its own stream
    assert defence.report()["label_dp_epsilon_composed"] == 1.0
    with pytest.raises(RuntimeError, match="per-class gradients"):
        defence.on_send(g, torch.tensor([0, 1]))         # used once: the label party gives them every batch


def test_mid_refuses_a_label_party_without_a_model_in_one_line():
    with pytest.raises(SplitlabError, match="no model to train"):
        api.attack("label-direct", send_back="mid:lam=1", epochs=1, iterations=1)


def test_distance_correlation_is_one_for_a_scaled_copy_and_lower_for_independent_rows():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 20, generator=g)
    assert float(distance_correlation(x, 3 * x + 1)) == pytest.approx(1.0, abs=1e-5)
    independent = float(distance_correlation(x, torch.randn(256, 20, generator=g)))   # biased above 0 in 20-d
    assert independent < float(distance_correlation(x, x[:, :5])) - 0.2
    h = x.clone().requires_grad_(True)
    distance_correlation(x, h @ torch.randn(20, 5, generator=g)).backward()
    assert torch.isfinite(h.grad).all()                  # the zero distances on the diagonal give no nan


def test_nopeek_lowers_the_distance_correlation_the_client_leaves_in_its_activations():
    from vfl import data

    images = data.load("mnist5k", "test").images[:512]
    plain = api.train("small-mlp", cut_layer=1, epochs=1, seed=0)
    defended = api.train("small-mlp", cut_layer=1, epochs=1, seed=0, defence="nopeek:alpha=3")
    with torch.no_grad():
        before = float(distance_correlation(images, plain.client.infer(images)))
        after = float(distance_correlation(images, defended.client.infer(images)))
    assert after < before - 0.1, (before, after)
    zero = api.train("small-mlp", cut_layer=1, epochs=1, seed=0, defence="nopeek:alpha=0")
    assert zero.accuracy == plain.accuracy
    assert all(torch.equal(a, b) for a, b in zip(zero.client.model.state_dict().values(),
                                                 plain.client.model.state_dict().values()))

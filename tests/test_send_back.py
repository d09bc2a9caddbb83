"""The label party's send-back defences (vfl/defences/send_back.py) and Marvell's noise design (vfl/marvell.py)."""
import math

import numpy as np
import pytest
import torch
from torch import nn

from vfl.errors import SplitlabError
from vfl.marvell import solve, sum_kl
from vfl.protocol import Activations, Server
from vfl.defences import check_send_back, parse_send_back
from vfl.defences.send_back import IsoNoise, Marvell, MaxNorm, Sparsify


def _batch(n=64, d=12, positives=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    grads = torch.randn(n, d, generator=g) * 0.01
    labels = torch.zeros(n, dtype=torch.long)
    labels[:positives] = 1
    grads[:positives] += 0.5                        # positives' gradients are larger, as in Li et al.'s Sec. 3
    return grads, labels


def test_max_norm_gives_every_example_the_largest_expected_squared_norm_and_keeps_its_direction():
    grads, labels = _batch()
    defence = MaxNorm(seed=1)
    draws = torch.stack([defence.on_send(grads, labels) for _ in range(4000)])
    expected = draws.pow(2).sum(-1).mean(0)
    target = grads.pow(2).sum(1).max()
    assert torch.allclose(expected, target.expand_as(expected), rtol=0.08)
    cosine = nn.functional.cosine_similarity(draws[0], grads, dim=1)
    assert torch.allclose(cosine.abs(), torch.ones_like(cosine), atol=1e-5)


def test_iso_noise_scales_with_the_batch_largest_gradient_and_sigma_is_absolute():
    grads, labels = _batch(d=400)
    noisy = IsoNoise(ratio=2.0, seed=3).on_send(grads, labels) - grads
    expected = 2.0 * grads.norm(dim=1).max() / math.sqrt(400)
    assert abs(float(noisy.std()) / float(expected) - 1) < 0.05
    fixed = IsoNoise(sigma=0.3, seed=3).on_send(grads, labels) - grads
    assert abs(float(fixed.std()) - 0.3) < 0.02


def test_sparsify_zeroes_the_smallest_entries_of_each_example():
    grads, labels = _batch(d=10)
    out = Sparsify(0.7).on_send(grads, labels)
    assert ((out == 0).sum(1) == 7).all()
    kept = out != 0
    assert (grads.abs()[kept].min() >= grads.abs()[~kept].reshape(len(grads), -1).max(1).values.min())


def _random_feasible(u, v, d, p, scale, rng):
    share = rng.dirichlet(np.ones(4)) * rng.uniform(0, 1)
    weights = np.array([1 - p, (1 - p) * (d - 1), p, p * (d - 1)])
    lam = share * scale / weights
    lam[1], lam[3] = min(lam[1], lam[0]), min(lam[3], lam[2])
    return sum_kl(*lam, u, v, d, 1.0)


@pytest.mark.parametrize("u,v,d,p", [(0.01, 0.02, 120, 0.1), (0.3, 0.05, 10, 0.3), (1.0, 0.0, 500, 0.02)])
def test_marvell_solution_is_feasible_and_no_random_feasible_noise_does_better(u, v, d, p):
    rng = np.random.default_rng(0)
    for scale in (0.25, 1.0, 4.0):
        s = solve(u, v, d, 1.0, p, scale)
        power = p * (s.lam11 + (d - 1) * s.lam21) + (1 - p) * (s.lam10 + (d - 1) * s.lam20)
        assert power <= scale * (1 + 1e-6) and s.lam20 <= s.lam10 + 1e-12 and s.lam21 <= s.lam11 + 1e-12
        best_random = min(_random_feasible(u, v, d, p, scale, rng) for _ in range(3000))
        assert s.sum_kl <= best_random * (1 + 1e-3) + 1e-9
        assert s.sum_kl < s.sum_kl_before


def test_marvell_leaks_less_as_the_budget_grows_and_is_invariant_to_the_gradient_scale():
    values = [solve(0.01, 0.02, 50, 1.0, 0.1, scale).sum_kl for scale in (0.1, 0.5, 2.0, 8.0)]
    assert values == sorted(values, reverse=True)
    small, large = solve(0.01, 0.02, 50, 1.0, 0.1, 1.0), solve(1e-8, 2e-8, 50, 1e-6, 0.1, 1.0)
    assert math.isclose(small.sum_kl, large.sum_kl, rel_tol=1e-6)
    assert math.isclose(large.lam10, 1e-6 * small.lam10, rel_tol=1e-4)


def test_marvell_draws_class_dependent_noise_with_the_solved_variance_along_the_class_gap():
    grads, labels = _batch(n=8000, d=8, positives=2000)
    defence = Marvell(scale=2.0, seed=0)
    noise = defence.on_send(grads, labels) - grads
    s = defence.solutions[-1]
    gap = grads[labels == 1].mean(0) - grads[labels == 0].mean(0)
    along = noise @ (gap / gap.norm())
    assert abs(float(along[labels == 1].var()) / s.lam11 - 1) < 0.1
    assert abs(float(along[labels == 0].var()) / s.lam10 - 1) < 0.1
    assert defence.report()["marvell_batches"] == 1 and s.sum_kl < s.sum_kl_before


def test_marvell_reuses_the_last_solution_for_a_batch_of_one_class_and_sends_none_before_the_first():
    grads, labels = _batch()
    defence = Marvell(scale=1.0)
    negatives = torch.zeros_like(labels)
    assert torch.equal(defence.on_send(grads, negatives), grads)
    defence.on_send(grads, labels)
    assert not torch.equal(defence.on_send(grads, negatives), grads) and len(defence.solutions) == 1


@pytest.mark.parametrize("spec,message", [
    ("marvell", "needs option scale"), ("marvell:scale=-1", "scale"), ("sparsify:drop=1", "drop"),
    ("gradient-noise", "one of ratio"), ("gradient-noise:ratio=1,sigma=1", "one of ratio"), ("lol", "unknown"),
    ("max-norm+", "empty item"), ("max-norm:scale=1", "does not take"),
])
def test_bad_send_back_specs_are_one_line_errors(spec, message):
    with pytest.raises(SplitlabError, match=message):
        check_send_back(spec, 2)


def test_marvell_refuses_a_multiclass_task():
    with pytest.raises(SplitlabError, match="binary"):
        parse_send_back("marvell:scale=1", 10)
    assert [type(d) for d in parse_send_back("max-norm+sparsify:drop=0.5+none", 10)] == [MaxNorm, Sparsify]


def test_the_server_trains_on_the_true_gradient_and_sends_back_the_defended_one():
    torch.manual_seed(0)
    h = torch.randn(16, 6)
    labels = torch.randint(0, 2, (16,))
    plain_top, defended_top = nn.Linear(6, 2), nn.Linear(6, 2)
    defended_top.load_state_dict(plain_top.state_dict())
    plain = Server(plain_top, torch.optim.SGD(plain_top.parameters(), lr=0.1))
    defended = Server(defended_top, torch.optim.SGD(defended_top.parameters(), lr=0.1),
                      defences=[IsoNoise(sigma=1.0)])
    clean = plain.respond(Activations(0, h), labels).tensor
    noisy = defended.respond(Activations(0, h), labels).tensor
    assert torch.equal(plain_top.weight, defended_top.weight)
    assert not torch.allclose(clean, noisy)


@pytest.mark.parametrize("spec", ["marvell:scale=1", "gradient-noise:ratio=1", "max-norm", "clipped-noise:scale=0.1"])
def test_a_send_back_defence_resumes_its_noise_from_a_checkpoint_bit_for_bit(spec):
    """The wire server's checkpoint holds its defences' state: a resumed run draws the noise the uninterrupted one
    would, not its first epoch's again."""
    import io

    from vfl.wire.server import _restore, _state
    from vfl.protocol import Server
    from vfl.training import FitState

    g = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    labels = (torch.arange(64) % 7 == 0).long()
    def server() -> Server:
        model = torch.nn.Linear(8, 2)
        return Server(model, torch.optim.SGD(model.parameters(), lr=0.1), defences=parse_send_back(spec, 2))
    running = server()
    running.defences[0].on_send(g, labels)
    buffer = io.BytesIO()
    torch.save({**_state(running, torch.Generator(), FitState(), []), "epoch": 1}, buffer)
    uninterrupted = running.defences[0].on_send(g, labels)
    resumed = server()
    buffer.seek(0)
    _restore(torch.load(buffer, weights_only=True), resumed, torch.Generator())
    fresh = server().defences[0].on_send(g, labels)
    assert torch.equal(resumed.defences[0].on_send(g, labels), uninterrupted)
    assert not torch.equal(fresh, uninterrupted)                   # what a resume without the state would send

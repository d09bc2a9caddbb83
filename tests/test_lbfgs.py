"""The engine's L-BFGS (`attacks.engine.lbfgs.BatchedLBFGS`): each trial follows `torch.optim.LBFGS` run on it
alone (in float64, where the compact direction and torch's two-loop recursion agree to rounding), and the
optimiser's own arithmetic runs on one thread while the objective runs on the caller's."""
import pytest
import torch
from torch import nn

from attacks.engine import LBFGS, BatchedLBFGS, Block, EngineOptions, FedSGDGradient, Objective, Schedule, SquaredL2, run


def _quartic(x, a, b, c=0.1):
    return 0.5 * x @ a @ x - b @ x + c * (x ** 4).sum()


@pytest.mark.parametrize("history_size", [100, 2])
def test_batched_lbfgs_equals_torch_lbfgs_per_trial(history_size):
    torch.manual_seed(0)
    trials, n = 3, 6
    mats = [(lambda m: m @ m.T + 0.1 * torch.eye(n))(torch.randn(n, n, dtype=torch.float64)) for _ in range(trials)]
    mats[1], quartic = 2 * torch.eye(n, dtype=torch.float64), [0.1, 0.0, 0.1]   # trial 1 converges in 2 iterations
    vecs = [torch.randn(n, dtype=torch.float64) for _ in range(trials)]
    x0 = torch.randn(trials, n, dtype=torch.float64)

    xb = x0.clone().requires_grad_()
    batched = BatchedLBFGS([xb], max_iter=4, history_size=history_size)

    def closure():
        xb.grad = None
        losses = torch.stack([_quartic(xb[r], mats[r], vecs[r], quartic[r]) for r in range(trials)])
        losses.sum().backward()
        return losses.detach()

    singles = []
    for r in range(trials):
        x = x0[r].clone().requires_grad_()
        singles.append((x, torch.optim.LBFGS([x], lr=1, max_iter=4, history_size=history_size)))
    for _ in range(5):
        batched.step(closure)
        for r, (x, opt) in enumerate(singles):
            def single_closure(x=x, opt=opt, r=r):
                opt.zero_grad()
                loss = _quartic(x, mats[r], vecs[r], quartic[r])
                loss.backward()
                return loss
            opt.step(single_closure)
    assert len(set(batched.n_iter.tolist())) == trials          # the trials stopped at different iterations
    for r, (x, _) in enumerate(singles):
        torch.testing.assert_close(xb[r].detach(), x.detach(), rtol=1e-10, atol=1e-12)


def test_lbfgs_runs_its_own_arithmetic_on_one_thread_and_the_closure_on_the_callers():
    start = torch.randn(2, 6, dtype=torch.float64)
    finals, seen = [], []
    for threads in (2, 1):
        x = start.clone().requires_grad_(True)

        def closure():
            seen.append((threads, torch.get_num_threads()))
            x.grad = None
            losses = ((x - 1) ** 4).sum(1)
            losses.sum().backward()
            return losses.detach()

        torch.set_num_threads(threads)          # the suite runs on one thread; its fixture restores it
        BatchedLBFGS([x], max_iter=5).step(closure)
        assert torch.get_num_threads() == threads
        finals.append(x.detach())
    assert {given for given, _ in seen} == {1, 2} and all(given == inside for given, inside in seen)
    assert torch.equal(finals[0], finals[1])


def test_engine_lbfgs_on_one_trial_follows_torch_lbfgs():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 5, padding=2, stride=2), nn.Sigmoid(), nn.Flatten(),
                        nn.Linear(4 * 7 * 7, 10)).double()
    params = {k: v.detach() for k, v in net.named_parameters()}
    sim, labels = FedSGDGradient(net), torch.tensor([3])
    observed = sim({"x": torch.rand(1, 1, 14, 14, dtype=torch.float64)}, {"params": params, "labels": labels})
    target = {"observed": observed, "context": {"params": params, "labels": labels}}
    variables = {"x": torch.rand(1, 1, 1, 14, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(1))}
    objective = Objective(sim, SquaredL2())
    result = run(objective, variables, target, Schedule((Block(("x",), LBFGS(), 2),)), EngineOptions(mode="sequential"))
    x = variables["x"][0].clone().requires_grad_()
    opt = torch.optim.LBFGS([x], lr=1)

    def closure():
        opt.zero_grad()
        loss = objective({"x": x}, target)["match"]
        loss.backward()
        return loss
    for _ in range(2):
        opt.step(closure)
    torch.testing.assert_close(result.final["x"][0], x.detach(), rtol=1e-8, atol=1e-10)

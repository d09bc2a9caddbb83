"""The engine: batched trials equal sequential ones, divergence is per trial (L-BFGS against torch's: test_lbfgs.py)."""
import pytest
import torch
from torch import nn

from attacks.engine import (L1, LBFGS, SGD, Adam, Block, BNStatistics, BoxClamp, Cosine, Prior,
                            CutActivations, EngineOptions, FedAvgUpdate, FedSGDGradient, MeanSquared, Objective,
                            Schedule, SignedGradients, SquaredL2, StepDecay, Sum, run, tv_l1, tv_squared)
from attacks.hfl.fedleak.parts import GradientBlend, TopMagnitude


def _small_net(dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(1, 4, 5, padding=2, stride=2), nn.Sigmoid(), nn.Flatten(),
                        nn.Linear(4 * 7 * 7, 10)).to(dtype)
    for p in net.parameters():
        nn.init.uniform_(p, -0.5, 0.5)
    return net, {k: v.detach() for k, v in net.named_parameters()}


def _gradient_problem(dtype=torch.float64, trials=3):
    net, params = _small_net(dtype)
    sim = FedSGDGradient(net)
    x_true = torch.rand(1, 1, 14, 14, dtype=dtype)
    observed = sim({"x": x_true}, {"params": params, "labels": torch.tensor([3])})
    target = {"observed": observed, "context": {"params": params, "labels": torch.tensor([3])}}
    g = torch.Generator().manual_seed(1)
    variables = {"x": torch.rand(trials, 1, 1, 14, 14, generator=g, dtype=dtype)}
    return sim, target, variables, x_true


# --- batched vs sequential -------------------------------------------------------------------------

def test_batched_adam_trials_equal_sequential_trials():
    sim, target, variables, _ = _gradient_problem()
    objective = Objective(sim, Cosine(), priors=(Prior("tv", "x", tv_l1, 1e-2),))
    schedule = Schedule((Block(("x",), Adam(0.1), 30,
                               hooks=(SignedGradients(), BoxClamp()), decay=StepDecay()),))
    batched = run(objective, variables, target, schedule)
    sequential = run(objective, variables, target, schedule, EngineOptions(mode="sequential"))
    assert batched.mode == "batched" and sequential.mode == "sequential"
    torch.testing.assert_close(batched.final["x"], sequential.final["x"], rtol=0, atol=1e-10)
    torch.testing.assert_close(batched.best["x"], sequential.best["x"], rtol=0, atol=1e-10)
    torch.testing.assert_close(batched.trace["match"], sequential.trace["match"], rtol=1e-9, atol=1e-12)


def test_batched_lbfgs_trials_equal_sequential_after_a_step():
    # L-BFGS without a line search amplifies round-off chaotically on DLG problems, so compare one step.
    sim, target, variables, _ = _gradient_problem()
    variables["label_logits"] = torch.randn(3, 1, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    target = {"observed": target["observed"], "context": {"params": target["context"]["params"]}}
    schedule = Schedule((Block(("x", "label_logits"), LBFGS(), 1),))
    objective = Objective(sim, SquaredL2())
    batched = run(objective, variables, target, schedule, keep=("x", "label_logits"))
    sequential = run(objective, variables, target, schedule, EngineOptions(mode="sequential"),
                     keep=("x", "label_logits"))
    torch.testing.assert_close(batched.final["x"], sequential.final["x"], rtol=1e-6, atol=1e-6)


def test_per_trial_clones_and_targets_batched_equal_sequential():
    torch.manual_seed(0)
    clone = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()).double()
    trials = 4
    clones = {k: torch.stack([torch.randn_like(v) * 0.3 for _ in range(trials)])
              for k, v in clone.named_parameters()}
    variables = {"x": torch.full((trials, 1, 1, 8, 8), 0.5, dtype=torch.float64), "clone": clones}
    target = {"observed": [torch.rand(trials, 1, 2, 6, 6, dtype=torch.float64)]}
    objective = Objective(CutActivations(clone), MeanSquared(), priors=(Prior("tv", "x", tv_squared, 0.1),))
    schedule = Schedule((Block(("x",), Adam(1e-2, amsgrad=True), 5),
                         Block(("clone",), Adam(1e-2, amsgrad=True), 5, select=False, terms=("match",))), rounds=3)
    batched = run(objective, variables, target, schedule, per_trial_target=True, keep=("x", "clone"))
    sequential = run(objective, variables, target, schedule, EngineOptions(mode="sequential"), per_trial_target=True,
                     keep=("x", "clone"))
    torch.testing.assert_close(batched.final["x"], sequential.final["x"], rtol=0, atol=1e-12)
    for k in clones:
        torch.testing.assert_close(batched.final["clone"][k], sequential.final["clone"][k], rtol=0, atol=1e-12)
    assert batched.trace["match"].shape == (schedule.steps, trials)


# --- schedule, selection, divergence ---------------------------------------------------------------

def test_blocks_only_move_their_own_variables():
    clone = nn.Linear(4, 3).double()
    variables = {"x": torch.rand(2, 1, 4, dtype=torch.float64),
                 "clone": {k: v.detach().expand(2, *v.shape).clone() for k, v in clone.named_parameters()}}
    target = {"observed": [torch.rand(2, 1, 3, dtype=torch.float64)]}
    objective = Objective(CutActivations(clone), MeanSquared())
    only_x = Schedule((Block(("x",), SGD(0.5), 3),))
    result = run(objective, variables, target, only_x, per_trial_target=True)
    assert not torch.equal(result.final["x"], variables["x"])
    for k, v in variables["clone"].items():
        assert torch.equal(result.final["clone"][k], v)


def test_best_iterate_is_the_lowest_loss_seen():
    sim, target, variables, _ = _gradient_problem()
    objective = Objective(sim, SquaredL2())
    result = run(objective, variables, target, Schedule((Block(("x",), Adam(0.3), 25),)))
    lowest = torch.minimum(result.trace["match"].min(0).values, result.final_terms["match"])
    torch.testing.assert_close(result.best_loss, lowest)
    rescored = run(objective, result.best, target, Schedule((Block(("x",), SGD(0.0), 0),)))
    torch.testing.assert_close(rescored.final_terms["match"], result.best_loss)


def test_a_diverging_trial_is_reported_and_the_others_finish():
    sim, target, variables, _ = _gradient_problem()
    variables["x"][1] = float("nan")
    objective = Objective(sim, Cosine())
    schedule = Schedule((Block(("x",), Adam(0.1), 10),))
    result = run(objective, variables, target, schedule)
    assert result.diverged.tolist() == [False, True, False]
    assert torch.isfinite(result.best_loss[[0, 2]]).all() and torch.isinf(result.best_loss[1])
    healthy = {"x": variables["x"][[0, 2]]}
    reference = run(objective, healthy, target, schedule)
    torch.testing.assert_close(result.final["x"][[0, 2]], reference.final["x"], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_dlg_style_run_reconstructs_the_target():
    sim, target, variables, x_true = _gradient_problem(trials=2)
    objective = Objective(sim, SquaredL2())
    result = run(objective, variables, target, Schedule((Block(("x",), LBFGS(), 20),)))
    mse = ((result.best["x"][:, 0] - x_true) ** 2).flatten(1).mean(1)
    assert float(mse.min()) < 1e-4


# --- parts -----------------------------------------------------------------------------------------

def test_matches_give_their_distances_on_known_tensors():
    a = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])]
    b = [torch.tensor([1.0, 0.0]), torch.tensor([[1.0]])]
    assert float(SquaredL2()(a, b)) == 8.0
    assert float(SquaredL2(weights=[1.0, 0.5])(a, b)) == 6.0
    assert float(L1()(a, b)) == 4.0
    assert abs(float(Cosine()(a, a))) < 1e-7
    assert abs(float(Cosine()(a, [-t for t in a])) - 2.0) < 1e-6
    # layer weights [1, 0.5]: <a,b> = 1 + 0.5 * 3, |a|^2 = 5 + 0.5 * 9, |b|^2 = 1 + 0.5 * 1
    assert float(Cosine(weights=[1.0, 0.5])(a, b)) == pytest.approx(1 - 2.5 / (9.5 * 1.5) ** 0.5, rel=1e-6)
    with pytest.raises(ValueError, match="non-negative"):
        Cosine(weights=[1.0, -0.5])
    mask = TopMagnitude(0.5)([torch.tensor([0.1, -5.0, 3.0, 0.2])], [torch.zeros(4)])[0]
    assert mask.tolist() == [0.0, 1.0, 1.0, 0.0]


def test_priors_give_their_values_on_known_images():
    assert float(tv_l1(torch.ones(1, 1, 4, 4))) == 0.0
    x = torch.zeros(1, 1, 2, 2)
    x[..., 0, 0] = 1.0                     # dy: one of 2 entries is -1; dx: one of 2 entries is -1
    assert float(tv_squared(x)) == 1.0
    assert float(tv_l1(x)) == 1.0
    bn_net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).eval()
    params = {k: v.detach() for k, v in bn_net.named_parameters()}
    data = torch.rand(8, 1, 6, 6)
    with torch.no_grad():
        z = bn_net[0](data)
        bn_net[1].running_mean.copy_(z.mean((0, 2, 3)))
        bn_net[1].running_var.copy_(z.var((0, 2, 3), unbiased=False))
    prior = BNStatistics(bn_net, params)
    assert float(prior(data)) < 1e-5 < float(prior(torch.rand(8, 1, 6, 6) * 3))


def test_fedavg_one_step_is_lr_times_the_fedsgd_gradient():
    net, params = _small_net()
    x, y = torch.rand(4, 1, 14, 14, dtype=torch.float64), torch.tensor([1, 2, 3, 4])
    context = {"params": params, "labels": y}
    update = FedAvgUpdate(net, lr=0.1, epochs=1, batch_size=4)({"x": x}, context)
    gradient = FedSGDGradient(net)({"x": x}, context)
    for u, g in zip(update, gradient):
        torch.testing.assert_close(u, 0.1 * g)
    two_steps = FedAvgUpdate(net, lr=0.1, epochs=1, batch_size=2)({"x": x}, context)
    assert not torch.allclose(two_steps[0], update[0])


def test_signed_adam_moves_every_pixel_by_lr_and_box_holds():
    variables = {"x": torch.full((2, 1, 1, 3, 3), 0.5, dtype=torch.float64)}
    target = {"observed": [torch.zeros(2, 1, 1, 3, 3, dtype=torch.float64)]}

    def identity(v, context):
        return [v["x"] * torch.linspace(1, 2, 9, dtype=torch.float64).view(1, 1, 3, 3)]

    objective = Objective(identity, SquaredL2())
    one = run(objective, variables, target, Schedule((Block(("x",), Adam(0.1), 1,
                                                            hooks=(SignedGradients(),)),)),
              per_trial_target=True)
    torch.testing.assert_close(one.final["x"], torch.full_like(variables["x"], 0.4))
    many = run(objective, variables, target, Schedule((Block(("x",), Adam(0.3), 20,
                                                             hooks=(SignedGradients(), BoxClamp(0.2, 1.0))),)),
               per_trial_target=True)
    assert float(many.final["x"].min()) >= 0.2 - 1e-12


def test_gradient_blend_reproduces_fedleaks_toy_example():
    # minimise x^2 from 0.5: plain gradient 1; the look-ahead probe at -0.5 has gradient -1;
    # with weight 0.3 the blended direction is 0.7 * 1 + 0.3 * (-1) = 0.4 (FedLeak, Appendix D).
    variables = {"x": torch.full((1, 1), 0.5, dtype=torch.float64)}
    objective = Objective(lambda v, c: [v["x"]], SquaredL2())
    target = {"observed": [torch.zeros(1, dtype=torch.float64)]}
    blend = GradientBlend(weight=0.3, k=1.0, lookahead=True)
    result = run(objective, variables, target,
                 Schedule((Block(("x",), SGD(1.0), 1, hooks=(blend,)),)))
    torch.testing.assert_close(result.final["x"], torch.full((1, 1), 0.5 - 0.4, dtype=torch.float64))


def test_step_decay_follows_the_fractions():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = StepDecay().build(opt, total_steps=8)
    lrs = []
    for _ in range(8):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([1, 1, 1, 0.1, 0.1, 0.01, 0.01, 0.001])


@pytest.mark.parametrize("total,fractions", [(8, (3 / 8, 5 / 8, 7 / 8)), (2, (3 / 8, 5 / 8, 7 / 8)), (5, (0.2, 0.2, 0.9))])
def test_step_decay_gives_multisteplr_learning_rates_bit_for_bit(total, fractions):
    # milestone 0 (applied at construction) and repeated milestones included
    ours, theirs = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), \
        torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    decay = StepDecay(fractions, 0.3).build(ours, total)
    reference = torch.optim.lr_scheduler.MultiStepLR(theirs, [int(f * total) for f in fractions], gamma=0.3)
    for _ in range(total + 1):
        assert ours.param_groups[0]["lr"] == theirs.param_groups[0]["lr"]
        theirs.step()
        decay.step()
        reference.step()


@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_adam_steps_as_torch_fused_adam_bit_for_bit(amsgrad):
    g = torch.Generator().manual_seed(0)
    start = [torch.randn(3, 4, generator=g), torch.randn(5, generator=g)]
    ours_params = [t.clone() for t in start]
    theirs_params = [t.clone().requires_grad_() for t in start]
    ours = Adam(0.05, amsgrad=amsgrad).build(ours_params)
    theirs = torch.optim.Adam(theirs_params, lr=0.05, amsgrad=amsgrad, fused=True)
    for _ in range(6):
        grads = [torch.randn(t.shape, generator=g) for t in start]
        for p, q, grad in zip(ours_params, theirs_params, grads):
            p.grad, q.grad = grad.clone(), grad.clone()
        ours.step()
        theirs.step()
        ours.param_groups[0]["lr"] *= 0.5                      # as StepDecay changes it
        theirs.param_groups[0]["lr"] *= 0.5
    assert all(torch.equal(p, q.detach()) for p, q in zip(ours_params, theirs_params))


def test_clone_steps_match_a_plain_adam_loop_even_with_transposed_gradients():
    # A Linear clone's weight gradient comes out of bmm transposed; the fused optimiser must still
    # see it element for element (a regression: it silently mis-read such gradients).
    torch.manual_seed(0)
    clone = nn.Linear(6, 5).double()
    x = torch.rand(1, 6, dtype=torch.float64)
    h = torch.rand(1, 5, dtype=torch.float64)
    variables = {"x": x.unsqueeze(0), "clone": {k: v.detach().unsqueeze(0).clone() for k, v in clone.named_parameters()}}
    schedule = Schedule((Block(("clone",), Adam(0.05, amsgrad=True), 15),))
    result = run(Objective(CutActivations(clone), MeanSquared()), variables, {"observed": [h.unsqueeze(0)]},
                 schedule, per_trial_target=True)
    opt = torch.optim.Adam(clone.parameters(), lr=0.05, amsgrad=True, foreach=False)
    for _ in range(15):
        opt.zero_grad()
        nn.functional.mse_loss(clone(x), h).backward()
        opt.step()
    torch.testing.assert_close(result.final["clone"]["weight"][0], clone.weight.detach(), rtol=1e-9, atol=1e-12)


def test_a_misspelt_term_fails_before_any_step():
    objective = Objective(lambda v, c: [v["x"]], SquaredL2(), priors=(Prior("tv", "x", tv_l1, 1e-2),))
    schedule = Schedule((Block(("x",), SGD(0.1), 1, terms=("match", "vt")),))
    with pytest.raises(ValueError, match="unknown objective term.*'vt'.*match, tv"):
        run(objective, {"x": torch.zeros(1, 1, 1, 4, 4)}, {"observed": [torch.zeros(1, 1, 4, 4)]}, schedule)
    with pytest.raises(ValueError, match="finite weight"):
        Prior("tv", "x", tv_l1, float("nan"))


def test_lbfgs_blocks_refuse_what_lbfgs_cannot_honour():
    with pytest.raises(ValueError, match="L-BFGS cannot apply gradient hooks.*SignedGradients"):
        Block(("x",), LBFGS(), 1, hooks=(SignedGradients(),))
    with pytest.raises(ValueError, match="L-BFGS takes no step decay"):
        Block(("x",), LBFGS(), 1, decay=StepDecay())
    Block(("x",), LBFGS(), 1, hooks=(BoxClamp(0.0, 1.0),))        # after-step hooks are fine


# --- speed paths give the same results ------------------------------------------------------------

def _twice(variables):
    """The same start as two identical trials, so the batched (vmapped) path runs it."""
    return {k: {n: torch.cat([t, t]) for n, t in v.items()} if isinstance(v, dict) else torch.cat([v, v])
            for k, v in variables.items()}


def _assert_same_trial(single, batched, keep=("x",)):
    for k in keep:
        for a, b in ((single.final[k], batched.final[k]), (single.best[k], batched.best[k])):
            pairs = zip(a.values(), b.values()) if isinstance(a, dict) else [(a, b)]
            for u, v in pairs:
                torch.testing.assert_close(u[0], v[0], rtol=0, atol=1e-12)
                torch.testing.assert_close(v[0], v[1], rtol=0, atol=0)
    assert single.best_loss.dtype == batched.best_loss.dtype == single.final["x"].dtype
    torch.testing.assert_close(single.best_loss[0], batched.best_loss[0], rtol=0, atol=1e-12)
    for name in single.trace:
        torch.testing.assert_close(single.trace[name][:, 0], batched.trace[name][:, 0], rtol=0, atol=1e-12,
                                   equal_nan=True)
        torch.testing.assert_close(single.final_terms[name], batched.final_terms[name][:1], rtol=0, atol=1e-12)


def test_one_trial_runs_unbatched_and_equals_a_vmapped_trial():
    sim, target, variables, _ = _gradient_problem(trials=1)
    transforms = []

    def simulator(v, context):                   # records whether a torch.func transform is active
        transforms.append(torch._C._functorch.peek_interpreter_stack() is not None)
        return sim(v, context)

    objective = Objective(simulator, Cosine(), priors=(Prior("tv", "x", tv_l1, 1e-2),))
    schedule = Schedule((Block(("x",), Adam(0.1), 12, hooks=(SignedGradients(), GradientBlend(0.5), BoxClamp()),
                               decay=StepDecay()),))
    single = run(objective, variables, target, schedule)
    assert single.mode == "batched" and not any(transforms)          # one trial: no vmap
    transforms.clear()
    batched = run(objective, _twice(variables), target, schedule)
    assert all(transforms)
    _assert_same_trial(single, batched)


def test_one_clone_trial_equals_a_vmapped_clone_trial():
    torch.manual_seed(0)
    clone = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(72, 5)).double()
    variables = {"x": torch.full((1, 1, 1, 8, 8), 0.5, dtype=torch.float64),
                 "clone": {k: v.detach().unsqueeze(0).clone() for k, v in clone.named_parameters()}}
    observed = torch.rand(1, 1, 5, dtype=torch.float64)
    objective = Objective(CutActivations(clone), MeanSquared(), priors=(Prior("tv", "x", tv_squared, 0.1),))
    schedule = Schedule((Block(("x",), Adam(1e-2, amsgrad=True), 4),
                         Block(("clone",), Adam(1e-2, amsgrad=True), 4, select=False, terms=("match",))), rounds=3)
    single = run(objective, variables, {"observed": [observed]}, schedule, per_trial_target=True,
                 keep=("x", "clone"))
    batched = run(objective, _twice(variables), {"observed": [torch.cat([observed, observed])]}, schedule,
                  per_trial_target=True, keep=("x", "clone"))
    _assert_same_trial(single, batched, keep=("x", "clone"))
    # the clone block computes only its match: the TV trace is NaN at clone steps, recorded at input steps
    tv = single.trace["tv"][:, 0].view(3, 8)
    assert torch.isnan(tv[:, 4:]).all() and torch.isfinite(tv[:, :4]).all()


def test_fedavg_update_without_vmap_equals_the_vmapped_update():
    # Later local steps differentiate through earlier ones: plain autograd must keep that graph as
    # torch.func.grad does.
    net, params = _small_net()
    x_true, y = torch.rand(4, 1, 14, 14, dtype=torch.float64), torch.tensor([1, 2, 3, 4])
    sim = FedAvgUpdate(net, lr=0.5, epochs=2, batch_size=2)
    context = {"params": params, "labels": y}
    target = {"observed": [t.detach() for t in sim({"x": x_true}, context)], "context": context}
    variables = {"x": torch.rand(1, 4, 1, 14, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(3))}
    schedule = Schedule((Block(("x",), Adam(0.05), 6),))
    objective = Objective(sim, SquaredL2())
    _assert_same_trial(run(objective, variables, target, schedule),
                       run(objective, _twice(variables), target, schedule))


def test_one_lbfgs_trial_equals_a_vmapped_trial_after_a_step():
    sim, target, variables, _ = _gradient_problem(trials=1)
    objective = Objective(sim, SquaredL2())
    schedule = Schedule((Block(("x",), LBFGS(), 1),))
    single = run(objective, variables, target, schedule)
    batched = run(objective, _twice(variables), target, schedule)
    torch.testing.assert_close(single.final["x"][0], batched.final["x"][0], rtol=0, atol=1e-10)


def test_engine_call_equals_functional_call_and_restores_the_module():
    from torch.func import functional_call
    from attacks.engine.simulators import call
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(48, 4))
    net = net.double().eval()
    own = {k: v.clone() for k, v in net.state_dict().items()}
    tensors = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in net.state_dict().items()}
    tensors = {k: v.abs() if "running_var" in k else v for k, v in tensors.items()}
    x = torch.rand(2, 1, 6, 6, dtype=torch.float64)
    assert torch.equal(call(net, tensors, x), functional_call(net, tensors, (x,)))
    assert all(torch.equal(v, own[k]) for k, v in net.state_dict().items())
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight                    # ties go through functional_call itself
    params = {k: torch.randn_like(v) for k, v in tied.named_parameters()}
    z = torch.rand(1, 4)
    assert torch.equal(call(tied, params, z), functional_call(tied, params, (z,)))


def test_auto_mode_picks_a_valid_mode_and_gives_that_modes_results(monkeypatch):
    from attacks.engine import auto_mode
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)        # the rule for one CPU thread
    sim, target, variables, _ = _gradient_problem()
    assert auto_mode(variables) == "batched"                        # dummy inputs against a shared model
    big = nn.Linear(300, 300)                                        # per-trial weights above the threshold
    clones = {k: v.detach().expand(2, *v.shape).clone() for k, v in big.named_parameters()}
    assert auto_mode({"x": torch.zeros(2, 1, 300), "clone": clones}) == "sequential"
    assert auto_mode({"x": torch.zeros(1, 1, 300), "clone": {k: v[:1] for k, v in clones.items()}}) == "batched"
    objective = Objective(sim, Cosine())
    schedule = Schedule((Block(("x",), Adam(0.1), 5),))
    auto = run(objective, variables, target, schedule, EngineOptions(mode="auto"))
    picked = run(objective, variables, target, schedule, EngineOptions(mode=auto.mode))
    assert auto.mode in ("batched", "sequential")
    assert torch.equal(auto.final["x"], picked.final["x"]) and torch.equal(auto.best_loss, picked.best_loss)
    clone_problem = Objective(CutActivations(big), MeanSquared())
    clone_vars = {"x": torch.rand(2, 1, 300), "clone": clones}
    clone_target = {"observed": [torch.rand(2, 1, 300)]}
    auto = run(clone_problem, clone_vars, clone_target, Schedule((Block(("clone",), Adam(0.01), 2),)),
               EngineOptions(mode="auto"), per_trial_target=True, keep=())
    assert auto.mode == "sequential"
    with pytest.raises(ValueError, match="unknown trials mode 'fast'; use batched, sequential, auto"):
        run(objective, variables, target, schedule, EngineOptions(mode="fast"))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)        # more threads: batched throughout
    assert auto_mode({"x": torch.zeros(2, 1, 300), "clone": clones}) == "batched"


def test_a_sum_of_matches_on_one_subset_selects_it_once_with_the_same_values():
    torch.manual_seed(0)
    simulated = [torch.randn(5, 4, dtype=torch.float64, requires_grad=True), torch.randn(7, dtype=torch.float64)]
    observed = [torch.randn(5, 4, dtype=torch.float64), torch.randn(7, dtype=torch.float64)]
    calls = []

    def top_half(s, o):
        calls.append(1)
        return TopMagnitude(0.5)(s, o)

    shared = Sum(((1.0, L1(subset=top_half)), (0.5, Cosine(subset=top_half))))
    value = shared(simulated, observed)
    assert len(calls) == 1
    mask = TopMagnitude(0.5)
    separate = L1(subset=mask)(simulated, observed) + 0.5 * Cosine(subset=mask)(simulated, observed)
    assert torch.equal(value, separate)
    grads = [torch.autograd.grad(v, simulated[0])[0] for v in (value, separate)]
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("trials", [1, 2])
def test_the_best_loss_keeps_the_variables_precision(trials):
    # A lone trial's loss is 0-dim; it must not be rounded to a float32 record (a regression).
    sim, target, variables, _ = _gradient_problem(trials=trials)
    objective = Objective(sim, SquaredL2())
    result = run(objective, variables, target, Schedule((Block(("x",), Adam(0.5), 15),)))
    assert result.best_loss.dtype == torch.float64
    assert (result.best_loss < result.final_terms["match"]).all()        # the best iterate is not the last
    rescored = run(objective, result.best, target, Schedule((Block(("x",), SGD(0.0), 0),)))
    torch.testing.assert_close(rescored.final_terms["match"], result.best_loss, rtol=0, atol=0)

"""The engine's compile option: `off` is the eager loop itself, compiled steps follow the eager trajectory, one
compilation serves a run (no recompiles, no graph breaks), `auto` decides by its rule, and a machine without a C++
compiler runs eagerly.

The fast tests compile with dynamo's `aot_eager` backend (the same tracing, the same programs, no C++ build);
the slow ones build inductor's C++ code for every attack's quick preset at tiny sizes.
"""
import os
import sys
from dataclasses import dataclass, field
from dataclasses import replace as replaced_settings

import pytest
import torch
from torch import nn

import attacks.engine.compilation as policy
import attacks.engine.compiled as compiled
from attacks.engine import (L1, LBFGS, SGD, Adam, Block, BoxClamp, Consensus, Cosine, CutActivations, EngineOptions,
                            FedSGDGradient, Hook,
                            MeanSquared, Objective, Prior, Schedule, SignedGradients, SquaredL2, StepDecay, Sum, l2, run,
                            tv_l1, tv_squared)
from attacks.hfl.fedleak.parts import GradientBlend, TopMagnitude
from test_engine import _gradient_problem, _small_net


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b| (NaN where the other is NaN: terms a block does not compute)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    assert torch.equal(a.isnan(), b.isnan())
    a, b = a.nan_to_num(), b.nan_to_num()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _agreement(eager, other) -> float:
    """The largest relative difference over every term's trace, the final variables and the best iterates."""
    worst = max(_rel(other.trace[k], eager.trace[k]) for k in eager.trace)
    for name, value in eager.final.items():
        values = value.values() if isinstance(value, dict) else [value]
        others = other.final[name].values() if isinstance(value, dict) else [other.final[name]]
        worst = max([worst] + [_rel(o, v) for o, v in zip(others, values)])
    for name, value in eager.best.items():
        if not isinstance(value, dict):
            worst = max(worst, _rel(other.best[name], value))
    return worst


@pytest.fixture
def traced(monkeypatch, tmp_path):
    """Compile with dynamo's aot_eager backend: every step traced into one program, no C++ build; each test
    starts with no program kept from another (programs of one signature share their graphs in a process),
    and records its compile times in a folder of its own, not in the user's cache."""
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")
    monkeypatch.setattr(compiled, "_SHARED_CODES", {})
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))


def _on(objective, variables, target, schedule, **kwargs):
    eager = run(objective, variables, target, schedule, **kwargs)
    other = run(objective, variables, target, schedule, EngineOptions(compile="on"), **kwargs)
    return eager, other


def _clean(report, compiles=1):
    assert report["compiled"] and report["graph_breaks"] == 0 and report["recompiles"] == 0, report
    assert report["compiles"] == compiles, report


# --- off -----------------------------------------------------------------------------------------------

def test_off_is_the_eager_loop_and_never_compiles(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compile='off' called torch.compile")

    monkeypatch.setattr(torch, "compile", refuse)
    sim, target, variables, _ = _gradient_problem(torch.float32, trials=2)
    objective = Objective(sim, SquaredL2(), priors=(Prior("tv", "x", tv_l1, 0.01),))
    schedule = Schedule((Block(("x",), Adam(0.05), 6, hooks=(SignedGradients(), BoxClamp()), decay=StepDecay()),))
    default = run(objective, variables, target, schedule)
    off = run(objective, variables, target, schedule, EngineOptions(compile="off"))
    for k in default.trace:
        assert torch.equal(default.trace[k].nan_to_num(7.0), off.trace[k].nan_to_num(7.0))
    assert torch.equal(default.best["x"], off.best["x"]) and torch.equal(default.final["x"], off.final["x"])
    assert off.extra["compile"] == {"mode": "off", "compiled": False, "reason": "not asked", "compiles": 0,
                                    "recompiles": 0, "graph_breaks": 0, "compile_seconds": 0.0}
    assert policy.compile_extras(off) == {}          # an eager attack's extras stay as they were


def test_an_unknown_compile_mode_is_a_one_line_error():
    sim, target, variables, _ = _gradient_problem(torch.float32, trials=1)
    with pytest.raises(ValueError, match="^unknown compile mode 'yes'; use off, on, auto$"):
        run(Objective(sim, SquaredL2()), variables, target, Schedule((Block(("x",), Adam(0.1), 1),)),
            EngineOptions(compile="yes"))


def test_the_attacks_take_compile_from_their_settings():
    from attacks import registry
    from attacks.settings import EngineSettings
    for name in ("dlg", "idlg", "invgrad", "gi", "fedleak", "awa", "agic", "tgias-ro", "unsplit"):
        spec = registry.spec(name)
        assert issubclass(spec.settings, EngineSettings), name
        assert spec.preset(spec.default).settings().compile == "off"
        assert spec.preset(spec.default).settings(compile="auto").compile == "auto"
    from vfl.errors import SplitlabError
    with pytest.raises(SplitlabError, match="--compile must be one of off, on, auto"):
        registry.spec("dlg").preset("dlg.quick").settings(compile="fast")


# --- the compiled steps (aot_eager) --------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("trials", [3, 1])
def test_compiled_adam_step_follows_eager_with_one_compilation(traced, trials):
    # a learning rate decayed twice within the run enters as a tensor: still one compilation
    sim, target, variables, _ = _gradient_problem(torch.float32, trials=trials)
    objective = Objective(sim, SquaredL2(), priors=(Prior("tv", "x", tv_l1, 0.01),))
    schedule = Schedule((Block(("x",), Adam(0.05, amsgrad=True), 12, hooks=(BoxClamp(),),
                               decay=StepDecay((0.25, 0.5), 0.5)),))
    eager, other = _on(objective, variables, target, schedule)
    assert _agreement(eager, other) < 1e-5
    _clean(other.extra["compile"])
    assert torch.equal(eager.diverged, other.diverged)


@pytest.mark.slow
def test_compiled_sgd_with_momentum_and_signed_gradients(traced):
    sim, target, variables, _ = _gradient_problem(torch.float64, trials=2)
    schedule = Schedule((Block(("x",), SGD(0.01, momentum=0.9), 8, hooks=(SignedGradients(),)),))
    eager, other = _on(Objective(sim, Cosine()), variables, target, schedule)
    assert _agreement(eager, other) < 1e-9
    _clean(other.extra["compile"])


@pytest.mark.slow
def test_compiled_lbfgs_closure_with_joint_labels(traced):
    sim, target, variables, _ = _gradient_problem(torch.float64, trials=2)
    variables = {**variables, "label_logits": torch.randn(2, 1, 10, generator=torch.Generator().manual_seed(3),
                                                          dtype=torch.float64)}
    context = {k: v for k, v in target["context"].items() if k != "labels"}
    target = {**target, "context": context}
    schedule = Schedule((Block(("x", "label_logits"), LBFGS(max_iter=5), 3, hooks=(BoxClamp(first=1),)),))
    eager, other = _on(Objective(sim, SquaredL2()), variables, target, schedule, keep=("x", "label_logits"))
    assert _agreement(eager, other) < 1e-9
    _clean(other.extra["compile"])


@pytest.mark.slow
def test_compiled_probe_hook_on_the_same_subset(traced):
    # FedLeak's step: L1 + cosine on a top-R% subset, the gradient blended with the probe's on the same subset
    sim, target, variables, _ = _gradient_problem(torch.float64, trials=2)
    match = Sum(((1.0, L1(subset=TopMagnitude(0.5))), (1.0, Cosine(subset=TopMagnitude(0.5)))))
    schedule = Schedule((Block(("x",), Adam(0.05), 6, hooks=(GradientBlend(0.7, 0.01), BoxClamp())),))
    eager, other = _on(Objective(sim, match), variables, target, schedule)
    assert _agreement(eager, other) < 1e-9
    _clean(other.extra["compile"])


@dataclass(eq=False)
class _Counted(Hook):
    """A hook with state of its own: it must run eagerly after the compiled step, once per step."""
    calls: int = 0
    seen: list = field(default_factory=list)

    def after_step(self, params):
        self.calls += 1
        with torch.no_grad():
            params[0].mul_(0.999)


@pytest.mark.slow
def test_a_hook_with_state_runs_eagerly_after_the_compiled_step(traced):
    sim, target, variables, _ = _gradient_problem(torch.float64, trials=2)
    hooks = [(BoxClamp(), _Counted()), (BoxClamp(), _Counted())]
    schedule = [Schedule((Block(("x",), Adam(0.05), 5, hooks=h),)) for h in hooks]
    objective = Objective(sim, SquaredL2())
    eager = run(objective, variables, target, schedule[0])
    other = run(objective, variables, target, schedule[1], EngineOptions(compile="on"))
    assert hooks[0][1].calls == hooks[1][1].calls == 5
    assert _agreement(eager, other) < 1e-9
    _clean(other.extra["compile"])


def _clone_problem(trials=2, dtype=torch.float64):
    torch.manual_seed(0)
    clone = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 6 * 6, 5)).to(dtype)
    observed = torch.randn(trials, 1, 5, dtype=dtype)
    weights = {k: torch.stack([v.detach() + 0.01 * r for r in range(trials)]) for k, v in clone.named_parameters()}
    variables = {"x": torch.full((trials, 1, 1, 6, 6), 0.5, dtype=dtype), "clone": weights}
    objective = Objective(CutActivations(clone), MeanSquared(),
                          priors=(Prior("tv", "x", tv_squared, 1.0), Prior("l2", "x", l2, 0.1)))
    schedule = Schedule((Block(("x",), Adam(1e-2, amsgrad=True), 3),
                         Block(("clone",), Adam(1e-2, amsgrad=True), 3, select=False, terms=("match",))), rounds=2)
    return objective, variables, {"observed": [observed]}, schedule


@pytest.mark.slow
def test_two_blocks_on_dict_variables_and_a_second_run_reuses_the_programs(traced):
    # UnSplit's schedule: input steps, then clone steps (a transposed Linear weight laid out as its gradient)
    objective, variables, target, schedule = _clone_problem()
    eager, other = _on(objective, variables, target, schedule, per_trial_target=True, keep=())
    assert _agreement(eager, other) < 1e-9
    _clean(other.extra["compile"], compiles=2)          # one program per block
    again = run(objective, variables, target, schedule, EngineOptions(compile="on"), per_trial_target=True, keep=())
    assert again.extra["compile"]["compiles"] == 0 and again.extra["compile"]["recompiles"] == 0
    assert _agreement(eager, again) < 1e-9
    sequential = run(objective, variables, target, schedule, EngineOptions(compile="on", mode="sequential"),
                     per_trial_target=True,
                     keep=())
    assert _agreement(eager, sequential) < 1e-9
    assert sequential.extra["compile"]["recompiles"] == 0 and sequential.extra["compile"]["graph_breaks"] == 0


def _problem_on_other_weights(seed: int, trials: int = 2):
    """`_gradient_problem` with the model and the image drawn from `seed`: same shapes, other numbers."""
    net, params = _small_net(torch.float64, seed=seed)
    sim = FedSGDGradient(net)
    x_true = torch.rand(1, 1, 14, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    context = {"params": params, "labels": torch.tensor([3])}
    target = {"observed": sim({"x": x_true}, context), "context": context}
    variables = {"x": torch.rand(trials, 1, 1, 14, 14, generator=torch.Generator().manual_seed(1), dtype=torch.float64)}
    return Objective(sim, Cosine(), priors=(Prior("tv", "x", tv_l1, 0.01),)), variables, target


@pytest.mark.parametrize("optimizer", [Adam(0.05), pytest.param(LBFGS(max_iter=3), marks=pytest.mark.slow)],
                         ids=["adam", "lbfgs"])
def test_a_later_attack_call_on_other_weights_reuses_the_graph_untraced(traced, optimizer):
    # the next attack call builds a new objective (a new model object, other weights, another image): its
    # program runs the graph the first call compiled, and follows its own eager run, not the first call's
    schedule = Schedule((Block(("x",), optimizer, 3, hooks=(BoxClamp(),)),))
    first = run(*_problem_on_other_weights(0), schedule, EngineOptions(compile="on"))
    _clean(first.extra["compile"])
    problem = _problem_on_other_weights(5)
    eager = run(*problem, schedule)
    later = run(*problem, schedule, EngineOptions(compile="on"))
    assert later.extra["compile"]["compiled"] and later.extra["compile"]["compiles"] == 0, later.extra["compile"]
    assert later.extra["compile"]["recompiles"] == 0 and later.extra["compile"]["graph_breaks"] == 0
    assert _rel(first.trace["match"], eager.trace["match"]) > 1e-3          # the two problems differ
    assert _agreement(eager, later) < 1e-9


@pytest.mark.slow
def test_a_consensus_that_resets_lbfgs_between_rounds(traced):
    sim, target, variables, _ = _gradient_problem(torch.float64, trials=3)
    consensus = Consensus(("x",), lambda v, alive: {"x": v["x"].mean(0, keepdim=True).expand_as(v["x"])})
    schedule = Schedule((Block(("x",), LBFGS(max_iter=4), 2),), rounds=3, consensus=consensus)
    eager, other = _on(Objective(sim, SquaredL2()), variables, target, schedule)
    assert _agreement(eager, other) < 1e-9
    _clean(other.extra["compile"])


def test_a_recompile_is_counted(traced):
    compilation = policy.Compilation("on", 10, torch.device("cpu"))

    def body(x):
        return x.sin() * 2

    program = compiled._Program(body, "engine_test_program", torch.device("cpu"))
    compilation.programs[id(program)] = (program, 0, 1)
    for dtype in (torch.float32, torch.float32, torch.float64):        # the dtype changes once: one recompile
        compilation.call(program, torch.ones(3, dtype=dtype))
    report = compilation.finish()
    assert report["recompiles"] == 1 and report["compiles"] == 2 and report["graph_breaks"] == 0


def test_a_graph_break_is_counted(traced):
    compilation = policy.Compilation("on", 10, torch.device("cpu"))

    def body(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y * 2

    program = compiled._Program(body, "engine_test_break", torch.device("cpu"))
    compilation.programs[id(program)] = (program, 0, 1)
    compilation.call(program, torch.ones(3))
    assert compilation.finish()["graph_breaks"] >= 1


# --- no compiler, and auto's rule -----------------------------------------------------------------------

def test_without_a_compiler_auto_runs_eagerly_with_a_notice_and_on_refuses(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(policy.shutil, "which", lambda name: None)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(policy, "COLD_COMPILE_SECONDS", 0.0)           # long enough: auto would compile
    assert policy.cxx_compiler() is None
    sim, target, variables, _ = _gradient_problem(torch.float32, trials=1)
    objective, schedule = Objective(sim, SquaredL2()), Schedule((Block(("x",), Adam(0.1), 12),))
    result = run(objective, variables, target, schedule, EngineOptions(compile="auto"))
    notice = capsys.readouterr().err.strip().splitlines()
    assert notice == ["splitlab: --compile auto runs eagerly: no C++ compiler (inductor looks for $CXX or g++) "
                      "was found"]
    assert not result.extra["compile"]["compiled"] and result.extra["compile"]["reason"] == "no C++ compiler"
    eager = run(objective, variables, target, schedule)
    assert torch.equal(eager.final["x"], result.final["x"])
    with pytest.raises(ValueError) as error:
        run(objective, variables, target, schedule, EngineOptions(compile="on"))
    assert len(str(error.value).splitlines()) == 1 and "needs a C++ compiler" in str(error.value)


class _Clock:
    """perf_counter for `Compilation.after_step`, which reads it when the probe starts and when it ends."""

    def __init__(self, pace):
        self.now, self.pace = 0.0, pace

    def __call__(self):
        self.now += self.pace * policy.AUTO_PROBE_STEPS
        return self.now


SIGNATURE = ("step", (0, None), ("match",), True, False, ("x",), (), ())


def _decide(monkeypatch, pace, total):
    monkeypatch.setattr(policy.time, "perf_counter", _Clock(pace))
    compilation = policy.Compilation("auto", total, torch.device("cpu"))
    objective = Objective(lambda v, c: [v["x"]], MeanSquared())
    if compilation.stays_eager():
        return compilation
    for _ in range(total):
        compilation.after_step(objective, lambda: [SIGNATURE])
        if compilation.decided:
            return compilation
    return compilation


def test_auto_compiles_a_run_whose_eager_remainder_repays_the_compile(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))          # no measured costs: a cold compile
    slow = _decide(monkeypatch, pace=1.0, total=1_000)
    assert slow.active and slow.estimate["expected_compile_seconds"] == policy.COLD_COMPILE_SECONDS
    assert slow.estimate["remaining_eager_seconds"] == pytest.approx(1.0 * (1_000 - 1 - policy.AUTO_PROBE_STEPS),
                                                                     rel=0.01)
    fast = _decide(monkeypatch, pace=0.01, total=1_000)                   # 10 s of eager steps left: too few
    assert fast.decided and not fast.active and "<" in fast.reason
    short = _decide(monkeypatch, pace=1.0, total=1 + policy.AUTO_PROBE_STEPS)
    assert short.decided and not short.active and "too short" in short.reason


def test_auto_expects_a_warm_cache_to_cost_what_it_cost_last_time(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    objective = Objective(lambda v, c: [v["x"]], MeanSquared())
    text = compiled.signature_text(objective, SIGNATURE)
    policy._record_costs([text], 50.0)
    assert policy.Compilation.expected_compile_seconds(objective, [SIGNATURE]) == 50.0 * policy.WARM_FRACTION
    policy._record_costs([text], 2.0)
    assert policy.Compilation.expected_compile_seconds(objective, [SIGNATURE]) == 2.0
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")                # another backend's times are not these
    assert policy.Compilation.expected_compile_seconds(objective, [SIGNATURE]) == policy.COLD_COMPILE_SECONDS
    monkeypatch.setattr(compiled, "BACKEND", "inductor")
    assert _decide(monkeypatch, pace=0.01, total=1_000).active            # 10 s left against 3 x 2 s


def test_auto_weighs_the_measured_compiled_pace_against_the_compile(monkeypatch, tmp_path):
    # a compiled step timed before on this device and thread count replaces the assumed speed-up
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    objective = Objective(lambda v, c: [v["x"]], MeanSquared())
    text = compiled.signature_text(objective, SIGNATURE)
    policy._record_costs([text], 50.0)
    policy._record_costs([text], 2.0)                                   # a warm compile costs 2 s
    key = policy._pace_key(torch.device("cpu"))
    policy._record_pace([text], key, 0.009)                             # 10 ms eager against 9 ms compiled
    barely = _decide(monkeypatch, pace=0.01, total=1_000)               # saves 995 x 1 ms < 2 s: stays eager
    assert barely.decided and not barely.active and "measured" in barely.reason
    assert barely.estimate["compiled_seconds_per_step"] == pytest.approx(0.009)
    assert barely.estimate["saved_seconds"] == pytest.approx(0.995, rel=0.01)
    policy._record_pace([text], key, 0.005)
    assert _decide(monkeypatch, pace=0.01, total=1_000).active          # saves 5 s >= 2 s
    other = policy._pace_key(torch.device("cuda"))                      # another device's pace is not this one's
    assert other != key and policy.Compilation("auto", 10, torch.device("cuda")).measured_compiled_pace(
        objective, [SIGNATURE]) is None


def test_a_compiled_run_on_the_cpu_records_its_pace_per_step(traced, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    compilation = policy.Compilation("on", 10, torch.device("cpu"))
    program = compiled._Program(lambda x: x.sin() * 2, "engine_test_pace", torch.device("cpu"))
    compilation.programs[id(program)] = (program, 0, 1)
    compilation.signatures.append("a signature")
    for _ in range(1 + policy.PACE_MIN_STEPS):                          # the first call compiles: not a step
        compilation.call(program, torch.ones(3))
    compilation.call(program, torch.ones(3), timed=False)               # an L-BFGS evaluation: not a step either
    assert compilation.compiled_steps == policy.PACE_MIN_STEPS
    compilation.finish()
    assert policy._read_costs()["a signature"][policy._pace_key(torch.device("cpu"))] > 0
    assert "aot_eager" in policy._pace_key(torch.device("cpu"))          # never read as inductor's pace


@pytest.mark.slow
def test_auto_switching_mid_run_keeps_the_optimiser_state(traced, monkeypatch, tmp_path):
    # the first steps run eagerly, then the same Adam moments and step count go on in the compiled step
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(policy, "COLD_COMPILE_SECONDS", 0.0)
    # aot_eager's steps are no faster than eager, so a measured pace would keep these runs eager: this test is
    # about the state and what is expected to be paid, not about paces, so none is read (no clock decides)
    monkeypatch.setattr(policy.Compilation, "measured_compiled_pace", lambda self, objective, signatures: None)
    objective, variables, target, schedule = _clone_problem()
    eager = run(objective, variables, target, schedule, per_trial_target=True, keep=())
    auto = run(objective, variables, target, schedule, EngineOptions(compile="auto"), per_trial_target=True, keep=())
    assert auto.extra["compile"]["compiled"] and "auto" in auto.extra["compile"]
    assert _agreement(eager, auto) < 1e-9
    monkeypatch.setattr(policy, "COLD_COMPILE_SECONDS", 1e9)
    objective, variables, target, schedule = _clone_problem()          # no programs of its own, but the graphs
    reused = run(objective, variables, target, schedule, EngineOptions(compile="auto"), per_trial_target=True,
                 keep=())                                               # compiled above serve it: nothing to pay
    assert reused.extra["compile"]["compiled"] and reused.extra["compile"]["compiles"] == 0, reused.extra["compile"]
    assert reused.extra["compile"]["auto"]["expected_compile_seconds"] == 0
    assert _agreement(eager, reused) < 1e-9
    monkeypatch.setattr(compiled, "_SHARED_CODES", {})                 # a new process on a new cache: nothing
    monkeypatch.setattr(policy, "_IN_PROCESS", set())                  # compiled, no cost measured
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "new"))
    objective, variables, target, schedule = _clone_problem()
    never = run(objective, variables, target, schedule, EngineOptions(compile="auto"), per_trial_target=True, keep=())
    assert not never.extra["compile"]["compiled"]
    for k in eager.trace:
        assert torch.equal(eager.trace[k].nan_to_num(7.0), never.trace[k].nan_to_num(7.0))


# --- every attack's quick preset, inductor ---------------------------------------------------------------
# In float64: in float32 the eager run itself is rounding-bound where these attacks amplify rounding (L-BFGS
# over 20 inner iterations, a FedAvg update that is the difference of two nearly equal weight sets), so a
# compiled float32 run, whose kernels round differently, ends up to 1e-2-0.4 away after two L-BFGS steps
# while its first evaluations agree to 5e-7; in float64 the same runs agree to 1e-7 or better.

HFL_TINY = {
    "dlg": {"iterations": 2}, "idlg": {"iterations": 2}, "invgrad": {"iterations": 8},
    "gi": {"iterations": 8}, "fedleak": {"iterations": 8}, "awa": {"iterations": 8}, "agic": {"iterations": 8},
    "tgias-ro": {"iterations": 2},
}


def _hfl(attack: str, compile_mode: str):
    from attacks.hfl.experiment import HFLConfig, execute, prepare
    config = HFLConfig.of(attack=attack, preset=f"{attack}.quick", compile=compile_mode, **HFL_TINY[attack])
    return execute(prepare(config, dtype=torch.float64), None, progress=False).reconstruction


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(HFL_TINY))
def test_every_hfl_attack_compiled_follows_eager(attack):
    eager, other = _hfl(attack, "off"), _hfl(attack, "on")
    assert "compile" not in eager.extras
    worst = max(_rel(other.history[k], eager.history[k]) for k in eager.history)
    difference = max(worst, _rel(other.trials, eager.trials))
    report = other.extras["compile"]
    print(f"\n{attack}: max relative difference {difference:.2e}, {report}")
    assert difference < 1e-4
    assert report["compiled"] and report["graph_breaks"] == 0 and report["recompiles"] == 0, report


@pytest.mark.slow
@pytest.mark.parametrize("clone", ["per-target", "shared"])
def test_unsplit_compiled_follows_eager(clone):
    from attacks import registry
    from attacks.split.unsplit import UnSplit
    from test_unsplit import _observation
    observation, _ = _observation("cnn", n=2, dtype=torch.float32)
    settings = registry.preset("unsplit.quick", "unsplit").settings(iterations=1, clone=clone)
    eager = UnSplit(settings)(observation)
    compiled = replaced_settings(settings, compile="on")
    engine = EngineOptions.of(compiled)                     # as the driver builds it: the report collects the runs'
    other = engine.report.attach(UnSplit(compiled)(observation, engine=engine))
    worst = max(_rel(other.history[k], eager.history[k]) for k in eager.history)
    difference = max(worst, _rel(other.trials, eager.trials))
    report = other.extras["compile"]
    print(f"\nunsplit {clone}: max relative difference {difference:.2e}, {report}")
    assert difference < 1e-4
    assert report["graph_breaks"] == 0 and report["recompiles"] == 0, report
    assert report["compiles"] == 2                  # input and clone steps; the shared clone's later targets reuse them


def test_auto_leaves_a_run_of_lbfgs_blocks_eager_and_decides_others_by_pace():
    from types import SimpleNamespace
    lbfgs = policy.Compilation("auto", 1_000, torch.device("cpu"))
    assert lbfgs.stays_eager([SimpleNamespace(block=SimpleNamespace(optimizer=LBFGS()))])
    assert lbfgs.decided and not lbfgs.active and "L-BFGS" in lbfgs.reason
    adam = policy.Compilation("auto", 1_000, torch.device("cpu"))
    assert not adam.stays_eager([SimpleNamespace(block=SimpleNamespace(optimizer=Adam(0.1)))]) and not adam.decided
    asked = policy.Compilation("on", 1_000, torch.device("cpu"))
    assert not asked.stays_eager([SimpleNamespace(block=SimpleNamespace(optimizer=LBFGS()))]) and asked.active


def test_the_cache_directory_is_inductors_without_loading_inductor(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delitem(sys.modules, "torch._inductor.runtime.cache_dir_utils", raising=False)
    ours = policy.cache_dir()
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    assert ours == os.path.abspath(default_cache_dir()) == policy.cache_dir()


def test_torch_source_keys_are_filed_once_and_given_back_to_a_new_process(monkeypatch, tmp_path):
    # a warm compile's one-off hashing of torch's and triton's sources: filed beside the cache under the
    # installation's fingerprint, handed to torch by a later process, computed anew for another installation
    from torch._inductor import codecache
    from torch.utils._functools import prefetchable_cache
    from attacks.engine import source_keys

    computed = []

    def fresh_keys():
        @prefetchable_cache
        def torch_key():
            computed.append("torch")
            return b"\x01\x02"

        @prefetchable_cache
        def triton_key():
            computed.append("triton")
            return "triton-key"
        monkeypatch.setattr(codecache, "torch_key", torch_key)
        monkeypatch.setattr(codecache, "triton_key", triton_key)
        monkeypatch.setattr(source_keys, "_DONE", False)                 # as in a new process

    monkeypatch.setattr(source_keys, "fingerprint", lambda: "install-a")
    fresh_keys()
    source_keys.reuse(str(tmp_path))
    assert computed == ["triton", "torch"]
    source_keys.reuse(str(tmp_path))                                     # once per process
    assert computed == ["triton", "torch"]
    fresh_keys()
    source_keys.reuse(str(tmp_path))
    assert (codecache.torch_key(), codecache.triton_key()) == (b"\x01\x02", "triton-key")
    assert computed == ["triton", "torch"]                              # given, not computed
    monkeypatch.setattr(source_keys, "fingerprint", lambda: "install-b")  # an upgrade: computed anew
    fresh_keys()
    source_keys.reuse(str(tmp_path))
    assert computed == ["triton", "torch"] * 2
    assert source_keys.fingerprint() == "install-b"
    monkeypatch.undo()
    assert source_keys.fingerprint() is None or len(source_keys.fingerprint()) == 64


def test_building_a_compiled_step_counts_towards_the_compile_seconds(traced, monkeypatch):
    # loading the compiler and building the step are paid on that call: auto learns what a compile costs from them
    clock = [0.0]
    monkeypatch.setattr(policy.time, "perf_counter", lambda: clock[0])
    build = policy.CompiledStep

    def slow_build(*args, **kwargs):
        clock[0] += 5.0
        return build(*args, **kwargs)

    monkeypatch.setattr(policy, "CompiledStep", slow_build)
    sim, target, variables, _ = _gradient_problem(torch.float32, trials=1)
    objective, schedule = Objective(sim, SquaredL2()), Schedule((Block(("x",), Adam(0.1), 3),))
    report = run(objective, variables, target, schedule, EngineOptions(compile="on")).extra["compile"]
    assert report["compile_seconds"] == 5.0 and report["compiles"] == 1, report


def test_the_metrics_keep_every_runs_reason():
    def result(reason, compiled):
        from types import SimpleNamespace
        return SimpleNamespace(extra={"compile": {"mode": "auto", "compiled": compiled, "reason": reason,
                                                  "compiles": int(compiled), "recompiles": 0, "graph_breaks": 0,
                                                  "compile_seconds": 1.0 if compiled else 0.0}})

    total = policy.compile_extras(result("a", False), result("b", True), result("a", False))["compile"]
    assert total["reasons"] == ["a", "b"] and total["runs"] == 3 and total["runs_compiled"] == 1
    assert total["compiled"] and total["compiles"] == 1 and total["compile_seconds"] == 1.0


def test_a_run_of_another_length_shares_the_signature_text_and_other_settings_do_not():
    # the loop applies the step count and the decay, so compile costs and shared code carry over between lengths
    objective = Objective(lambda v, c: [v["x"]], MeanSquared())

    def text(block):
        return compiled.signature_text(objective, ("step", (hash(block), block)) + SIGNATURE[2:])

    short, long = Block(("x",), Adam(0.1), 8), Block(("x",), Adam(0.1), 500, decay=StepDecay())
    assert text(short) == text(long)
    assert text(short) != text(Block(("x",), Adam(0.1, amsgrad=True), 8))
    assert text(short) != text(Block(("x",), Adam(0.1), 8, hooks=(SignedGradients(),)))


SOURCE_KEYS_CHILD = """
import sys, torch
from torch._inductor import codecache
from attacks.engine import source_keys
from attacks.engine.compilation import cache_dir
hashed = []
build_code_hash = codecache.build_code_hash
codecache.build_code_hash = lambda *a, **k: (hashed.append(1), build_code_hash(*a, **k))[1]
source_keys.reuse(cache_dir())
torch.compile(lambda x: x.sin() * 2 + 1, backend="inductor")(torch.ones(5))
from torch._dynamo.utils import counters
print(bool(hashed), counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"])
"""


@pytest.mark.slow
def test_a_process_given_the_filed_source_keys_hashes_no_source_and_hits_inductors_cache(tmp_path):
    # the keys torch would compute are the ones filed: a second process skips the hashing and still finds the graph
    import subprocess
    if policy.cxx_compiler() is None:
        pytest.skip("inductor needs a C++ compiler")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "PYTHONPATH": root}

    def child():
        done = subprocess.run([sys.executable, "-c", SOURCE_KEYS_CHILD], env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.split()

    assert child() == ["True", "0", "1"]             # a new cache: torch hashes its source, the graph is built
    assert child() == ["False", "1", "0"]            # the keys handed over: no hashing, the same graph found

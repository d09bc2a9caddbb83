"""One contract, checked over the registry: every attack (the lab's and any plug-in) declares one spec, its
options once on its settings, refuses values outside their declared ranges, runs through the one driver and
writes metrics.json with the schema. A new attack is covered here without editing this file."""
import dataclasses
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attacks import registry
from attacks.metrics import METRICS_SCHEMA
from attacks.metrics.labels import LABEL_UNAVAILABLE
from attacks.settings import AttackSettings
from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.options import flag_of, options_of

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
SPECS = registry.specs()
SMOKE = {
    # split attacks need a victim small enough for a test; HFL attacks run generically (`smoke_args`)
    "unsplit": ["--arch", "small-mlp", "--epochs", "1", "--preset", "quick", "--iterations", "1"],
    "fsha": ["--iterations", "2", "--log-every", "1", "--width", "0.0625", "--batch-size", "8", "--eval-images", "16"],
    # label inference: the victim trains one epoch of the small MLP
    **{name: ["--arch", "small-mlp", "--cut-layer", "1", "--epochs", "1", "--iterations", "1"]
       for name in ("label-norm", "label-direction", "label-direct", "label-completion", "label-active")},
    "label-unsplit": ["--arch", "small-mlp", "--epochs", "1", "--iterations", "1", "--batch-size", "256"],
}


def command_words(spec) -> list[str]:
    return ["hfl", "--attack", spec.name] if spec.setting == "hfl" else ["attack", spec.name]


def smoke_args(spec, arch: str = "lenet") -> list[str]:
    if spec.setting == "split":
        return SMOKE.get(spec.name, ["--iterations", "1"])
    small = ["--temporal", "2"] if "temporal" in {f.name for f, _ in options_of(spec.settings)} else []
    labels = ["--labels", "known"] if "known" in spec.labels else []       # label recovery has tests of its own
    return ["--arch", arch, "--batch-size", "2", "--iterations", "1", *small, *labels]


def option_classes(spec) -> list[type]:
    return [spec.settings] + ([spec.observation_options] if spec.observation_options is not None else [])


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_attack_declares_one_spec_with_settings_presets_and_a_contract_call(spec):
    assert spec is registry.spec(spec.name) and spec.name in registry.names(spec.setting)
    settings = spec.settings
    assert issubclass(settings, AttackSettings) and settings.__dataclass_params__.frozen
    for preset in spec.presets:
        built = preset.settings()
        assert isinstance(built, settings) and built.preset == preset.name and preset.source
    assert spec.preset().name == spec.default
    parameters = inspect.signature(spec.attack.__call__).parameters
    assert parameters["seed"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "Reconstruction" in str(inspect.signature(spec.attack.__call__).return_annotation)
    assert isinstance(spec.make(spec.preset().settings()).name, str)
    assert "iterations" in {f.name for f, _ in options_of(settings)}, "the iteration count is `iterations`"
    for cls in option_classes(spec):
        for field, opt in options_of(cls):
            assert opt.help, f"{spec.name}: option {field.name} has no help text"


CASES = [(spec, cls, field.name) for spec in SPECS for cls in option_classes(spec)
         for field, opt in options_of(cls) if opt.check is not None and opt.check.refused is not None]


@pytest.mark.parametrize("spec,cls,name", CASES, ids=lambda v: getattr(v, "name", v) if not isinstance(v, type) else "")
def test_every_option_refuses_a_value_outside_its_range_in_python_and_on_the_cli(spec, cls, name, tmp_path):
    field, opt = next((f, o) for f, o in options_of(cls) if f.name == name)
    flag = flag_of(field, opt)
    with pytest.raises(SplitlabError, match=flag):
        dataclasses.replace(cls(), **{name: opt.check.refused})
    out = tmp_path / "run"
    result = runner.invoke(app, [*command_words(spec), flag, str(opt.check.refused), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert flag in result.output and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_attack_option_is_declared_once_and_generated_into_its_command(spec):
    import typer.main

    from splitlab.sweep_validate import parse_argv

    command = parse_argv(typer.main.get_command(app), command_words(spec)).command
    flags = [o for p in command.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")]
    assert len(flags) == len(set(flags)), "an option declared twice"
    for cls in option_classes(spec):
        for field, opt in options_of(cls):
            assert flag_of(field, opt) in flags, f"{spec.name}: --{field.name} has no generated option"


def test_no_attack_writes_its_cli_options_by_hand():
    for path in [*ROOT.glob("attacks/hfl/**/*.py"), *ROOT.glob("attacks/split/**/*.py")]:
        assert "typer.Option(" not in path.read_text(), f"{path}: options are generated from settings fields"


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_attack_runs_through_the_driver_and_writes_the_schema(spec, tmp_path):
    args = [*command_words(spec), "--device", "cpu", "--json", "--out", str(tmp_path / "run")]
    result = runner.invoke(app, [*args, *smoke_args(spec)])
    if result.exit_code == 2 and spec.setting == "hfl":            # an attack that needs more than the LeNet
        result = runner.invoke(app, [*args, *smoke_args(spec, "convnet")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert set(metrics) >= set(METRICS_SCHEMA), set(METRICS_SCHEMA) - set(metrics)
    assert metrics["attack"] == spec.name and metrics["preset"].startswith(spec.name + ".")
    if metrics["unavailable"].get("image_mse") == LABEL_UNAVAILABLE:      # a label-inference attack
        assert set(metrics["baselines"]) == {"majority"} and 0 <= metrics["label_accuracy"] <= 1
        assert metrics["leak_auc"] is None or 0 <= metrics["leak_auc"] <= 1
        assert 0 <= metrics["accuracy"] <= 1 and metrics["image_mse"] is None
        files = ("labels.png", "config.json")
    else:
        assert set(metrics["baselines"]) == {"zero", "mean", "initial"}
        assert metrics["image_mse"] is None or 0 <= metrics["image_mse"] <= 1
        files = ("reconstruction.png", "loss_curve.png", "config.json")
    for name in files:
        assert (tmp_path / "run" / name).exists()


def _python(code: str, tmp_path: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(extra_path or ""), str(ROOT),
                                                                      os.environ.get("PYTHONPATH", "")]))}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_splitlab_hfl_with_dlg_loads_dlg_and_no_other_attack(tmp_path):
    code = textwrap.dedent("""
        import sys
        from splitlab.cli import app
        try:
            app(["hfl", "--attack", "dlg", "--iterations", "1", "--json", "--out", "run"], standalone_mode=False)
        except SystemExit:
            pass
        print(" ".join(sorted(sys.modules)))
    """)
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.strip().splitlines()[-1].split())
    assert "attacks.hfl.dlg" in loaded
    forbidden = ("attacks.split", "vfl.protocol", "vfl.training", "attacks.hfl.fedleak", "attacks.hfl.awa",
                 "attacks.hfl.agic", "attacks.hfl.tgias", "attacks.hfl.invgrad")
    assert not [m for m in loaded if m.startswith(forbidden)]


TOY = '''
from dataclasses import dataclass

from attacks.engine import Adam, Block, FedSGDGradient, Objective, Schedule, SquaredL2, run
from attacks.hfl.labels import recover_labels
from attacks.hfl.observations import check_requirements
from attacks.hfl.variables import engine_context, initial_variables
from attacks.result import Reconstruction
from attacks.settings import AttackSettings
from attacks.spec import AttackSpec, Preset
from vfl.options import integer, number, option


@dataclass(frozen=True, kw_only=True)
class ToySettings(AttackSettings):
    iterations: int = option(20, "Adam steps.", integer(low=1, high=1000))
    lr: float = option(0.1, "Adam learning rate.", number(low=0, low_open=True, high=10))


@dataclass(frozen=True)
class Toy:
    settings: ToySettings
    name = "toy"

    def check(self, observation):
        check_requirements(self.name, ("gradient", "batch_size", "final_linear"), observation)

    def __call__(self, observation, *, seed: int = 0, mode: str = "auto", progress: bool = False) -> Reconstruction:
        labels, rule = recover_labels(observation)
        variables = initial_variables(observation, 1, seed, label_logits=False)
        objective = Objective(simulator=FedSGDGradient(observation.model.network), match=SquaredL2())
        target = {"observed": list(observation.gradient), "context": engine_context(observation, labels)}
        schedule = Schedule((Block(("x",), Adam(self.settings.lr), self.settings.iterations),))
        result = run(objective, variables, target, schedule, mode=mode, keep=("x",), progress=progress)
        return Reconstruction(attack=self.name, preset=self.settings.preset, trials=result.best["x"],
                              loss=result.best_loss, history=result.trace, diverged=result.diverged,
                              seconds=result.seconds, steps=schedule.steps, initial=variables["x"],
                              labels=labels.expand(1, -1), label_rule=rule, mode=result.mode)


SPEC = AttackSpec(name="toy", setting="hfl", title="A toy gradient matcher", paper="none",
                  observes=("fedsgd",), settings=ToySettings, attack=Toy, default="toy.quick",
                  presets=(Preset("toy.quick", "a test", {"iterations": 5}),))
'''


@pytest.mark.slow
def test_a_toy_attack_from_another_package_runs_from_the_cli_and_its_help(tmp_path):
    package = tmp_path / "plugins"
    (package / "toy_attack").mkdir(parents=True)
    (package / "toy_attack" / "__init__.py").write_text(TOY)
    info = package / "toy_attack-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-attack\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[splitlab.attacks]\ntoy = toy_attack:SPEC\n")
    run = "from splitlab.cli import main; import sys; sys.argv = ['splitlab', *{args}]; main()"

    listed = _python(run.format(args=["hfl", "--help"]), tmp_path, package)
    assert listed.returncode == 0 and "toy" in listed.stdout.split("Attacks:", 1)[1].split(".")[0]
    own = _python(run.format(args=["hfl", "--attack", "toy", "--help"]), tmp_path, package)
    assert own.returncode == 0 and "--lr" in own.stdout and "toy.quick" in own.stdout
    done = _python(run.format(args=["hfl", "--attack", "toy", "--lr", "0.05", "--json", "--out", "run"]), tmp_path,
                   package)
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["attack"] == "toy" and metrics["preset"] == "toy.quick" and metrics["steps"] == 5
    assert set(metrics) >= set(METRICS_SCHEMA)
    refused = _python(run.format(args=["hfl", "--attack", "toy", "--lr", "20", "--out", "bad"]), tmp_path, package)
    assert refused.returncode == 2 and "--lr" in refused.stderr and not (tmp_path / "bad").exists()


def test_an_unknown_attack_is_one_line_naming_the_attacks(tmp_path):
    result = runner.invoke(app, ["hfl", "--attack", "nope", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "unknown attack 'nope'" in result.output and "dlg" in result.output
    assert not (tmp_path / "run").exists()

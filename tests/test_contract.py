"""One contract, checked over the registry: every attack (the lab's and any plug-in) declares one spec, its
options once on its settings, refuses values outside their declared ranges, runs through the one driver and
writes metrics.json with the schema, and at its own smoke options beats its initial guess. A new attack is
covered here without editing this file. The plug-in example is docs/extending.md's own text."""
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attacks import registry
from attacks.metrics import METRICS_SCHEMA
from attacks.hooks import Attack, HFLAttack, LabelAttack
from attacks.split.labels.experiment import LabelConfig
from attacks.settings import AttackSettings
from splitlab import api
from splitlab.cli import app
from vfl.errors import SplitlabError
from vfl.options import flag_of, options_of

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
SPECS = registry.specs()


def initial_guess(metrics: dict) -> tuple[str, str, object]:
    """(the score, the baseline that is the attack's initial guess, how the score beats it). A feature-inference
    attack must end below the error of guessing each feature's training mean. An image attack starts
    from its initial guess (`baselines.initial`) and must end at a lower image MSE; a label-inference attack
    reconstructs no image, and the answer it starts from, knowing nothing, is the majority class for every sample
    (`baselines.majority`, leak AUC 0.5: chance), which its leak AUC (or, where no round holds both classes, its
    label accuracy) must beat."""
    if metrics.get("feature_mse") is not None:             # a feature-inference attack: the training mean's error
        assert metrics["image_mse"] is None
        return "feature_mse", "mean", lambda value, initial: value < initial
    if set(metrics["baselines"]) - {"unpoisoned"} == {"majority"}:     # a backdoor's beside: its unpoisoned model
        assert metrics["image_mse"] is None and 0 <= metrics["accuracy"] <= 1
        score = "leak_auc" if metrics["leak_auc"] is not None else "label_accuracy"
        return score, "majority", lambda value, initial: value > initial
    image = {"zero", "mean", "initial"}                    # and the majority class where it infers the labels
    assert set(metrics["baselines"]) in (image, image | {"majority"}), set(metrics["baselines"])
    assert ("majority" in metrics["baselines"]) == (metrics.get("label_rule") not in (None, "known")
                                                    and metrics.get("label_accuracy") is not None)
    return "image_mse", "initial", lambda value, initial: value < initial


def command_words(spec) -> list[str]:
    return ["hfl", "--attack", spec.name] if spec.setting == "hfl" else ["attack", spec.name]


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
    assert parameters["seed"].kind is parameters["engine"].kind is inspect.Parameter.KEYWORD_ONLY
    assert not {"mode", "progress", "compile"} & set(parameters), "the engine options come whole, as `engine`"
    assert "Reconstruction" in str(inspect.signature(spec.attack.__call__).return_annotation)
    kind = HFLAttack if spec.setting == "hfl" else LabelAttack if issubclass(spec.experiment.config, LabelConfig) \
        else Attack
    assert isinstance(spec.make(spec.preset().settings()), kind), kind.__name__
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


CHECKED = [(spec, field.name) for spec in SPECS for field in dataclasses.fields(spec.settings)
           if "check" in field.metadata and field.metadata["check"].refused is not None]


@pytest.mark.parametrize("spec,name", CHECKED, ids=lambda v: getattr(v, "name", v))
def test_every_checked_setting_refuses_a_value_outside_its_range(spec, name):
    """Settings that are not options (DLG's L-BFGS lr, max_iter) are still checked, by their declaration."""
    check = next(f for f in dataclasses.fields(spec.settings) if f.name == name).metadata["check"]
    with pytest.raises(SplitlabError, match=name):
        spec.preset().settings(**{name: check.refused})


def test_dlg_refuses_a_negative_learning_rate_and_no_inner_iterations():
    for bad in ({"lr": -1.0}, {"max_iter": 0}):
        with pytest.raises(SplitlabError, match=next(iter(bad))):
            registry.spec("dlg").settings_for("dlg.original", **bad)


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


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_attack_at_its_smoke_options_beats_its_initial_guess_and_writes_the_schema(spec, tmp_path, one_thread):
    """Behaviour, not only structure: through the one front door (`splitlab.api.attack`), on a one-image observation
    for an HFL attack (a split attack's ten class targets; a label attack's training samples), seed 0."""
    outcome = api.attack(spec.name, seed=0, out=tmp_path / "run", **spec.smoke)
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert set(m) >= set(METRICS_SCHEMA), set(METRICS_SCHEMA) - set(m)
    assert m["attack"] == spec.name and m["preset"] == spec.default
    assert spec.setting == "split" or m["n_targets"] == 1
    score, initial, better = initial_guess(m)
    assert better(m[score], m["baselines"][initial][score]), (score, m[score], m["baselines"][initial])
    assert outcome.metrics[score] == m[score] and m["trials_mode"]
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert config["attack_origin"]["attack"] == spec.name
    drawn = {"majority": ("labels.png",), "mean": ("features.png",)}.get(initial, ("reconstruction.png",
                                                                                 "loss_curve.png"))
    for name in (*drawn, "config.json"):
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


def docs_example() -> str:
    """The complete example of docs/extending.md, as a user would copy it."""
    page = (ROOT / "docs" / "extending.md").read_text()
    return re.search(r"```python\n(.*?)```", page.split("### A complete example", 1)[1], re.S).group(1)


def split_docs_example() -> str:
    """The split-learning example of docs/extending.md, as a user would copy it."""
    page = (ROOT / "docs" / "extending.md").read_text()
    return re.search(r"```python\n(.*?)```", page.split("### A split-learning example", 1)[1], re.S).group(1)


def install(folder: Path, module: str, source: str, entries: dict[str, str], dist: str = "toy-attack") -> None:
    """A plug-in as `pip install` leaves it: its module and a dist-info whose entry points register it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[splitlab.attacks]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))


def _forget_plugins() -> None:
    from attacks.hfl import cli

    registry._entries.cache_clear()
    registry._spec.cache_clear()
    registry._FAILED.clear()
    cli.hfl_command.cache_clear()


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Install plug-ins into a folder on sys.path for this test only (the registry forgets them after)."""
    folder = tmp_path / "plugins"
    monkeypatch.syspath_prepend(str(folder))
    _forget_plugins()

    def add(module: str, source: str, entries: dict[str, str], dist: str = "toy-attack") -> None:
        install(folder, module, source, entries, dist)
        _forget_plugins()
    yield add
    _forget_plugins()


def test_the_docs_example_installed_as_a_plug_in_runs_from_the_cli_and_the_api(plugins, tmp_path):
    plugins("toy_attack", docs_example(), {"toy": "toy_attack:SPEC"})
    listed = runner.invoke(app, ["hfl", "--help"])
    assert listed.exit_code == 0 and "toy" in listed.output.split("Attacks:", 1)[1].split(".")[0]
    own = runner.invoke(app, ["hfl", "--attack", "toy", "--help"], env={"COLUMNS": "200"})
    assert own.exit_code == 0 and "--lr" in own.output and "0 < x <= 10; toy.quick: 0.1" in own.output
    done = runner.invoke(app, ["hfl", "--attack", "toy", "--lr", "0.05", "--json", "--out", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["attack"] == "toy" and metrics["preset"] == "toy.quick" and metrics["steps"] == 5
    assert set(metrics) >= set(METRICS_SCHEMA) and metrics["trials_mode"] == "batched"
    origin = json.loads((tmp_path / "run" / "config.json").read_text())["config"]["attack_origin"]
    assert origin == {"attack": "toy", "source": "toy_attack:SPEC", "entry_point": "toy = toy_attack:SPEC",
                      "distribution": "toy-attack", "version": "0.1"}
    refused = runner.invoke(app, ["hfl", "--attack", "toy", "--lr", "20", "--out", str(tmp_path / "bad")])
    assert refused.exit_code == 2 and "--lr" in refused.output and not (tmp_path / "bad").exists()
    assert api.attack("toy", lr=0.05, seed=0).metrics["psnr"] == metrics["psnr"]


def test_the_split_docs_example_is_written_from_the_kit_alone_and_its_command_is_generated(plugins, tmp_path):
    source = split_docs_example()
    lab = {m.group(1) for m in re.finditer(r"^(?:from|import) ((?:attacks|vfl)[\w.]*)", source, re.M)}
    assert lab == {"attacks.kit"}, lab
    plugins("odd_attack", source, {"odd": "odd_attack:SPEC"}, dist="odd-attack")
    listed = runner.invoke(app, ["attack", "--help"], env={"COLUMNS": "400"})
    assert listed.exit_code == 0 and " odd" in " ".join(listed.output.split())
    own = runner.invoke(app, ["attack", "odd", "--help"], env={"COLUMNS": "200"})
    assert own.exit_code == 0 and "--iterations" in own.output and "odd.quick: 20" in own.output
    assert "--task" in own.output and "--cut-layer" in own.output                 # the victim's, from the experiment
    for bad in (["--iterations", "-1"], ["--task", "multiclass"]):                # its range; its check_victim
        refused = runner.invoke(app, ["attack", "odd", *bad, "--out", str(tmp_path / "bad")])
        assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
        assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_the_split_docs_example_installed_as_a_plug_in_beats_the_majority_from_the_cli_and_the_api(plugins, tmp_path,
                                                                                                   one_thread):
    """The small fixed case of the page: mnist5k one digit against the rest, the small MLP cut after its first
    layer, one epoch, seed 0, the last 20 rounds."""
    plugins("odd_attack", split_docs_example(), {"odd": "odd_attack:SPEC"}, dist="odd-attack")
    case = ["--arch", "small-mlp", "--cut-layer", "1", "--epochs", "1", "--seed", "0"]
    done = runner.invoke(app, ["attack", "odd", *case, "--json", "--out", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["attack"] == "odd" and metrics["preset"] == "odd.quick" and metrics["label_rule"] == "odd one out"
    assert set(metrics) >= set(METRICS_SCHEMA) and metrics["task"] == "binary"
    majority = metrics["baselines"]["majority"]
    assert metrics["leak_auc"] > majority["leak_auc"] and metrics["label_accuracy"] > majority["label_accuracy"]
    origin = json.loads((tmp_path / "run" / "config.json").read_text())["config"]["attack_origin"]
    assert origin["entry_point"] == "odd = odd_attack:SPEC" and origin["distribution"] == "odd-attack"
    again = api.attack("odd", arch="small-mlp", cut_layer=1, epochs=1, seed=0)
    assert again.metrics["leak_auc"] == metrics["leak_auc"]
    assert again.metrics["label_accuracy"] == metrics["label_accuracy"]


BROKEN = {
    # name: (module source, what the one line says)
    "boom": ("raise RuntimeError('broken on import')\n", "failed to load: RuntimeError: broken on import"),
    "exits": ("import sys\nsys.exit(3)\n", "failed to load: SystemExit: 3"),
    "notspec": ("SPEC = {'name': 'notspec'}\n", "points at a dict, not an attacks.kit.AttackSpec"),
    "renamed": (None, "its spec is named 'toy'; name the entry point toy or the spec renamed"),
    "badtypes": ("from attacks.kit import AttackSpec, Preset\n"
                 "SPEC = AttackSpec(name='badtypes', setting='hfl', title='t', paper='none', observes=('fedsgd',),\n"
                 "                  settings=int, attack=object, presets=(Preset('badtypes.q', 'x', {}),),\n"
                 "                  default='badtypes.q')\n", "settings int is not a frozen dataclass"),
    "nosplit": (None, "a split attack needs experiment="),
    "badhook": (None, "evaluate hook <lambda> must take 3 positional arguments"),
    "badpreset": (None, "preset badpreset.quick is refused by its settings: --lr must be"),
}


def _broken_source(name: str) -> str:
    source, _ = BROKEN[name]
    if source is not None:
        return source
    spec = docs_example().rsplit("SPEC = AttackSpec(", 1)
    changes = {"renamed": ("", ""), "nosplit": ('name="toy", setting="hfl"', 'name="nosplit", setting="split"'),
               "badhook": ('name="toy",', 'name="badhook", evaluate=lambda r: {},'),
               "badpreset": ('name="toy",', 'name="badpreset",')}
    body = spec[1].replace(*changes[name]).replace('"toy.quick"', f'"{name}.quick"') if name != "renamed" else spec[1]
    if name == "badpreset":
        body = body.replace('{"iterations": 5}', '{"iterations": 5, "lr": 50.0}')
    return spec[0] + "SPEC = AttackSpec(" + body


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_plug_in_is_one_line_naming_its_entry_point_and_listed_as_failed(name, plugins, tmp_path):
    plugins(f"{name}_attack", _broken_source(name), {name: f"{name}_attack:SPEC"}, dist=f"{name}-plugin")
    with pytest.raises(SplitlabError) as refused:
        registry.spec(name)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and BROKEN[name][1] in message
    assert f"entry point {name} = {name}_attack:SPEC in {name}-plugin 0.1" in message
    listed = runner.invoke(app, ["hfl", "--help"], env={"COLUMNS": "400"})
    assert listed.exit_code == 0 and f"{name} (failed to load: " in " ".join(listed.output.split())
    split_help = runner.invoke(app, ["attack", "--help"], env={"COLUMNS": "400"})  # the other attacks go on working
    assert split_help.exit_code == 0 and "unsplit" in split_help.output
    assert f"{name} (" in " ".join(split_help.output.split()).split("failed to load:", 1)[1]
    run = runner.invoke(app, ["hfl", "--attack", name, "--out", str(tmp_path / "run")])
    assert run.exit_code == 2 and f"entry point {name}" in run.output and "Traceback" not in run.output
    assert not (tmp_path / "run").exists()


def test_a_plug_in_named_like_a_lab_attack_is_reported_once_and_never_loaded(plugins, capfd):
    plugins("clash_attack", "raise RuntimeError('imported')\n", {"dlg": "clash_attack:SPEC"}, dist="clash-plugin")
    assert registry.spec("dlg").paper.startswith("Zhu") and registry.spec("idlg").name == "idlg"
    registry.names("hfl")
    err = capfd.readouterr().err
    assert err.count("plug-in attack 'dlg'") == 1 and "is not loaded: dlg is one of the lab's own attacks" in err
    assert "clash_attack" not in sys.modules


def test_two_distributions_registering_one_attack_name_are_reported_once(plugins, capfd):
    plugins("first_toy", docs_example(), {"toy": "first_toy:SPEC"}, dist="first-plugin")
    plugins("second_toy", docs_example(), {"toy": "second_toy:SPEC"}, dist="second-plugin")
    assert registry.spec("toy").name == "toy"
    registry.names("hfl")
    err = capfd.readouterr().err
    assert err.count("plug-in attack 'toy' is registered twice") == 1, err
    assert "first_toy:SPEC in first-plugin 0.1 is used" in err or "second_toy:SPEC in second-plugin 0.1 is used" in err


def test_a_result_the_lab_cannot_score_leaves_no_run_directory(plugins, tmp_path):
    wrong = docs_example().replace('trials=result.best["x"]', 'trials=result.best["x"][..., :7, :5]')
    plugins("shape_attack", wrong.replace('"toy', '"shape'), {"shape": "shape_attack:SPEC"})
    result = runner.invoke(app, ["hfl", "--attack", "shape", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "shaped" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


def test_a_plug_in_attack_that_raises_is_one_line_naming_its_entry_point(plugins, tmp_path):
    raising = docs_example().replace("        labels, rule = recover_labels(observation)\n",
                                     "        raise ValueError('not today')\n")
    plugins("raising_attack", raising.replace('"toy', '"raising'), {"raising": "raising_attack:SPEC"})
    result = runner.invoke(app, ["hfl", "--attack", "raising", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "plug-in attack raising (raising = raising_attack:SPEC) failed: ValueError: not today" in result.output


def test_a_plug_in_attack_that_exits_is_one_line_naming_its_entry_point(plugins, tmp_path):
    exiting = docs_example().replace("        labels, rule = recover_labels(observation)\n",
                                     "        raise SystemExit('bye')\n")
    plugins("exiting_attack", exiting.replace('"toy', '"exiting'), {"exiting": "exiting_attack:SPEC"})
    result = runner.invoke(app, ["hfl", "--attack", "exiting", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "plug-in attack exiting (exiting = exiting_attack:SPEC) failed: SystemExit: bye" in result.output


def test_a_write_hook_writes_only_into_its_run_directory_and_every_file_is_recorded(plugins, tmp_path):
    hook = textwrap.dedent("""
        def write(run, outcome):
            (run.path.parent / "ESCAPED.txt").write_text("outside")
            (run.path / "plain.txt").write_text("inside, not through run.file")
            run.save_figure("extra.png", __import__("matplotlib.figure").figure.Figure())
    """)
    source = docs_example().replace("SPEC = AttackSpec(\n", hook + "\n\nSPEC = AttackSpec(\n    write=write,\n")
    plugins("writer_attack", source.replace('"toy', '"writer'), {"writer": "writer_attack:SPEC"})
    out = tmp_path / "runs" / "run"
    result = runner.invoke(app, ["hfl", "--attack", "writer", "--json", "--out", str(out)])
    assert result.exit_code == 0 and "wrote outside its run directory (ESCAPED.txt)" in result.output
    assert not (tmp_path / "runs" / "ESCAPED.txt").exists()
    recorded = json.loads((out / ".splitlab-run.json").read_text())["files"]
    assert {"plain.txt", "extra.png"} <= set(recorded) and (out / "plain.txt").read_text().startswith("inside")


def test_an_option_of_another_attack_is_refused_naming_whose_it_is(tmp_path):
    result = runner.invoke(app, ["hfl", "--attack", "dlg", "--ratio", "0.3", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "it is an option of fedleak, not of dlg" in result.output
    assert not (tmp_path / "run").exists()


def test_an_unknown_attack_is_one_line_naming_the_attacks(tmp_path):
    result = runner.invoke(app, ["hfl", "--attack", "nope", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "unknown attack 'nope'" in result.output and "dlg" in result.output
    assert not (tmp_path / "run").exists()


def test_a_split_spec_cannot_take_over_another_attacks_config():
    """A split config is bound to its one spec when the spec is built: a second spec reusing it is refused, so a
    plug-in cannot rebind one of the lab's attacks."""
    import dataclasses

    from attacks.spec import SpecError
    from attacks.split.label_norm import NormConfig, SPEC

    copy = {"name": "label-norm-copy", "default": "label-norm-copy.li",
            "presets": tuple(dataclasses.replace(p, name=p.name.replace("label-norm", "label-norm-copy"))
                             for p in SPEC.presets)}
    with pytest.raises(SpecError, match="config says attack = 'label-norm'"):
        dataclasses.replace(SPEC, **copy)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Renamed(NormConfig):
        attack = "label-norm-copy"
    taken = dataclasses.replace(SPEC, **copy, experiment=dataclasses.replace(SPEC.experiment, config=Renamed))
    assert Renamed.bound_spec is taken and NormConfig.bound_spec is SPEC

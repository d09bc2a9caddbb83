"""The defence contract, over the whole registry: every defence is one declaration at its point, its options are
refused out of range in one line, zero strength is no defence bit for bit, a seed gives the same noise every run,
the matrix of split attacks and defences says which pair runs, and a plug-in defence is two files."""
from __future__ import annotations

import dataclasses
import json
import re
import sys

import pytest
import torch
from typer.testing import CliRunner

from splitlab import api
from splitlab.cli import app
from splitlab.defence_matrix import matrix, pair
from vfl.defences import registry
from vfl.defences.spec import FEATURE_POINTS, POINTS, Where
from vfl.errors import SplitlabError

runner = CliRunner()
SPECS = [registry.spec(n) for n in registry.BUILTIN]
SHAPE = (1, 28, 28)


def where_for(spec) -> Where:
    return Where(input_shape=SHAPE, classes=2, flat_input=True,
                 train_images=torch.rand(128, *SHAPE, generator=torch.Generator().manual_seed(2)))


def example_options(spec) -> dict[str, str]:
    _, _, rest = spec.example.partition(":")
    return dict(pair.split("=") for pair in rest.split(",") if pair)


def apply(spec, hook, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """What the defence's hook makes of `x` at its point (at the labels point, of `labels`; at the feature-loss point,
    the gradient x plus the extra term's gradient at activations x; at the label-layers point, its layer on x)."""
    if spec.point == "input":
        return hook.on_input(x, True)
    if spec.point == "activations":
        return hook.on_activations(x, True)
    if spec.point == "received-gradient":
        return hook.on_gradient(x)
    if spec.point == "feature-loss":
        h = x.clone().requires_grad_(True)
        term = hook.on_loss(x.flip(0) ** 2, h)
        return x if term is None else x + torch.autograd.grad(term, h)[0]
    if spec.point == "labels":
        return hook.on_training_labels(labels)
    if spec.point == "label-layers":
        return hook.layer.train()(x)
    if spec.point == "send-back":
        if hook.class_gradients:                 # what the label party gives it: G as if every label were class c
            hook.per_class = [x * (c + 1) for c in range(2)]
        return hook.on_send(x, labels)
    return hook([x], torch.Generator().manual_seed(0))[0]


def built(spec, text: str):
    (chosen,) = registry.chain(text, (spec.point,), spec.flag)
    (hook,) = registry.build([chosen], where_for(spec))
    return hook


def case():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, *SHAPE, generator=g), torch.arange(16) % 2


def test_every_point_has_defences_and_every_name_one_meaning():
    assert {s.point for s in SPECS} == set(POINTS)
    assert len({s.name for s in SPECS}) == len(SPECS) == len(registry.names())
    for s in SPECS:
        assert registry.chain(s.example, (s.point,), s.flag)[0].spec is s         # its example parses
        others = tuple(p for p in POINTS if p != s.point)
        with pytest.raises(SplitlabError, match=f"^{s.name} acts at the {s.point} point .* give it with"):
            registry.chain(s.example, others, "--flag")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_option_is_refused_out_of_its_range_in_one_line(spec):
    given = example_options(spec)
    for field, opt in spec.options():
        if opt.check is None or opt.check.refused is None:
            continue
        text = spec.name + ":" + ",".join(f"{k}={v}" for k, v in {**given, field.name: opt.check.refused}.items())
        with pytest.raises(SplitlabError) as refused:
            registry.chain(text, (spec.point,), spec.flag)
        assert len(str(refused.value).splitlines()) == 1 and field.name in str(refused.value), text
    with pytest.raises(SplitlabError, match="does not take option 'nonsense'"):
        registry.chain(f"{spec.example}{',' if ':' in spec.example else ':'}nonsense=1", (spec.point,), spec.flag)


def _command_for(spec) -> list[str]:
    """A command that takes the defence's flag: hfl for an upload defence, a label attack for the label party's,
    a feature attack for the feature party's."""
    if spec.point == "upload":
        return ["hfl", "--attack", "dlg"]
    return ["attack", "label-norm" if spec.flag == "--send-back" else "unsplit"]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_defence_refuses_a_bad_option_on_the_command_line_in_one_line_and_exit_2(spec, tmp_path):
    name, value = next((f.name, o.check.refused) for f, o in spec.options()
                       if o.check is not None and o.check.refused is not None)
    out_of_range = spec.name + ":" + ",".join(f"{k}={v}" for k, v in {**example_options(spec), name: value}.items())
    unknown = f"{spec.example}{',' if ':' in spec.example else ':'}nonsense=1"
    for text, message in [(out_of_range, name), (unknown, "nonsense")]:
        result = runner.invoke(app, [*_command_for(spec), spec.flag, text, "--out", str(tmp_path / "run")])
        assert result.exit_code == 2 and message in result.output, (text, result.output)
        assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists(), result.output


@pytest.mark.parametrize("spec", [s for s in SPECS if s.zero is not None], ids=lambda s: s.name)
def test_zero_strength_is_no_defence_bit_for_bit(spec):
    x, labels = case()
    state = torch.get_rng_state()
    text = spec.name + ":" + ",".join(f"{k}={v}" for k, v in spec.zero.items())
    out = apply(spec, built(spec, text), x.clone(), labels.clone())
    assert torch.equal(out, labels if spec.point == "labels" else x) and torch.equal(torch.get_rng_state(), state)


# splitguard draws only over rounds of labels and gradients together (tests/test_field_defences.py seeds it)
@pytest.mark.parametrize("spec", [s for s in SPECS if "seed" in {f.name for f, _ in s.options()}
                                  and s.name != "splitguard"], ids=lambda s: s.name)
def test_a_seed_gives_the_same_noise_every_run_and_another_seed_other_noise(spec):
    x, labels = case()
    given = {k: v for k, v in example_options(spec).items() if k != "seed"}

    def seeded(seed: int) -> str:
        return spec.name + ":" + ",".join(f"{k}={v}" for k, v in {**given, "seed": seed}.items())
    first = [apply(spec, hook, x, labels) for hook in [built(spec, seeded(5))] for _ in range(2)]
    again = [apply(spec, hook, x, labels) for hook in [built(spec, seeded(5))] for _ in range(2)]
    other = apply(spec, built(spec, seeded(6)), x, labels)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other) and not torch.equal(first[0], labels if spec.point == "labels" else x)


def test_every_split_attack_meets_every_split_defence_or_is_refused_with_its_reason():
    pairs = matrix()
    assert len(pairs) == 13 * 18 and sum(p.runnable for p in pairs) == 216          # 104 of 120 before the one split case
    refused = {(p.attack, p.defence): p.how for p in pairs if not p.runnable}
    assert all(len(why.splitlines()) == 1 and why for why in refused.values())
    assert "sends back the gradients it chooses" in refused["fsha", "marvell"]
    assert "sends the labels" in refused["esa", "splitguard"]     # several feature parties: none sends labels
    assert pair("unsplit", "marvell").how == "--send-back marvell:scale=1 --task binary"
    assert pair("label-norm", "activation-noise").runnable and pair("fsha", "orthogonal").runnable
    assert pair("label-norm", "semi-orthogonal").how.endswith("--arch small-mlp --cut-layer 1")


def test_a_defence_at_the_wrong_flag_or_command_is_one_line_and_exit_2(tmp_path):
    for args, message in [
            (["attack", "label-norm", "--defence", "marvell:scale=1"], "give it with a split-learning command's --send-back"),
            (["attack", "fsha", "--send-back", "max-norm"], "FSHA's server is the attacker"),
            (["hfl", "--attack", "dlg", "--defence", "activation-noise:sigma=1"], "--defence"),
            (["attack", "unsplit", "--defence", "gaussian:sigma=1"], "splitlab hfl's --defence"),
            (["train", "--send-back", "marvell:scale=1"], "binary tasks")]:
        result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_the_cost_of_every_defence_is_recorded_in_the_run_that_uses_it(tmp_path):
    defended = api.attack("label-norm", arch="small-mlp", cut_layer=1, epochs=1, iterations=1, seed=0,
                          defence="activation-noise:sigma=0.5", send_back="max-norm", out=tmp_path / "run")
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["defence"] == "activation-noise:sigma=0.5" and m["send_back"] == "max-norm"
    assert 0 < m["accuracy"] <= 1 and m["accuracy"] == defended.metrics["accuracy"]


def docs_example() -> str:
    """The plug-in defence of docs/extending.md, as a user would copy it."""
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text()
    return re.search(r"```python\n# clip_defence.py\n(.*?)```", page, re.S).group(1)


PLUGIN = docs_example()


@pytest.fixture
def defence_plugins(tmp_path, monkeypatch):
    """A plug-in as pip leaves it: its module and a dist-info whose entry point registers it (the two files)."""
    folder = tmp_path / "plugins"
    monkeypatch.syspath_prepend(str(folder))

    def forget():
        registry._entries.cache_clear()
        registry._spec.cache_clear()
        registry._FAILED.clear()

    def add(module: str, source: str, entries: dict[str, str], dist: str) -> None:
        folder.mkdir(exist_ok=True)
        (folder / f"{module}.py").write_text(source)
        info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text("[splitlab.defences]\n" + "".join(f"{k} = {v}\n"
                                                                                for k, v in entries.items()))
        forget()
    forget()
    yield add
    forget()


def test_a_plug_in_defence_is_two_files_and_meets_two_attacks(defence_plugins, tmp_path):
    defence_plugins("clip_defence", PLUGIN, {"clip-activations": "clip_defence:SPEC"}, "clip-defence")
    assert "clip-activations" in registry.names("activations")
    assert pair("unsplit", "clip-activations").runnable and pair("label-norm", "clip-activations").runnable
    common = {"arch": "small-mlp", "epochs": 1, "seed": 0}
    clipped = api.attack("label-norm", cut_layer=1, iterations=1, defence="clip-activations:bound=0.01", **common)
    plain = api.attack("label-norm", cut_layer=1, iterations=1, **common)
    assert clipped.metrics["leak_auc"] != plain.metrics["leak_auc"]
    done = runner.invoke(app, ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--iterations", "2",
                               "--defence", "clip-activations", "--out", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    bad = runner.invoke(app, ["attack", "unsplit", "--defence", "clip-activations:bound=0", "--out",
                              str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "defence clip-activations needs bound > 0" in bad.output


@pytest.mark.parametrize("source,entry,message", [
    ("raise SystemExit(3)\n", "exiting", "failed to load: SystemExit: 3"),
    ("import no_such_module_here\n", "missing", "failed to load: ModuleNotFoundError"),
    ("SPEC = 42\n", "notspec", "points at a int, not a DefenceSpec"),
])
def test_a_broken_plug_in_defence_is_one_line_and_the_lab_works_on(defence_plugins, source, entry, message, tmp_path):
    defence_plugins(f"{entry}_defence", source, {entry: f"{entry}_defence:SPEC"}, f"{entry}-defence")
    with pytest.raises(SplitlabError) as refused:
        registry.spec(entry)
    assert len(str(refused.value).splitlines()) == 1 and message in str(refused.value)
    assert f"entry point {entry} = {entry}_defence:SPEC in {entry}-defence 0.1" in str(refused.value)
    assert "orthogonal" in registry.names() and entry in registry.failures()
    listed = runner.invoke(app, ["defences"])
    assert listed.exit_code == 0 and "orthogonal" in listed.output
    run = runner.invoke(app, ["train", "--defence", entry, "--out", str(tmp_path / "run")])
    assert run.exit_code == 2 and message in run.output and not (tmp_path / "run").exists()


def test_a_plug_in_defence_named_like_a_lab_defence_is_never_loaded(defence_plugins, capfd):
    defence_plugins("clash_defence", "raise RuntimeError('imported')\n", {"marvell": "clash_defence:SPEC"},
                    "clash-defence")
    assert registry.spec("marvell").point == "send-back"
    registry.names()
    assert "plug-in defence 'marvell'" in capfd.readouterr().err and "clash_defence" not in sys.modules


def test_a_declaration_that_cannot_work_is_refused_when_built():
    from vfl.defences.noise import NoiseSettings
    from vfl.defences.spec import DefenceSpec

    good = dict(name="x", point="activations", title="t", paper="p", settings=NoiseSettings,
                build=lambda s, w: None, example="x:sigma=1")
    for change, message in [({"point": "cut"}, "point must be one of"), ({"name": "A b"}, "name must be"),
                            ({"settings": dict}, "DefenceSettings"), ({"needs": ("gpu",)}, "needs 'gpu'"),
                            ({"zero": {"sigma": -1.0}}, "zero options are refused")]:
        with pytest.raises(SplitlabError, match=message):
            DefenceSpec(**{**good, **change})
    assert dataclasses.replace(DefenceSpec(**good), name="y").name == "y"

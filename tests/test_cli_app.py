"""The `splitlab` front door: a lazy top-level app (help and --version import no command module),
-h beside --help, and `splitlab weights` (listing, --download through a stand-in downloader; this
machine has no network)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.error import URLError

import pytest
import torch
import typer
from typer.testing import CliRunner

from splitlab import cli
from splitlab.cli import COMMANDS, app

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "torchvision", "lpips", "pytorch_fid", "scipy", "numpy", "skimage", "sklearn", "matplotlib",
         "vfl.cli", "attacks.cli", "theory_checks.cli")
runner = CliRunner()


def _fresh_process(*args: str) -> tuple[int, str, list[str]]:
    """Run `splitlab ARGS` through its entry point in a new interpreter; return the exit code, stdout and
    which heavy modules were imported by the end."""
    code = ("import sys\nfrom splitlab.cli import main\nsys.argv[0] = 'splitlab'\n"
            "try:\n    main()\n    status = 0\nexcept SystemExit as exc:\n    status = exc.code or 0\n"
            f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "sys.stderr.write('\\nRESULT ' + repr((status, heavy)) + '\\n')\n")
    done = subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    status, heavy = eval(done.stderr.rsplit("RESULT ", 1)[1])
    return status, done.stdout, heavy


@pytest.mark.parametrize("args", [(), ("--help",), ("-h",), ("--version",)])
def test_help_and_version_import_no_command_module(args):
    status, out, heavy = _fresh_process(*args)
    assert heavy == [], f"`splitlab {' '.join(args)}` imported {heavy}"
    if args == ("--version",):
        assert status == 0 and out.strip() == f"splitlab {cli.version()}"
        return
    assert status == (0 if args else 2)  # bare `splitlab` shows the help as a usage error, as before
    for name in cli.available_commands():
        assert f" {name} " in out
    assert "-h" in out and "--version" in out


LOADED_ON_DEMAND = ("lpips", "pytorch_fid", "torchvision", "matplotlib", "ray", "torch._inductor", "torch._dynamo",
                    "sympy", "skimage", "scipy")
"""What an attack command's options never need: metrics, figures, sweeps and compiling load them when used."""


def test_attack_help_loads_no_metric_figure_sweep_or_compiler_module():
    code = ("import sys\nfrom splitlab.cli import main\nsys.argv[0] = 'splitlab'\n"
            "for args in (['hfl', '--attack', 'fedleak', '--help'], ['attack', 'unsplit', '--help']):\n"
            "    sys.argv[1:] = args\n"
            "    try:\n        main()\n    except SystemExit:\n        pass\n"
            f"print([m for m in {LOADED_ON_DEMAND!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "--ratio" in done.stdout and "--clone" in done.stdout        # both helps were printed
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_version_is_the_installed_distribution():
    from importlib import metadata

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    try:
        expected = metadata.version("splitlab")
    except metadata.PackageNotFoundError:
        expected = cli.version()
    assert result.stdout == f"splitlab {expected}\n"


def _help_panel(out: str) -> dict[str, str]:
    """The command panel of the rich help as {name: help with its line breaks joined}, in order."""
    rows: dict[str, str] = {}
    lines = out.split("Commands", 1)[1].splitlines()[1:]
    for line in lines:
        if not line.startswith("\u2502"):  # the panel's left border
            break
        cell = line.strip("\u2502 ")
        if line[2] != " ":  # a new command's first line
            name, _, text = cell.partition(" ")
            rows[name] = text.strip()
        else:
            rows[name] += " " + cell
    return rows


def test_help_lists_the_table_in_order_with_its_help():
    panel = _help_panel(runner.invoke(app, ["--help"]).stdout)
    assert list(panel) == cli.available_commands()
    assert panel == {name: COMMANDS[name].help for name in panel}


def test_every_command_in_the_table_resolves_and_matches_its_help():
    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="splitlab")
    names = cli.available_commands()
    assert group.list_commands(ctx) == names
    for name in names:
        command = group.get_command(ctx, name)
        assert command is not None and command.name == name
        # the static table says what the command's own docstring says (no drift)
        assert " ".join((command.short_help or command.help or "").split()) == COMMANDS[name].help, name
        for flag in ("--help", "-h"):
            result = runner.invoke(app, [name, flag])
            assert result.exit_code == 0, (name, flag, result.output)
            assert f" {name} [OPTIONS]" in " ".join(result.stdout.split()).split("Usage:", 1)[1]
    assert group.get_command(ctx, "no-such-command") is None


def test_subcommands_of_groups_take_h_too():
    for args in (["attack", "-h"], ["attack", "unsplit", "-h"], ["attack", "fsha", "-h"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert " ".join(args[:-1]) + " [OPTIONS]" in " ".join(result.stdout.split()).split("Usage:", 1)[1]


def test_a_misspelt_command_is_suggested_from_the_table():
    result = runner.invoke(app, ["trian"])
    assert result.exit_code == 2 and "Did you mean 'train'?" in result.output
    assert runner.invoke(app, ["wieghts"]).output.count("'weights'") == 1


def test_models_output_is_unchanged_by_the_lazy_app():
    from vfl.models import describe

    result = runner.invoke(app, ["models", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["architectures"] == json.loads(json.dumps(describe()))


# --------------------------------------------------------------------------- splitlab weights


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty torch hub cache of the test's own ($TORCH_HOME/hub/checkpoints)."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path / "torch" / "hub" / "checkpoints"


def _weights(*args: str):
    return runner.invoke(app, ["weights", *args])


def test_weights_lists_every_file_where_the_loaders_look(hub):
    from attacks import metrics

    result = _weights("--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["command"] == "weights" and record["hub_dir"] == str(hub.parent)
    rows = {r["name"]: r for r in record["weights"]}
    assert list(rows) == ["alex", "vgg", "squeeze", "fid"]
    for net, (_, filename) in metrics.LPIPS_BACKBONES.items():
        assert rows[net]["path"] == str(hub / filename) and rows[net]["option"] == "--lpips-weights"
    assert rows["fid"]["path"] == str(hub / metrics.FID_WEIGHTS_FILE) and rows["fid"]["option"] == "--fid-weights"
    assert not any(r["present"] for r in rows.values()) and all(r["bytes"] is None for r in rows.values())
    # the paths are the ones the loaders read: their "unavailable" reasons name the same files
    assert rows["alex"]["path"] in metrics.load_lpips().reason
    assert rows["fid"]["path"] in metrics.load_fid().reason

    hub.mkdir(parents=True)
    (hub / metrics.FID_WEIGHTS_FILE).write_bytes(b"x" * 1234)
    rows = {r["name"]: r for r in json.loads(_weights("--json").stdout)["weights"]}
    assert rows["fid"]["present"] and rows["fid"]["bytes"] == 1234 and not rows["alex"]["present"]
    human = _weights()
    assert human.exit_code == 0 and "alexnet-owt-7be5be79.pth" in human.stdout
    assert "splitlab weights --download alex vgg squeeze" in " ".join(human.stdout.split())


def test_weights_urls_are_the_ones_torchvision_and_pytorch_fid_use():
    import torchvision.models as tv
    from pytorch_fid.inception import FID_WEIGHTS_URL

    from attacks.weights_cli import weight_files

    files = weight_files()
    assert files["alex"].url == tv.AlexNet_Weights.IMAGENET1K_V1.url
    assert files["vgg"].url == tv.VGG16_Weights.IMAGENET1K_V1.url
    assert files["squeeze"].url == tv.SqueezeNet1_1_Weights.IMAGENET1K_V1.url
    assert files["fid"].url == FID_WEIGHTS_URL
    for name in ("alex", "vgg", "squeeze"):
        assert files[name].url.rsplit("/", 1)[1] == files[name].file
        assert files[name].file.endswith(f"-{files[name].hash_prefix}.pth")


def _fake_downloader(calls, payload=None):
    def fetch(url, dst, hash_prefix=None, progress=True, timeout=None):
        calls.append((url, Path(dst), hash_prefix))
        if payload is None:
            torch.save({"features.0.weight": torch.zeros(2, 3)}, dst)
        else:
            Path(dst).write_bytes(payload)
    return fetch


def test_weights_download_fetches_alex_and_fid_by_default_atomically(hub, monkeypatch):
    from pytorch_fid.inception import FID_WEIGHTS_URL

    from attacks import metrics

    calls = []
    monkeypatch.setattr("attacks.weights_cli.fetch_url", _fake_downloader(calls))
    result = _weights("--download", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["downloaded"] == ["alex", "fid"] and record["already_present"] == []
    assert [url for url, _, _ in calls] == ["https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
                                            FID_WEIGHTS_URL]
    assert [prefix for _, _, prefix in calls] == ["7be5be79", None]
    for _, dst, _ in calls:  # fetched to a temporary name in the cache folder, then renamed
        assert dst.parent == hub and dst.name.endswith(".part")
    assert sorted(p.name for p in hub.iterdir()) == sorted(["alexnet-owt-7be5be79.pth", metrics.FID_WEIGHTS_FILE])
    rows = {r["name"]: r for r in record["weights"]}
    assert rows["alex"]["present"] and rows["fid"]["present"] and not rows["vgg"]["present"]
    assert torch.load(hub / "alexnet-owt-7be5be79.pth", weights_only=True)["features.0.weight"].shape == (2, 3)

    calls.clear()  # a file already there is kept unless --force
    again = json.loads(_weights("--download", "alex", "--json").stdout)
    assert calls == [] and again["downloaded"] == [] and again["already_present"] == ["alex"]
    forced = json.loads(_weights("--download", "squeeze", "alex", "--force", "--json").stdout)
    assert [url.rsplit("/", 1)[1] for url, _, _ in calls] == ["squeezenet1_1-b8a52dc0.pth", "alexnet-owt-7be5be79.pth"]
    assert forced["downloaded"] == ["squeeze", "alex"]


def test_weights_download_without_network_is_one_line_naming_url_and_the_manual_way(hub, monkeypatch):
    def offline(url, dst, hash_prefix=None, progress=True, timeout=None):
        raise URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("attacks.weights_cli.fetch_url", offline)
    for args, url, option, target in [
        ((), "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth", "--lpips-weights",
         "alexnet-owt-7be5be79.pth"),
        (("fid",), "pt_inception-2015-12-05-6726825d.pth", "--fid-weights", "pt_inception-2015-12-05-6726825d.pth"),
    ]:
        result = _weights("--download", *args)
        assert result.exit_code == 2 and result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert url in result.stderr and str(hub / target) in result.stderr and option in result.stderr
        assert "name resolution" in result.stderr
    assert not hub.exists() or list(hub.iterdir()) == []  # nothing half-written left behind


def test_weights_download_refuses_a_file_that_is_not_a_state_dict(hub, monkeypatch):
    calls = []
    monkeypatch.setattr("attacks.weights_cli.fetch_url", _fake_downloader(calls, payload=b"<html>captive portal"))
    result = _weights("--download", "vgg")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "vgg16-397923af.pth" in result.stderr and "did not give a loadable weights file" in result.stderr
    assert not hub.exists()  # nothing left behind, not even the cache folder the download made


def test_weights_names_need_download_and_must_be_known(hub, monkeypatch):
    calls = []
    monkeypatch.setattr("attacks.weights_cli.fetch_url", _fake_downloader(calls))
    bare = _weights("alex")
    assert bare.exit_code == 2 and "add --download" in bare.stderr
    unknown = _weights("--download", "fid", "resnet")
    assert unknown.exit_code == 2 and "unknown weight file 'resnet'" in unknown.stderr
    assert calls == []  # a misspelt name stops the command before anything is fetched


@pytest.mark.slow
def test_the_group_commands_mapping_is_lazy_and_complete():
    """Code that walks `get_command(app).commands` (the sweep's option check) sees every command and
    imports only the one it looks up (fresh interpreter)."""
    code = ("import sys, typer.main\nfrom splitlab.cli import app\n"
            "group = typer.main.get_command(app)\nnames = sorted(group.commands)\n"
            "models = group.commands['models']\n"
            "print(names, 'models' in group.commands, 'nope' in group.commands, group.commands.get('nope'),\n"
            "      models.name, [p.opts[0] for p in models.params], 'vfl.cli' in sys.modules,\n"
            "      'attacks.cli' in sys.modules, 'theory_checks.cli' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == (str(sorted(cli.available_commands())) + " True False None models ['--json'] "
                                   "True False False").split()


def test_plain_help_without_rich_lists_the_table(monkeypatch):
    group = typer.main.get_command(app)
    monkeypatch.setattr(group, "rich_markup_mode", None)
    ctx = typer.Context(group, info_name="splitlab")
    text = group.get_help(ctx)
    assert "Commands:" in text or "Commands" in text
    for name in cli.available_commands():
        assert f"  {name} " in text


def _help_cases() -> list[tuple[str, ...]]:
    from attacks.registry import BUILTIN

    return ([(name, "--help") for name in COMMANDS] + [("attack", "-h")]
            + [("hfl", "--attack", name, "--help") for name in BUILTIN["hfl"]]
            + [("attack", name, "--help") for name in BUILTIN["split"]])


@pytest.mark.parametrize("args", _help_cases(), ids=" ".join)
def test_every_help_imports_no_torch(args):
    """An option's help is its declaration: `--help` of every command and every attack is read without torch."""
    code = ("import sys\nfrom splitlab.cli import main\nsys.argv[0] = 'splitlab'\n"
            "try:\n    main()\n    status = 0\nexcept SystemExit as exc:\n    status = exc.code or 0\n"
            "sys.stderr.write('\\nRESULT ' + repr((status, 'torch' in sys.modules)) + '\\n')\n")
    done = subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    status, torch_loaded = eval(done.stderr.rsplit("RESULT ", 1)[1])
    assert status == 0 and "Usage" in done.stdout, done.stderr
    assert not torch_loaded, f"`splitlab {' '.join(args)}` imported torch"


def _index_cases() -> list[tuple[str, ...]]:
    from splitlab import help_index

    cases = []
    for key, entry in help_index._data().items():
        if key == "attack":
            cases += [("attack", "--help"), ("attack", "-h")] + [("attack", n, "--help") for n in entry["commands"]]
        elif key.startswith("hfl --attack "):
            cases += [("hfl", "--attack", key.split()[-1], "--help"), ("hfl", f"--attack={key.split()[-1]}", "-h")]
        else:
            cases.append((key, "--help"))
    return cases


def test_every_help_from_the_index_is_the_commands_own(monkeypatch):
    """The help built from the index is, to the character, the help of the command built from its code."""
    from splitlab import help_index

    monkeypatch.setenv("COLUMNS", "140")
    built, served = help_index.command, []
    monkeypatch.setattr(help_index, "command", lambda *a: served.append(built(*a)) or served[-1])
    indexed = {args: runner.invoke(app, list(args)) for args in _index_cases()}
    assert len(served) == len(indexed) and None not in served      # every first help came from the index
    calls = []
    monkeypatch.setattr(help_index, "command", lambda *a: calls.append(a))
    for args, from_index in indexed.items():
        own = runner.invoke(app, list(args))
        assert (from_index.exit_code, from_index.stdout) == (own.exit_code, own.stdout), " ".join(args)
        assert own.exit_code == 0 and "Usage" in own.stdout
    assert len(calls) == len(indexed)          # the second helps came from the commands' code


def test_the_help_index_is_not_stale():
    from splitlab import help_index

    assert help_index.DATA.read_text(encoding="utf-8") == help_index.render(help_index.generate()), \
        "splitlab/help_index.json is stale: run `python -m splitlab.docs`"


def test_the_index_serves_only_a_help_the_command_would_show(monkeypatch):
    from attacks import registry
    from splitlab import help_index

    group = typer.main.get_command(app)
    ctx = group.context_class(group, info_name="splitlab", help_option_names=["-h", "--help"])
    assert help_index.command(ctx, "train", ["--help"]) is not None
    assert help_index.command(ctx, "train", ["--epochs", "2", "-h"]) is not None
    assert help_index.command(ctx, "train", ["--epochs", "2"]) is None
    assert help_index.command(ctx, "train", ["--out", "--help"]) is None         # a value, not the help option
    assert help_index.command(ctx, "train", ["--no-such-option", "--help"]) is None   # the command's own error
    assert help_index.command(ctx, "hfl", ["--attack", "no-such", "--help"]) is None
    assert help_index.command(ctx, "attack", ["no-such", "--help"]) is None
    assert help_index.command(ctx, "attack", ["unsplit", "--help"]) is not None
    monkeypatch.setattr(registry, "plugin_names", lambda: ["toy"])
    assert help_index.command(ctx, "hfl", ["--help"]) is None                   # a plug-in: the real commands
    assert help_index.command(ctx, "attack", ["--help"]) is None

"""The prepared GPU check (scripts/device_check.py) and the lab's device-correct habits, checked on the CPU."""
import importlib.metadata
import json
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

import device_plan  # noqa: E402
from device_plan import ATTACKS, DEVICE, SMOKE, build, total  # noqa: E402


@pytest.mark.slow
def test_every_attack_runs_as_its_registered_quick_preset_on_cuda():
    from attacks.registry import spec

    for name in ATTACKS:                                                 # imports every attack: slow
        argv = device_plan.attack_argv(name, DEVICE)
        preset = argv[argv.index("--preset") + 1]
        assert preset in [p.name for p in spec(name).presets]
        assert preset.endswith(".quick") or preset == spec(name).default          # the label attacks: seconds
        assert argv[argv.index("--device") + 1] == "cuda"


def test_the_plan_runs_every_attack_eager_and_compiled_and_fits_eight_minutes(tmp_path):
    from attacks.registry import names

    jobs, groups = build(DEVICE, tmp_path)
    assert set(ATTACKS) == set(names())                                  # every registered attack
    compiled = {j.name for j in jobs if j.name.startswith("compiled-")}
    assert compiled == {f"compiled-{a}" for a in device_plan.ENGINE}     # FSHA and the label attacks: no engine steps
    assert {g.name for g in groups} == {"fedleak-baselines-paper", "tgias-algorithm1-paper", "jast-table1-gpu"}
    cells = {g.name: sum(1 for j in jobs if j.group == g.name) for g in groups}
    assert cells == {"fedleak-baselines-paper": 6, "tgias-algorithm1-paper": 6, "jast-table1-gpu": 10}
    estimates = total(jobs, DEVICE)
    assert estimates["total"] <= device_plan.PLAN_LIMIT_S <= DEVICE.deadline < 600


def test_the_plan_command_prints_its_jobs_and_says_it_fits():
    done = subprocess.run([sys.executable, str(SCRIPTS / "device_check.py"), "--plan"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "attacks-eager" in done.stdout and "fedleak-baselines-paper (6 cells)" in done.stdout
    estimated = float(re.search(r"total (\d+) s", done.stdout).group(1))
    assert estimated <= 480 and "fits" in done.stdout and "DOES NOT FIT" not in done.stdout


def test_full_mnist_in_the_data_root_runs_jast_table1_at_paper_size(tmp_path):
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte"):
        (raw / name).write_bytes(b"")
    jobs, groups = build(DEVICE, tmp_path / "work", tmp_path / "data")
    jast = next(g for g in groups if g.grid == "jast-table1")
    assert jast.name == "jast-table1-paper" and jast.paper_size
    assert sum(1 for j in jobs if j.group == jast.name) == 10          # CNN and MLP on MNIST, seeds 0-4


def test_the_device_command_is_the_same_in_the_script_and_the_docs_and_fits_one_call():
    import device_check

    command = next(line.strip() for line in device_check.__doc__.splitlines() if "pip install" in line)
    assert len(command) <= 2000 and command.endswith("python3 scripts/device_check.py --out $OUT")
    assert f"    {command}\n" in (ROOT / "docs" / "benchmarks.md").read_text()
    assert "--no-index --no-deps" in command and ".whl/*.whl" in command


def test_a_command_becomes_a_sweep_cell_with_the_same_arguments():
    from device_check import cell_of

    argv = ["attack", "unsplit", "--arch", "cnn", "--preset", "unsplit.quick", "--overwrite", "--device", "cpu"]
    assert cell_of(argv).argv(Path("run")) == [*argv, "--out", "run", "--json"]


def test_the_guard_skips_what_would_not_fit_and_stops_what_runs_at_the_deadline(tmp_path):
    from device_pool import Guard

    lines = []
    guard = Guard(1.0, tmp_path / "logs", lines.append, env=None)
    sleeper = device_plan.Job("pool", "sleeper", ("-S", "-c", "import time; time.sleep(300)"), 0.1, "test")
    quick = device_plan.Job("pool", "quick", ("-S", "-c", "pass"), 0.2, "test")
    huge = device_plan.Job("pool", "huge", ("-c", "pass"), 100.0, "test")
    started = time.monotonic()
    guard.run([sleeper, quick, huge], slots=2)
    assert time.monotonic() - started < 150       # stopped at the deadline, not after the sleeper's 300 s
    records = guard.records
    assert records["huge"]["status"] == "skipped" and "100 s" in records["huge"]["reason"]
    assert records["quick"]["status"] == "ok"
    assert records["sleeper"]["status"] == "stopped" and records["sleeper"]["reason"] == "running at the deadline"
    assert any(line.startswith("skip huge") for line in lines)


def test_the_guard_scales_its_estimates_by_what_the_finished_jobs_took(tmp_path):
    from device_pool import Guard

    guard = Guard(100.0, tmp_path / "logs", lambda line: None, env=None)
    guard.records = {"a": {"status": "ok", "seconds": 3.0, "estimate": 1.0},
                     "b": {"status": "ok", "seconds": 30.0, "estimate": 1.0},
                     "c": {"status": "skipped", "seconds": 0.0, "estimate": 1.0}}
    assert guard.scale() == pytest.approx(4.0)                           # median 16.5, held at the bound
    guard.records["a"]["seconds"] = guard.records["b"]["seconds"] = 2.0
    assert guard.scale() == pytest.approx(2.0)
    assert not guard.fits(device_plan.Job("pool", "long", (), 60.0, "test"), until=100.0)


def test_the_cpu_reference_has_every_attack_it_runs():
    reference = device_plan.reference()
    assert set(reference["attacks"]) == set(ATTACKS)
    for name, record in reference["attacks"].items():
        assert record["status"] == "ok" and record["steps"] > 0 and record["seconds"] > 0, name
        assert record["argv"] == device_plan.attack_argv(name, device_plan.Profile("reference", "cpu"))


def test_the_wheel_bundle_carries_every_dependency_the_device_lacks_at_the_version_installed_here(tmp_path):
    import tomllib

    import device_bundle

    needed = [re.split(r"[<>=!~ \[]", d, maxsplit=1)[0] for d in
              tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    bundled = {*device_bundle.BINARY, *device_bundle.SDIST}
    assert [n for n in needed if n not in device_bundle.ON_DEVICE and n not in bundled] == []
    # no version is written down anywhere: each pin is what this environment resolved, so a release never reddens it
    assert not re.search(r"==[0-9]", (SCRIPTS / "device_wheels.sh").read_text())
    for pin in device_bundle.pins(device_bundle.BINARY + device_bundle.SDIST):
        name, version = pin.split("==")
        assert version == importlib.metadata.version(name)
    # an earlier bundle's wheel of another version is removed; the lab's own and the current ones stay
    optuna = importlib.metadata.version("optuna")
    for wheel in ("optuna-0.0.1-py3-none-any.whl", f"optuna-{optuna}-py3-none-any.whl", "splitlab-0.1.0-py3-none-any.whl"):
        (tmp_path / wheel).write_bytes(b"")
    assert device_bundle.prune(tmp_path) == ["optuna-0.0.1-py3-none-any.whl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"optuna-{optuna}-py3-none-any.whl",
                                                         "splitlab-0.1.0-py3-none-any.whl"]
    record = device_bundle.stamp(tmp_path)
    assert json.loads((tmp_path / "source.json").read_text())["versions"] == record["versions"]
    assert record["versions"]["optuna"] == optuna and len(record["commit"]) == 40


def test_langevin_noise_for_a_gpu_is_drawn_pinned_and_is_the_same_noise(monkeypatch):
    from attacks.hfl.gi import parts

    asked = []
    randn = torch.randn

    def recording(*args, pin_memory=False, **kwargs):
        asked.append(pin_memory)
        return randn(*args, **kwargs)                       # pinning itself needs a GPU

    class OnGpu:
        """A CPU tensor that says it is on a GPU: the hook's view of a CUDA image."""
        def __init__(self, tensor):
            self.tensor, self.shape, self.dtype, self.device, self.is_cuda = tensor, tensor.shape, tensor.dtype, \
                tensor.device, True

        def add_(self, other, alpha):
            self.tensor.add_(other, alpha=alpha)

    monkeypatch.setattr(parts.torch, "randn", recording)
    hooks = [parts.Langevin(0.1, 0.5, 10, 2, seed=3) for _ in range(2)]
    on_cpu, on_gpu = torch.zeros(2, 1, 4, 4), OnGpu(torch.zeros(2, 1, 4, 4))
    for _ in range(3):
        hooks[0].after_step([on_cpu])
        hooks[1].after_step([on_gpu])
    assert asked == [False, True] * 3
    assert torch.equal(on_cpu, on_gpu.tensor) and on_cpu.abs().sum() > 0


@pytest.mark.slow(seconds=170)
def test_the_cpu_smoke_runs_the_whole_check_and_packs_at_most_eight_files(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPTS / "device_check.py"), "--cpu-smoke", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == sorted(["summary.json", "report.md", "check.log", "results.tar.gz", "runs.tar.gz",
                            "figures.tar.gz"])
    assert all((tmp_path / "out" / f).stat().st_size < 16 * 2 ** 20 for f in files)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert {r["status"] for r in summary["jobs"].values()} == {"ok"}
    rows = {r["attack"]: r for r in summary["attacks"]}
    assert all(rows[a]["eager"]["status"] == "ok" and rows[a]["eager"]["seconds"] > 0 for a in ATTACKS)
    assert rows["unsplit"]["compiled"]["compile"]["compiled"] is True
    assert {name for name, s in summary["subsets"].items() if s["shipped"]} == {
        "smoke-fedleak-paper", "smoke-tgias-paper", "smoke-jast-gpu"}
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as tar:
        meta = json.load(tar.extractfile("results/smoke-fedleak-paper.json"))
        table = tar.extractfile("results/smoke-fedleak-paper.csv").read().decode()
    assert meta["sweep_record"]["paper_size"] is True and meta["cells"] == 2 and "CPU" in meta["device"]["name"]
    assert "--paper-size" in meta["command"] and "psnr" in table.splitlines()[0]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| dlg |" in report and "bench-engine" in report

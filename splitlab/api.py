"""The lab from Python (notebooks): the functions the commands call, results in memory, and a run
directory only when `out` is given (the same files the command would write there).

    from splitlab import api
    victim = api.train("cnn", epochs=2)                          # a trained split model (TrainedSplit)
    outcome = api.unsplit(victim, preset="quick")                  # attacks.driver.Outcome
    print(outcome.metrics["image_mse_minmax"], outcome.metrics["baselines"]["zero"])
    api.hfl("dlg", arch="lenet", preset="dlg.quick", out="runs/dlg-notebook")
    api.attack("fedleak", preset="quick", ratio=0.3)                # any registered attack, plug-ins included
    api.attack("label-norm", defence="marvell:scale=1").metrics["leak_auc"]  # the feature party infers labels

Every call validates its inputs like the command does (a `vfl.errors.SplitlabError` names the fix): the
arguments of its own (the attack's name, `out`, `options`, ...) at the door, naming the argument, before
anything is loaded; the settings when they are built, naming the option; a full disk at run time in one
line, what was written so far kept.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

from attacks.driver import Outcome
from attacks.metrics import score
from vfl.errors import SplitlabError
from vfl.filesystem import check_out_dir, file_system_errors
from vfl.options import build
from vfl.runs import Run
from vfl.training import TrainConfig, TrainedSplit
from vfl.validate import check_int

__all__ = ["attack", "train", "unsplit", "fsha", "hfl", "score"]


def _door(call: str, out: Any, overwrite: Any, progress: Any, *, text: Mapping[str, Any] = {},
          mappings: Mapping[str, Any] = {}) -> None:
    """Check `call`'s own arguments before anything is loaded: each refusal names the argument."""
    for name, value in text.items():
        if not isinstance(value, str):
            raise SplitlabError(f"api.{call}: {name} must be text (a name), got {type(value).__name__} {value!r:.80}")
    for name, value in mappings.items():
        if value is not None and not (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)):
            raise SplitlabError(f"api.{call}: {name} must be a dict of option names to values (or None), got "
                                f"{type(value).__name__} {value!r:.80}")
    for name, value in (("overwrite", overwrite), ("progress", progress)):
        if not isinstance(value, bool):
            raise SplitlabError(f"api.{call}: {name} must be True or False, got {value!r:.80}")
    if out is not None:
        if not isinstance(out, (str, os.PathLike)) or not isinstance(os.fspath(out), str):
            raise SplitlabError(f"api.{call}: out must be a folder path (a str or a Path) or None, got "
                                f"{type(out).__name__} {out!r:.80}")
        check_out_dir(Path(out))


@contextlib.contextmanager
def _run(command: str, config: dict[str, Any], out: str | Path | None, overwrite: bool) -> Iterator[Run | None]:
    if out is None:
        yield None
        return
    with file_system_errors(lambda: [Path(out)]), Run.create(command, config, Path(out), overwrite=overwrite) as run:
        yield run


def train(arch: str = "cnn", *, out: str | Path | None = None, overwrite: bool = False, progress: bool = False,
          **config: Any) -> TrainedSplit:
    """Train a split model (`TrainConfig` fields as keywords: dataset, cut_layer, epochs, defence, seed, ...)."""
    from vfl.training import load_data, save_trained, train_split, training_metrics

    _door("train", out, overwrite, progress, text={"arch": arch})
    settings = build(TrainConfig, "train", arch=arch, **config)
    train_data, test_data = load_data(settings)
    with _run("train", {"train": settings}, out, overwrite) as run:
        trained = train_split(settings, train_data, test_data, run, progress)
        if run is not None:
            save_trained(run, trained)
            run.write_metrics(training_metrics(trained))
    return trained


def unsplit(victim: TrainedSplit | str | Path, *, preset: str = "jast", seed: int = 0,
            out: str | Path | None = None, overwrite: bool = False, progress: bool = False,
            **overrides: Any) -> Outcome:
    """UnSplit against a trained model (or a checkpoint path); `overrides` are UnsplitSettings fields."""
    from attacks import registry
    from attacks.split.unsplit import UnSplit
    from attacks.split.cut_experiment import Victim, attack_victim, load_victim
    from vfl.training import load_data

    _door("unsplit", out, overwrite, progress, text={"preset": preset})
    check_int("api.unsplit: seed", seed, low=0, high=2**63 - 1)
    attack = UnSplit(registry.spec("unsplit").settings_for(preset, **overrides))
    if isinstance(victim, TrainedSplit):
        victim = Victim(victim.config, *load_data(victim.config), victim)
    elif isinstance(victim, (str, Path)):
        victim = load_victim(Path(victim))
    else:
        raise SplitlabError(f"unsplit attacks a trained split model (api.train's result) or a checkpoint path, "
                            f"not a {type(victim).__name__}")
    with _run("attack-unsplit", {"train": victim.config, "settings": attack.settings, "seed": seed},
              out, overwrite) as run:
        return attack_victim(victim, attack, run, seed=seed, progress=progress)


def fsha(arch: str = "resnet", *, preset: str = "quick", seed: int = 0, out: str | Path | None = None,
         overwrite: bool = False, progress: bool = False, victim: dict[str, Any] | None = None,
         **overrides: Any) -> Outcome:
    """FSHA against an honest client of `arch` (resnet or mlp); `overrides` are FshaSettings fields, `victim`
    FshaVictim fields."""
    from attacks import registry
    from attacks.split.fsha import FSHA
    from attacks.split.session.experiment import run_fsha, victim_for

    _door("fsha", out, overwrite, progress, text={"arch": arch, "preset": preset}, mappings={"victim": victim})
    check_int("api.fsha: seed", seed, low=0, high=2**63 - 1)
    attack = FSHA(registry.spec("fsha").settings_for(preset, **overrides))
    client = victim_for(attack.settings, arch=arch, seed=seed, **(victim or {}))
    with _run("attack-fsha", {"settings": attack.settings, "victim": client, "seed": seed}, out, overwrite) as run:
        return run_fsha(client, attack, run, seed=seed, progress=progress)


def hfl(attack: str = "dlg", *, out: str | Path | None = None, overwrite: bool = False, progress: bool = False,
        **config: Any) -> Outcome:
    """Gradient inversion by an HFL server (`HFLConfig.of`'s keywords: its fields (arch, preset, batch_size, ...),
    the attack's settings (ratio=0.3, ...) and its observation options (clients=4, ...), flat or as options= and
    observation_options=)."""
    from attacks.hfl.experiment import HFLConfig, execute, prepare

    _door("hfl", out, overwrite, progress, text={"attack": attack},
          mappings={k: config.get(k) for k in ("options", "observation_options")})
    prepared = prepare(HFLConfig.of(attack=attack, **config))
    with _run("hfl", prepared.record(), out, overwrite) as run:
        return execute(prepared, run, progress=progress)


def attack(name: str, *, out: str | Path | None = None, overwrite: bool = False, progress: bool = False,
           **options: Any) -> Outcome:
    """The one front door: any registered attack (the lab's, split attacks and plug-ins alike) with the options its
    command takes, as keywords (`splitlab hfl --attack NAME` or `splitlab attack NAME`: the experiment's, the
    victim's and the attack's own, flat)."""
    from attacks import registry

    spec = registry.spec(name)
    if spec.setting == "hfl":
        return hfl(name, out=out, overwrite=overwrite, progress=progress, **options)
    experiment = spec.experiment
    prepared = experiment.prepare(experiment.config.of(**options))
    with _run(f"attack-{name}", {**prepared.record(), "attack_origin": registry.origin(name)}, out,
              overwrite) as run:
        return experiment.execute(prepared, run, progress=progress)

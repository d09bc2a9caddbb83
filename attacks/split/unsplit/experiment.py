"""UnSplit as an experiment: get a trained split model (train it, or load a checkpoint), let the curious server
observe the first test image of each class, attack through the one driver, and evaluate per class.

Used by `splitlab attack unsplit` and `splitlab compare`; the attack itself is `attack.UnSplit`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar


from attacks.driver import Outcome, Truth, attack_and_score
from attacks.figures import per_class_bars
from attacks.metrics import FidMetric, LpipsMetric, Unavailable
from attacks.split.experiment import SplitConfig
from attacks.split.unsplit.attack import UnSplit, observe
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.options import option, optional, text
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, TrainedSplit, load_checkpoint, load_data, save_trained, train_split

__all__ = ["UnsplitConfig", "Victim", "load_victim", "train_victim", "attack_victim", "evaluation", "write_figures",
           "prepare", "execute", "summary"]


@dataclass(frozen=True, kw_only=True)
class UnsplitConfig(SplitConfig):
    """`splitlab attack unsplit`: the victim to train (`TrainConfig`'s options) or a checkpoint to attack."""
    attack: ClassVar[str] = "unsplit"
    victim_options: ClassVar[type] = TrainConfig
    checkpoint: str | None = option(None, "Attack this trained model instead of training one (its dataset, "
                                    "architecture, cut and defence are used).", optional(text()))

    def check(self) -> None:
        super().check()
        if self.checkpoint is not None and self.victim:
            given = sorted(self.victim)[0]
            raise SplitlabError(f"--{given.replace('_', '-')} describes the model to train, but --checkpoint gives "
                                "a trained one (its own settings are used): drop one of them")
        self.training

    @functools.cached_property
    def training(self) -> TrainConfig | None:
        """The victim's training config (checked), or None when a checkpoint is attacked."""
        if self.checkpoint is not None:
            return None
        return TrainConfig(seed=self.seed, device=self.device, data_root=self.data_root, **self.victim)


@dataclass
class Victim:
    """The trained split model under attack and the data it came from (`trained` None until it is trained)."""
    config: TrainConfig
    train: datasets.ImageData
    test: datasets.ImageData
    trained: TrainedSplit | None = None
    checkpoint: Path | None = None


def load_victim(checkpoint: Path, device: str = "auto", data_root: str | None = None) -> Victim:
    """A trained split model from a checkpoint, with its dataset (errors before anything is written)."""
    trained = load_checkpoint(checkpoint, device, data_root)
    train, test = load_data(trained.config)
    return Victim(trained.config, train, test, trained, Path(checkpoint))


def train_victim(victim: Victim, run: Run, progress: bool = True) -> Victim:
    """Train the split model and save its checkpoint into the run directory."""
    trained = train_split(victim.config, victim.train, victim.test, run, progress)
    path, _ = save_trained(run, trained)
    run.log(f"trained {victim.config.arch} cut {victim.config.cut_layer}: accuracy {trained.accuracy:.4f} in "
            f"{trained.seconds:.1f} s")
    return Victim(victim.config, victim.train, victim.test, trained, path)


def attack_victim(victim: Victim, attack: UnSplit, run: Run | None = None, *, seed: int = 0,
                  lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
                  progress: bool = True) -> Outcome:
    """UnSplit on the first test image of each class through the one driver: metrics on [0,1] against the
    clean targets, the victim's accuracy, and the spec's evaluation (clone fit, per-class errors)."""
    from attacks.split.unsplit import SPEC

    config = victim.config
    device = next(victim.trained.client.model.parameters()).device
    targets, classes = datasets.first_of_each_class(victim.test)
    observation = observe(victim.trained.client, targets.to(device), config.arch, config.cut_layer,
                          victim.trained.server.model)
    facts = {"accuracy": victim.trained.accuracy, "arch": config.arch, "cut_layer": config.cut_layer,
             "defence": config.defence}
    return attack_and_score(SPEC, attack, observation, Truth(targets, context={"classes": classes}), run=run,
                            seed=seed, progress=progress, lpips=lpips, fid=fid, facts=facts,
                            title=f"UnSplit on {config.arch} (cut {config.cut_layer}), {config.dataset}")


def evaluation(reconstruction, metrics: dict, truth: Truth) -> dict[str, Any]:
    """The spec's `evaluate` hook: the clone fit (MSE Z, final and trajectory mean) over the targets that did
    not diverge, and the errors per class."""
    classes, kept = truth.context["classes"], reconstruction.kept
    fit = reconstruction.extras["activation_mse_per_target"].detach().float().cpu()
    trajectory = reconstruction.extras["activation_mse_trajectory_per_target"].detach().float().cpu()
    per_class: dict[int, dict] = {}
    for i, c in enumerate(classes[kept].tolist()):
        per_class[int(c)] = {"image_mse_minmax": metrics["per_image"]["image_mse_minmax"][i],
                             "image_mse": metrics["per_image"]["image_mse"][i]}
    for c, final, mean in zip(classes.tolist(), fit.tolist(), trajectory.tolist()):
        per_class.setdefault(int(c), {}).update(activation_mse=final, activation_mse_trajectory=mean)
    any_kept = bool(kept.any())
    return {"activation_mse": float(fit[kept].mean()) if any_kept else None,
            "activation_mse_trajectory": float(trajectory[kept].mean()) if any_kept else None,
            "per_class": per_class, "diverged_targets": classes[~kept].tolist()}


def write_figures(run: Run, outcome: Outcome) -> None:
    """The spec's `write` hook: per_class.png (the JAST paper's Figure 8) and the log line."""
    m = outcome.metrics
    per_class = m["per_class"]
    figure = per_class_bars({"reconstruction MSE (min-max)": [per_class[c].get("image_mse_minmax", float("nan"))
                                                               for c in sorted(per_class)]},
                            "MSE", f"UnSplit per-class error, {m['arch']}")
    run.save_figure("per_class.png", figure)
    if m["image_mse_minmax"] is not None:
        run.log(f"unsplit: image_mse_minmax {m['image_mse_minmax']:.4f} activation_mse {m['activation_mse']:.3g} "
                f"in {outcome.reconstruction.seconds:.1f} s")


@dataclass(frozen=True, eq=False)
class Prepared:
    config: UnsplitConfig
    attack: UnSplit
    victim: Victim

    def record(self) -> dict[str, Any]:
        c = self.config
        return {"train": self.victim.config, "checkpoint": c.checkpoint, "settings": c.settings, "seed": c.seed,
                "device": str(resolve_device(c.device)), "dataset_provenance": self.victim.test.provenance}


def prepare(config: UnsplitConfig) -> Prepared:
    """The victim's data (or its checkpoint) and the attack; nothing written."""
    attack = UnSplit(config.settings)
    if config.checkpoint is not None:
        victim = load_victim(Path(config.checkpoint), config.device, config.data_root)
    else:
        train, test = load_data(config.training)
        victim = Victim(config.training, train, test)
    return Prepared(config, attack, victim)


def execute(prepared: Prepared, run: Run, *, lpips=None, fid=None, progress: bool = True) -> Outcome:
    victim = prepared.victim
    if victim.trained is None:
        victim = train_victim(victim, run, progress)
    return attack_victim(victim, prepared.attack, run, seed=prepared.config.seed, lpips=lpips, fid=fid,
                         progress=progress)


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, config = outcome.metrics, prepared.victim.config

    def show(console) -> None:
        head = f"UnSplit on {config.arch} cut {config.cut_layer} ({config.dataset}, defence {config.defence})"
        if m["image_mse"] is None:
            console.print(f"{head}: every target diverged; accuracy {m['accuracy']:.4f}; run directory {run.path}")
            return
        console.print(f"{head}: MSE X (min-max) {m['image_mse_minmax']:.4f}, plain {m['image_mse']:.4f} (zero-image "
                      f"baseline {m['baselines']['zero']['image_mse']:.4f}), MSE Z {m['activation_mse']:.3g}, "
                      f"PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.3f}, accuracy {m['accuracy']:.4f}; "
                      f"run directory {run.path}")
    return show

"""UnSplit as an experiment: get a trained split model (train it or load a checkpoint), let the curious
server observe the first test image of each class, attack, score against the ground truth, draw.

Used by `splitlab attack unsplit` and `splitlab compare`; the attack itself is `attacks.split.unsplit.UnSplit`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from attacks.driver import Outcome, attack_and_score, write_outputs
from attacks.figures import per_class_bars
from attacks.metrics import FidMetric, LpipsMetric, Unavailable
from attacks.split.unsplit import UnSplit, observe
from vfl import data as datasets
from vfl.runs import Run
from vfl.training import TrainConfig, TrainedSplit, load_checkpoint, load_data, save_trained, train_split


@dataclass
class Victim:
    """The trained split model under attack and the data it came from."""
    trained: TrainedSplit
    train: datasets.ImageData
    test: datasets.ImageData
    checkpoint: Path | None             # None when the model was handed over in memory


def load_victim(checkpoint: Path, device: str = "auto", data_root: str | None = None) -> Victim:
    """A trained split model from a checkpoint, with its dataset (from `data_root` when given; errors before
    anything is written)."""
    trained = load_checkpoint(checkpoint, device, data_root)
    train, test = load_data(trained.config)
    return Victim(trained, train, test, Path(checkpoint))


def train_victim(config: TrainConfig, train: datasets.ImageData, test: datasets.ImageData, run: Run,
                 progress: bool = True) -> Victim:
    """Train the split model and save its checkpoint into the run directory."""
    trained = train_split(config, train, test, run, progress)
    path, _ = save_trained(run, trained)
    run.log(f"trained {config.arch} cut {config.cut_layer}: accuracy {trained.accuracy:.4f} in {trained.seconds:.1f} s")
    return Victim(trained, train, test, path)


def attack_victim(victim: Victim, attack: UnSplit, run: Run | None = None, *, seed: int = 0,
                  lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
                  progress: bool = True) -> Outcome:
    """UnSplit on the first test image of each class through the one driver; metrics on [0,1] against the
    clean targets, plus the victim's accuracy, the clone fit (MSE Z) and per-class errors."""
    config = victim.trained.config
    device = next(victim.trained.client.model.parameters()).device
    targets, labels = datasets.first_of_each_class(victim.test)
    observation = observe(victim.trained.client, targets.to(device), config.arch, config.cut_layer)
    outcome = attack_and_score(attack, observation, targets, run=None, seed=seed, progress=progress, lpips=lpips,
                               fid=fid)
    m, rec = outcome.metrics, outcome.reconstruction
    kept = rec.kept
    fit = torch.tensor(rec.extras["activation_mse_per_target"])
    trajectory = torch.tensor(rec.extras["activation_mse_trajectory_per_target"])
    per_class: dict[int, dict] = {}
    kept_classes = labels[kept].tolist()
    for i, c in enumerate(kept_classes):
        per_class[int(c)] = {"image_mse_minmax": m["per_image"]["image_mse_minmax"][i],
                             "image_mse": m["per_image"]["image_mse"][i]}
    for c, final, mean in zip(labels.tolist(), fit.tolist(), trajectory.tolist()):
        per_class.setdefault(int(c), {}).update(activation_mse=final, activation_mse_trajectory=mean)
    m.update({"accuracy": victim.trained.accuracy, "arch": config.arch, "cut_layer": config.cut_layer,
              "defence": config.defence,
              "activation_mse": float(fit[kept].mean()) if bool(kept.any()) else None,
              "activation_mse_trajectory": float(trajectory[kept].mean()) if bool(kept.any()) else None,
              "per_class": per_class, "diverged_targets": labels[~kept].tolist()})
    if run is not None:
        write_outputs(run, outcome, display="minmax",
                      title=f"UnSplit on {config.arch} (cut {config.cut_layer}), {config.dataset}")
        figure = per_class_bars({"reconstruction MSE (min-max)": [per_class[c].get("image_mse_minmax", float("nan"))
                                                                   for c in sorted(per_class)]},
                                "MSE", f"UnSplit per-class error, {config.arch}")
        run.save_figure("per_class.png", figure)
        if m["image_mse_minmax"] is not None:
            run.log(f"unsplit: image_mse_minmax {m['image_mse_minmax']:.4f} activation_mse "
                    f"{m['activation_mse']:.3g} in {rec.seconds:.1f} s")
    return outcome

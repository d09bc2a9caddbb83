"""UnSplit as an experiment: get a trained split model (train it or load a checkpoint), let the curious
server observe the first test image of each class, attack, score against the ground truth, draw.

Used by `splitlab attack unsplit` and `splitlab compare`; the attack itself is `attacks.split.unsplit`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from attacks.figures import image_grid, per_class_bars
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, minmax_normalise, score_reconstruction
from attacks.split.unsplit import UnsplitPreset, observe, unsplit
from vfl import data as datasets
from vfl.runs import Run
from vfl.training import TrainConfig, TrainedSplit, load_checkpoint, load_data, save_trained, train_split


@dataclass
class Victim:
    """The trained split model under attack and the data it came from."""
    trained: TrainedSplit
    train: datasets.ImageData
    test: datasets.ImageData
    checkpoint: Path


def load_victim(checkpoint: Path, device: str = "auto") -> Victim:
    """A trained split model from a checkpoint, with its dataset (errors before anything is written)."""
    trained = load_checkpoint(checkpoint, device)
    train, test = load_data(trained.config)
    return Victim(trained, train, test, Path(checkpoint))


def train_victim(config: TrainConfig, train: datasets.ImageData, test: datasets.ImageData, run: Run,
                 progress: bool = True) -> Victim:
    """Train the split model and save its checkpoint into the run directory."""
    trained = train_split(config, train, test, run, progress)
    path, _ = save_trained(run, trained)
    run.log(f"trained {config.arch} cut {config.cut_layer}: accuracy {trained.accuracy:.4f} in {trained.seconds:.1f} s")
    return Victim(trained, train, test, path)


@dataclass
class UnsplitOutcome:
    metrics: dict
    targets: torch.Tensor
    reconstructions: torch.Tensor          # final X~, min-max normalised per image as the paper shows them


def attack_victim(victim: Victim, settings: UnsplitPreset, clone_mode: str, run: Run, *, seed: int = 0,
                  lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
                  progress: bool = True) -> UnsplitOutcome:
    """UnSplit on the first test image of each class; metrics on [0,1] against the clean targets."""
    config = victim.trained.config
    device = next(victim.trained.client.model.parameters()).device
    targets, labels = datasets.first_of_each_class(victim.test)
    observation = observe(victim.trained.client, targets.to(device), config.arch, config.cut_layer)
    result = unsplit(observation, settings, clone_mode, seed=seed, progress=progress)
    kept = ~result.diverged.cpu()
    reconstructions = result.reconstructions.cpu()
    score = score_reconstruction(reconstructions[kept], targets[kept], lpips=lpips, fid=fid)
    per_class = {int(c): {"image_mse_minmax": m, "image_mse": p} for c, m, p in
                 zip(labels[kept].tolist(), score["per_image"]["image_mse_minmax"], score["per_image"]["image_mse"])}
    for c, final, mean in zip(labels.tolist(), result.activation_mse.tolist(), result.activation_mse_mean.tolist()):
        per_class.setdefault(int(c), {}).update(activation_mse=final, activation_mse_trajectory=mean)
    metrics = {
        "accuracy": victim.trained.accuracy,
        "image_mse": score["image_mse"], "image_mse_minmax": score["image_mse_minmax"],
        "activation_mse": float(result.activation_mse[kept].mean()),
        "activation_mse_trajectory": float(result.activation_mse_mean[kept].mean()),
        "psnr": score["psnr"], "psnr_max": score["psnr_max"], "psnr_std": score["psnr_std"], "ssim": score["ssim"],
        "lpips": score["lpips"], "fid": score["fid"], "unavailable": score["unavailable"],
        "per_class": per_class, "diverged_targets": labels[~kept].tolist(),
        "seconds": result.seconds, "attack_steps": result.steps,
    }
    shown = minmax_normalise(reconstructions)
    run.save_figure("reconstruction.png", image_grid(
        [("original", targets), (f"{config.arch}", shown)],
        title=f"UnSplit on {config.arch} (cut {config.cut_layer}), {config.dataset}: "
              f"MSE(min-max) {metrics['image_mse_minmax']:.3f}"))
    figure = per_class_bars({"reconstruction MSE (min-max)": [per_class[c].get("image_mse_minmax", float("nan"))
                                                               for c in sorted(per_class)]},
                            "MSE", f"UnSplit per-class error, {config.arch}")
    run.save_figure("per_class.png", figure)
    run.write_metrics(metrics)
    run.log(f"unsplit: image_mse_minmax {metrics['image_mse_minmax']:.4f} activation_mse "
            f"{metrics['activation_mse']:.3g} in {result.seconds:.1f} s")
    return UnsplitOutcome(metrics, targets, shown)

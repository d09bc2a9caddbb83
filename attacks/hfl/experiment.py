"""One HFL attack end to end, as `splitlab hfl` runs it.

`prepare(config)` validates every input, loads the client's batch, builds the global model, lets the
client upload (the observation) and checks that the attack can serve this model and observation; it
writes nothing. `execute(prepared, run)` attacks the observation, scores the best restart against
the private batch (evaluation only), and writes `metrics.json` and `reconstruction.png` (originals
above the best restart's reconstructions).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from attacks.figures import image_grid
from attacks.hfl.defences import Defence, parse_defence
from attacks.hfl.dlg import DLG
from attacks.hfl.evaluate import score
from attacks.hfl.invgrad import InvertingGradients
from attacks.hfl.observations import Observation, observe_fedavg, observe_fedsgd
from attacks.hfl.presets import ATTACKS, DEFAULT_PRESET, PRESETS, DLGSettings, InvGradSettings, Settings, preset
from attacks.hfl.reconstruction import TRIAL_MODES, Reconstruction
from attacks.metrics import FidMetric, LpipsMetric, Unavailable
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.models.hfl import HFL_MODELS, build_hfl_model, check_hfl_input, hfl_model_spec
from vfl.runs import Run
from vfl.runtime import resolve_device

__all__ = ["HFLConfig", "Prepared", "prepare", "execute", "make_attack", "reconstruction_figure", "OBSERVATIONS",
           "LABEL_KNOWLEDGE"]

OBSERVATIONS = ("fedsgd", "fedavg")
LABEL_KNOWLEDGE = ("recovered", "known")


@dataclass(frozen=True)
class HFLConfig:
    """What `splitlab hfl` runs. Defaults: DLG's paper preset on the sigmoid LeNet, one mnist5k image."""
    attack: str = "dlg"
    model: str = "lenet"
    dataset: str = "mnist5k"
    batch_size: int = 1
    index: int = 0
    """The client's batch is images index .. index + batch_size - 1 of the dataset's train split."""
    preset: str | None = None
    """None: the attack's paper preset (dlg.original, idlg.original, invgrad.paper)."""
    restarts: int | None = None
    iterations: int | None = None
    """L-BFGS steps for DLG/iDLG, Adam iterations for Inverting Gradients; None keeps the preset's."""
    tv: float | None = None
    """Inverting Gradients' TV weight; None takes the preset's, else the dataset's."""
    defence: str = "none"
    observe: str = "fedsgd"
    local_lr: float = 1e-4
    """FedAvg local learning rate (IG's FedAvg CLI default 1e-4)."""
    local_epochs: int = 1
    local_batch_size: int | None = None
    """FedAvg local mini-batch size; None = the whole batch (one step per epoch)."""
    labels: str = "recovered"
    """Inverting Gradients: recovered (analytic/counting rule) or known (the server knows them)."""
    trials: str = "batched"
    seed: int = 0
    device: str = "auto"
    data_root: str | None = None

    def settings(self) -> Settings:
        """The preset with this config's overrides; every name and number checked (SplitlabError)."""
        if self.attack not in ATTACKS:
            raise SplitlabError(f"unknown attack {self.attack!r}; choose one of: {', '.join(ATTACKS)}")
        name = self.preset or DEFAULT_PRESET[self.attack]
        settings = preset(name)
        if settings.attack != self.attack:
            fits = [p for p, s in PRESETS.items() if s.attack == self.attack]
            raise SplitlabError(f"preset {name} is for attack {settings.attack}, not {self.attack}; "
                                f"use --preset {' or '.join(fits)}")
        for option, value in (("restarts", self.restarts), ("iterations", self.iterations)):
            if value is not None and value < 1:
                raise SplitlabError(f"--{option} must be at least 1")
        if self.restarts is not None:
            settings = replace(settings, restarts=self.restarts)
        if self.iterations is not None:
            settings = replace(settings, steps=self.iterations) if isinstance(settings, DLGSettings) \
                else replace(settings, iterations=self.iterations)
        if isinstance(settings, InvGradSettings):
            if self.tv is not None:
                if self.tv < 0:
                    raise SplitlabError("--tv must be >= 0")
                settings = replace(settings, tv=self.tv)
            settings = settings.for_dataset(self.dataset)
        elif self.tv is not None:
            raise SplitlabError(f"--tv applies to invgrad only (attack {self.attack} has no prior)")
        return settings

    def validate(self) -> None:
        """Check names and numbers that need no data (before anything is loaded or written)."""
        self.settings()
        hfl_model_spec(self.model)
        spec = datasets.dataset_spec(self.dataset)
        check_hfl_input(self.model, spec.image_shape)
        parse_defence(self.defence)
        if self.observe not in OBSERVATIONS:
            raise SplitlabError(f"unknown observation {self.observe!r}; use --observe {' or '.join(OBSERVATIONS)}")
        if self.labels not in LABEL_KNOWLEDGE:
            raise SplitlabError(f"unknown label knowledge {self.labels!r}; use --labels {' or '.join(LABEL_KNOWLEDGE)}")
        if self.labels == "known" and self.attack != "invgrad":
            raise SplitlabError(f"--labels known applies to invgrad only ({self.attack} finds its labels itself)")
        if self.trials not in TRIAL_MODES:
            raise SplitlabError(f"unknown trials mode {self.trials!r}; use --trials {' or '.join(TRIAL_MODES)}")
        if self.batch_size < 1 or self.index < 0:
            raise SplitlabError("--batch-size must be at least 1 and --index at least 0")
        if self.observe == "fedavg":
            if self.local_lr <= 0 or self.local_epochs < 1 or (self.local_batch_size or 1) < 1:
                raise SplitlabError("FedAvg needs --local-lr > 0, --local-epochs >= 1 and --local-batch-size >= 1")
        resolve_device(self.device)


def make_attack(settings: Settings) -> DLG | InvertingGradients:
    return DLG(settings) if isinstance(settings, DLGSettings) else InvertingGradients(settings)


@dataclass(frozen=True, eq=False)
class Prepared:
    """Everything validated, nothing written: the attack, the observation and the private ground truth."""
    config: HFLConfig
    settings: Settings
    attack: DLG | InvertingGradients
    defence: Defence
    observation: Observation
    images: torch.Tensor
    """The client's private batch (evaluation only)."""
    labels: torch.Tensor
    provenance: str
    device: torch.device

    def record(self) -> dict[str, Any]:
        """The resolved config for config.json."""
        return {"hfl": asdict(self.config), "preset": asdict(self.settings), "attack": self.attack.name,
                "defence": self.defence.spec, "observation": self.observation.kind,
                "model_params": sum(p.numel() for p in self.observation.model.params.values()),
                "device": str(self.device), "dataset_provenance": self.provenance,
                "images": list(range(self.config.index, self.config.index + self.config.batch_size))}


def prepare(config: HFLConfig, *, dtype: torch.dtype = torch.float32) -> Prepared:
    """Validate, load the batch, build the model, observe the client's upload, check the attack serves it."""
    config.validate()
    settings = config.settings()
    data = datasets.load(config.dataset, "train", config.data_root)
    if config.index + config.batch_size > len(data):
        raise SplitlabError(f"--batch-size {config.batch_size} from --index {config.index} needs "
                            f"{config.index + config.batch_size} images but the {config.dataset} train split "
                            f"has {len(data)}")
    local_batch = config.local_batch_size
    if config.observe == "fedavg" and local_batch is not None and local_batch > config.batch_size:
        raise SplitlabError(f"--local-batch-size {config.local_batch_size} exceeds --batch-size {config.batch_size}")
    device = resolve_device(config.device)
    spec = datasets.dataset_spec(config.dataset)
    model = build_hfl_model(config.model, spec.image_shape, spec.num_classes, seed=config.seed).to(device, dtype)
    x = data.images[config.index:config.index + config.batch_size].to(device, dtype)
    y = data.labels[config.index:config.index + config.batch_size].to(device)
    defence = parse_defence(config.defence)
    noise = torch.Generator().manual_seed(config.seed + 1)
    reveal = config.labels == "known"
    if config.observe == "fedsgd":
        observation = observe_fedsgd(model, x, y, arch=config.model, defence=defence, generator=noise,
                                     reveal_labels=reveal)
    else:
        observation = observe_fedavg(model, x, y, lr=config.local_lr, epochs=config.local_epochs,
                                     batch_size=config.local_batch_size or config.batch_size, arch=config.model,
                                     defence=defence, generator=noise, reveal_labels=reveal)
    attack = make_attack(settings)
    attack.check(observation)
    return Prepared(config, settings, attack, defence, observation, x, y, data.provenance, device)


def execute(prepared: Prepared, run: Run, *, lpips: LpipsMetric | Unavailable | None = None,
            fid: FidMetric | Unavailable | None = None, progress: bool = True) -> tuple[Reconstruction, dict]:
    """Attack, score, write metrics.json and reconstruction.png; returns the reconstruction and metrics."""
    c = prepared.config
    run.log(f"{prepared.attack.name} ({prepared.settings.name}) on {c.model}, {c.dataset} images "
            f"{c.index}..{c.index + c.batch_size - 1}, defence {prepared.defence.spec}, {c.trials} trials")
    reconstruction = prepared.attack(prepared.observation, seed=c.seed, mode=c.trials, progress=progress)
    metrics = score(reconstruction, prepared.images, prepared.labels, lpips=lpips, fid=fid)
    metrics.update({"model": c.model, "dataset": c.dataset, "defence": prepared.defence.spec,
                    "observation": prepared.observation.kind})
    run.write_metrics(metrics)
    if reconstruction.images is not None:
        run.save_figure("reconstruction.png", reconstruction_figure(prepared, reconstruction, metrics))
        run.log(f"best restart {metrics['best_restart']}: PSNR {metrics['psnr']:.2f} dB, SSIM {metrics['ssim']:.3f}, "
                f"label accuracy {metrics['label_accuracy']:.2f}, {metrics['seconds']:.1f} s")
    else:
        run.log("every restart diverged: no reconstruction to report")
    return reconstruction, metrics


def reconstruction_figure(prepared: Prepared, reconstruction: Reconstruction, metrics: dict):
    """Originals above the best restart's reconstructions (matched one-to-one to the originals)."""
    images = reconstruction.images.detach().float().cpu()
    if metrics.get("perm") is not None:
        images = images[torch.as_tensor(metrics["perm"])]
    psnrs = metrics["per_image"]["psnr"]
    c = prepared.config
    title = (f"{prepared.attack.name} ({prepared.settings.name}) on {c.model}, {c.dataset}, batch {c.batch_size}\n"
             f"defence {prepared.defence.spec}; PSNR {metrics['psnr']:.1f} dB, SSIM {metrics['ssim']:.3f}")
    figure = image_grid([("original", prepared.images.float().cpu()), ("reconstruction", images)], title=title,
                        column_titles=[f"y={int(y)}, {p:.1f} dB" for y, p in zip(prepared.labels.tolist(), psnrs)],
                        cell=1.2)
    width, height = figure.get_size_inches()          # room for the two-line title above the column titles
    figure.set_size_inches(max(width, 5.0), height + 0.6)
    figure.subplots_adjust(top=1 - 0.9 / (height + 0.6))
    return figure


def model_names() -> str:
    return ", ".join(HFL_MODELS)

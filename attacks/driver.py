"""The one driver: attack an observation, score against the private targets, write the run directory.

    outcome = attack_and_score(spec, attack, observation, Truth(images, labels), run=run, seed=0)

The attack gets its engine options as one value (`attacks.engine.EngineOptions`) and returns a
`Reconstruction`; the driver writes the engine's report (the trials mode that ran, what compiling cost)
with it, and refuses, in one line and leaving no files behind, a result it cannot score.

Every command (`hfl`, `attack unsplit`, `attack fsha`, `compare`) and script goes through here, so every
run directory has the same files: `metrics.json` (the schema in `attacks.metrics.METRICS_SCHEMA`),
`reconstruction.png` (targets above the attack's answer) and `loss_curve.png` (the attack's loss
history), and whatever the attack's spec adds through its `evaluate` and `write` hooks. A label-inference
attack draws `labels.png` (its scores against the private labels) in place of `reconstruction.png`.
Ground truth enters only the scoring and the evaluation, after the attack has returned.
"""
from __future__ import annotations

import inspect
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch

from attacks.engine.options import EngineOptions
from attacks.figures import image_grid, label_figure, loss_curve_figure
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, minmax_normalise, score
from attacks.result import Reconstruction
from vfl.errors import SplitlabError
from vfl.runs import Run, atomic_write_bytes

__all__ = ["Truth", "Outcome", "attack_and_score", "write_outputs", "shown"]


@dataclass(frozen=True, eq=False)
class Truth:
    """The private side of a run, for scoring and evaluation only: never handed to an attack."""
    images: torch.Tensor | None
    """The targets, [0,1], (N, C, H, W); None for a label-inference attack (its targets are `labels`)."""
    labels: torch.Tensor | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    """What the spec's evaluation needs beside the targets (the victim's client, its private data, ...)."""


@dataclass(frozen=True, eq=False)
class Outcome:
    reconstruction: Reconstruction
    metrics: dict[str, Any]
    targets: torch.Tensor
    """The private targets ([0,1], CPU), for figures that put several runs side by side (label inference: the
    private labels, (N,))."""

    @property
    def shown(self) -> torch.Tensor:
        return shown(self.reconstruction, self.metrics)


def shown(reconstruction: Reconstruction, metrics: dict[str, Any], display: str = "clamp") -> torch.Tensor:
    """The answer as drawn: in the targets' order (after one-to-one matching), clamped or min-max scaled."""
    images = reconstruction.images.detach().float().cpu()
    if metrics.get("perm") is not None:
        images = images[torch.as_tensor(metrics["perm"])]
    return minmax_normalise(images) if display == "minmax" else images.clamp(0, 1)


def attack_and_score(spec, attack, observation, truth: Truth, *, run: Run | None = None, seed: int = 0,
                     mode: str = "auto", progress: bool = True, lpips: LpipsMetric | Unavailable | None = None,
                     fid: FidMetric | Unavailable | None = None, facts: dict[str, Any] | None = None,
                     title: str = "", call: dict[str, Any] | None = None) -> Outcome:
    """Run `attack(observation, seed=, engine=)`, score it against the truth, add the spec's evaluation, and write
    the run directory if given (the driver's files, then the spec's own).

    The attack gets one `EngineOptions` (the trials `mode`, the `progress` display, its settings' `compile`)
    and passes it whole to the engine; the engine's report (the mode that ran, what compiling cost) is written
    with the result. `facts` adds command-level facts to metrics.json (the model, the defence); `call` passes
    keywords an attack takes beyond the contract's (FSHA's round monitor). A result the lab cannot score is
    refused in one line, and the run directory's files go with it."""
    settings = getattr(attack, "settings", None)
    engine = EngineOptions.of(settings, mode=mode, progress=progress,
                              description=f"{spec.name} {getattr(settings, 'preset', '')}".strip())
    reconstruction = _called(spec, attack, observation, seed, engine, call or {})
    try:
        if not isinstance(reconstruction, Reconstruction):
            raise SplitlabError(f"it is a {type(reconstruction).__name__}, not an attacks.kit.Reconstruction")
        reconstruction = engine.report.attach(reconstruction)
        metrics = score(reconstruction, truth.images, truth.labels, lpips=lpips, fid=fid)
    except SplitlabError as exc:
        if run is not None:
            run.discard()                           # a refused result is no run: nothing of it stays
        raise SplitlabError(f"attack {spec.name}'s result is refused: {exc}") from None
    metrics.update(facts or {})
    for key, value in (facts or {}).items():        # a fact the command measured has a value, not a reason
        if value is not None:
            metrics["unavailable"].pop(key, None)
    if spec.evaluate is not None:
        metrics.update(spec.evaluate(reconstruction, metrics, truth))
    targets = truth.labels.detach().cpu() if reconstruction.infers_labels else truth.images.detach().float().cpu()
    outcome = Outcome(reconstruction, metrics, targets)
    if run is not None:
        write_outputs(run, outcome, title=title, display=spec.display)
        if spec.write is not None:
            staged_write(spec, run, outcome)
    return outcome


def _called(spec, attack, observation, seed: int, engine: EngineOptions, call: dict[str, Any]) -> Any:
    """The attack's answer. An attack written against the earlier contract (`mode=`, `progress=` instead of
    `engine=`) is called that way. A plug-in's own failure is one line naming it; the lab's own keep their
    traceback (a bug to see)."""
    try:
        parameters = inspect.signature(attack).parameters
    except (TypeError, ValueError):                     # no signature to read: the contract's call
        parameters = {"engine": None}
    if "engine" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        options = {"engine": engine}
    else:
        options = {"mode": engine.mode, "progress": engine.progress}
    try:
        return attack(observation, seed=seed, **options, **call)
    except (SplitlabError, KeyboardInterrupt):
        raise
    except BaseException as exc:                        # noqa: BLE001 - a plug-in's failure (an exit too) is reported
        if spec.entry_point is None:                     # the lab's own: a bug, with its traceback
            raise
        raise SplitlabError(f"plug-in attack {spec.name} ({spec.entry_point}) failed: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc


def staged_write(spec, run: Run, outcome: Outcome) -> None:
    """The spec's `write` hook, writing into a staging directory whose files then join the run through `run.file`
    (so each is recorded as the run's own, and `--overwrite` can remove it); what it writes anywhere else in the
    staging area is dropped, with a line saying so."""
    with tempfile.TemporaryDirectory(prefix="splitlab-write-") as stage:
        staged = Run(Path(stage) / "run", run.command)
        spec.write(staged, outcome)
        outside = sorted(p.name for p in Path(stage).iterdir() if p.name != "run")
        for path in sorted(staged.path.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            name = path.relative_to(staged.path).as_posix()
            if name == "run.log":
                for line in path.read_text().splitlines():
                    run.log(line.split(" ", 1)[-1])
                continue
            target = run.file(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, path.read_bytes())
    if outside:
        print(f"splitlab: attack {spec.name}'s write hook wrote outside its run directory ({', '.join(outside)}); "
              "dropped: write through run.file", file=sys.stderr)


def write_outputs(run: Run, outcome: Outcome, *, title: str = "", display: str = "clamp") -> None:
    rec, m = outcome.reconstruction, outcome.metrics
    run.write_metrics(m)
    if rec.infers_labels:
        _write_label_outputs(run, outcome, title)
        return
    if rec.infers_features:
        _write_feature_outputs(run, outcome, title)
        return
    headline = (f"PSNR {m['psnr']:.1f} dB, SSIM {m['ssim']:.3f}, MSE {m['image_mse']:.4f}"
                if m["psnr"] is not None else "every trial diverged")
    answer = shown(rec, m, display)
    if rec.per_target:                              # a diverged target's row is drawn blank
        answer = torch.where(rec.kept.view(-1, 1, 1, 1), answer, torch.zeros_like(answer))
    run.save_figure("reconstruction.png", image_grid(
        [("target", outcome.targets), (rec.attack, answer)],
        title=f"{title or rec.attack} ({rec.preset}): {headline}"))
    run.save_figure("loss_curve.png", loss_curve_figure(rec.history, f"{rec.attack} ({rec.preset}) loss per step"))
    run.log(f"{rec.attack} ({rec.preset}): {headline}; {rec.steps} steps in {rec.seconds:.1f} s"
            + (f"; diverged trials {m['diverged_trials']}" if m["diverged_trials"] else ""))


def _write_label_outputs(run: Run, outcome: Outcome, title: str) -> None:
    """A label-inference attack's figures: its scores against the private labels, and its loss where it has one."""
    rec, m = outcome.reconstruction, outcome.metrics
    auc = "-" if m["leak_auc"] is None else f"{m['leak_auc']:.3f}"
    accuracy = "-" if m["label_accuracy"] is None else f"{m['label_accuracy']:.3f}"
    headline = f"leak AUC {auc}, label accuracy {accuracy} over {m['n_targets']} samples"
    trial = rec.best_trial if rec.best_trial is not None else 0
    run.save_figure("labels.png", label_figure(rec.label_scores[trial], rec.labels[trial], outcome.targets,
                                               f"{title or rec.attack} ({rec.preset}): {headline}"))
    if any(v.numel() for v in rec.history.values()):
        run.save_figure("loss_curve.png", loss_curve_figure(rec.history, f"{rec.attack} ({rec.preset}) loss per step"))
    run.log(f"{rec.attack} ({rec.preset}): {headline}; {rec.steps} steps in {rec.seconds:.1f} s")


def _write_feature_outputs(run: Run, outcome: Outcome, title: str) -> None:
    """A feature-inference attack's figures: the error of each feature beside the training mean's, and its loss."""
    from matplotlib.figure import Figure

    rec, m = outcome.reconstruction, outcome.metrics
    mean = (m["baselines"].get("mean") or {}).get("feature_mse_per_feature")
    headline = f"feature MSE {m['feature_mse']:.4f} over {m['n_targets']} samples" + \
        (f" (training mean {m['baselines']['mean']['feature_mse']:.4f})" if mean is not None else "")
    fig = Figure(figsize=(8, 3.5))
    ax = fig.subplots()
    ax.plot(m["feature_mse_per_feature"], "o-", label=rec.attack)
    if mean is not None:
        ax.plot(mean, "s--", label="training mean")
    ax.set(xlabel="inferred feature", ylabel="MSE", title=f"{title or rec.attack} ({rec.preset}): {headline}")
    ax.title.set_fontsize(8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    run.save_figure("features.png", fig)
    if any(v.numel() for v in rec.history.values()):
        run.save_figure("loss_curve.png", loss_curve_figure(rec.history, f"{rec.attack} ({rec.preset}) loss per step"))
    run.log(f"{rec.attack} ({rec.preset}): {headline}; {rec.steps} steps in {rec.seconds:.1f} s")

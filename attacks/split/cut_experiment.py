"""UnSplit in the one split experiment (`attacks.split.run_split`), the victim's side of its run (not the attack:
`attacks.split.unsplit`): get a trained split model (train it, or load a checkpoint) and let the curious server
observe the first test image of each class; the one experiment attacks through the one driver, and the spec's
evaluation scores per class.

`--transport tcp` trains the victim with the curious server in this process and the honest client(s) in
`splitlab client` processes; UnSplit then reads the targets' activations from what the server received
(`observe_over_tcp`). With K feature parties it attacks one party (`--target-party`): its slice of the joined
activations, its strip of each target.

Used by `splitlab attack unsplit` and `splitlab compare`; the attack itself is `attacks.split.unsplit.UnSplit`, taken
from its spec (the registry's), so that nothing here imports the attack's folder.
"""
from __future__ import annotations

import dataclasses
import functools
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator

import torch

from attacks.driver import Outcome, Truth, shown
from attacks.figures import image_grid, per_class_bars
from attacks.metrics import FidMetric, LpipsMetric, Unavailable, categorical_accuracy, feature_mse
from attacks.registry import spec as registered
from attacks.split.experiment import SplitConfig
from attacks.split.run_split import Observed, Prepared, attack_observed, split_experiment
from attacks.split.observations import CutObservation, observe_cut as observe, party_view
from vfl import data as datasets
from vfl.case import SplitCase
from vfl.errors import SplitlabError
from vfl.options import choice, integer, option, optional, text
from vfl.parties import MAX_PARTIES, party_columns, party_groups, strip_bounds, strip_groups, take_strip
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.tabular import column_groups
from vfl.training import (TrainedSplit, build_server, load_checkpoint, load_data, save_trained,
                          train_split, trained_report, training_curves_figure)

TRANSPORTS = ("local", "tcp")
TABULAR_ROWS = 64
"""Tabular targets: the first so many test rows (a feature's error is a mean over rows; images use one a class)."""

__all__ = ["UnsplitConfig", "UnsplitFamily", "Victim", "load_victim", "train_victim", "observe_over_tcp",
           "observe_trained", "observed_from", "attack_victim", "attack_observation", "evaluation", "write_figures",
           "summary", "UNSPLIT"]


@dataclass(frozen=True, kw_only=True)
class UnsplitConfig(SplitConfig):
    """`splitlab attack unsplit`: the victim to train (the one split case's options) or a checkpoint to attack."""
    attack: ClassVar[str] = "unsplit"
    victim_options: ClassVar[type] = SplitCase
    checkpoint: str | None = option(None, "Attack this trained model instead of training one (its dataset, "
                                    "architecture, cut and defence are used).", optional(text()))
    transport: str = option("local", "local (the victim trains in this process) or tcp (the curious server here, "
                            "each honest client a `splitlab client` process on 127.0.0.1; UnSplit reads only what "
                            "the server received).", choice(TRANSPORTS))
    target_party: int = option(0, "With --parties K: the party whose strip UnSplit reconstructs from its slice of "
                               "the joined activations, 0 to K - 1.", integer(low=0, high=MAX_PARTIES - 1))
    rows: int | None = option(None, "Tabular data: the targets are the first so many test rows (default "
                              f"{TABULAR_ROWS}); images: the first test image of each class.",
                              optional(integer(low=1, high=100_000)))

    def check(self) -> None:
        super().check()
        if self.checkpoint is None:                 # a checkpoint's dataset is checked once it is loaded
            self.check_dataset(self.victim_config.dataset)
        if self.victim.get("aggregate") == "sum" or self.victim.get("top") == "none":
            raise SplitlabError("UnSplit inverts a bottom model at its cut layer; --aggregate sum (--top none) has no "
                                "cut (each party sends class scores): leave --aggregate and --top out, or give --top "
                                "model or linear")
        if self.checkpoint is not None and self.victim:
            given = sorted(self.victim)[0]
            raise SplitlabError(f"--{given.replace('_', '-')} describes the model to train, but --checkpoint gives "
                                "a trained one (its own settings are used): drop one of them")
        if self.checkpoint is not None and self.transport == "tcp":
            raise SplitlabError("--transport tcp trains the victim over TCP, --checkpoint attacks one already "
                                "trained: drop one of them")
        if self.training is not None:
            check_target_party(self.target_party, self.training.parties)
        if self.training is not None and self.transport == "tcp":
            from vfl.wire.launch import check_hosted

            check_hosted(self.training)

    def check_dataset(self, dataset: str) -> None:
        """What the victim's dataset (given, or a checkpoint's once loaded) decides of the options: tabular samples
        take no TV and come over no TCP; images take no --rows."""
        if datasets.dataset_spec(dataset).tabular is None:
            if self.rows is not None:
                raise SplitlabError(f"--rows {self.rows} picks tabular targets; dataset {dataset} has images, of "
                                    "which UnSplit attacks the first test image of each class: drop --rows")
            return
        self.settings.check_features(f"dataset {dataset}'s tabular samples")
        if self.transport == "tcp":
            raise SplitlabError("UnSplit on tabular data reads its targets' activations in process (the wire's "
                                "query holds one row of each class): drop --transport tcp")

    def check_data(self) -> None:
        if self.training is not None:               # a checkpoint names its own dataset, checked when loaded
            datasets.require(self.training.dataset, self.training.data_root)

    @functools.cached_property
    def training(self) -> SplitCase | None:
        """The victim's training config (checked), or None when a checkpoint is attacked."""
        if self.checkpoint is not None:
            return None
        return self.victim_config


def check_target_party(party: int, parties: int) -> None:
    if parties == 1 and party != 0:
        raise SplitlabError(f"--target-party {party}: the victim has one feature party (--parties 1); give --parties K "
                            "to split it, or drop --target-party")
    if not 0 <= party < parties:
        raise SplitlabError(f"--target-party {party} names no party of the victim's --parties {parties}; give 0 to "
                            f"{parties - 1}")


@dataclass
class Victim:
    """The trained split model under attack and the data it came from (`trained` None until it is trained)."""
    config: SplitCase
    train: datasets.ImageData
    test: datasets.ImageData
    trained: TrainedSplit | None = None
    checkpoint: Path | None = None


def load_victim(checkpoint: Path, device: str = "auto", data_root: str | None = None) -> Victim:
    """A trained split model from a checkpoint, with its dataset (errors before anything is written)."""
    trained = load_checkpoint(checkpoint, device, data_root)
    train, test = load_data(trained.config)
    return Victim(trained.config, train, test, trained, Path(checkpoint))


def train_victim(victim: Victim, run: Run | None, progress: bool = True) -> Victim:
    """Train the split model and save its checkpoint into the run directory (if there is one)."""
    trained = train_split(victim.config, victim.train, victim.test, run, progress)
    if run is None:
        return Victim(victim.config, victim.train, victim.test, trained)
    path, _ = save_trained(run, trained)
    run.log(f"trained {victim.config.arch} cut {victim.config.cut_layer}: accuracy {trained.accuracy:.4f} in "
            f"{trained.seconds:.1f} s")
    return Victim(victim.config, victim.train, victim.test, trained, path)


def observe_over_tcp(victim: Victim, run: Run, progress: bool = True) -> tuple[CutObservation, float, dict]:
    """Train the victim with the curious server in this process and each honest client in a `splitlab client`
    process on 127.0.0.1 (`vfl.wire.launch.serve_locally`), then take the observation from what the server
    received: the last inference query, the evaluation targets' activations. Returns it with the test accuracy
    the server measured and the bytes that crossed the cut. Nothing of the clients' is read here: no weights, no images."""
    from vfl.wire.launch import serve_locally

    config = victim.config
    device = resolve_device(config.device)
    server = build_server(config, device, "curious")
    metrics, server_run = serve_locally(config, run, "curious", server=server, progress=progress,
                                        launched_by="attack unsplit --transport tcp")
    query = server.seen.queries()[-1]
    run.save_figure("training_curves.png", training_curves_figure(
        TrainedSplit(config, None, server, metrics["accuracy"], metrics["history"], metrics["seconds"])))
    run.log(f"trained {config.arch} cut {config.cut_layer} over TCP: accuracy {metrics['accuracy']:.4f} in "
            f"{metrics['seconds']:.1f} s; the server received the targets' query at step {query.step} "
            f"({server_run.path})")
    return CutObservation(config.arch, config.cut_layer, config.image_shape, query.tensor.to(device)), \
        metrics["accuracy"], metrics["cut_bytes"]


def observe_trained(victim: Victim, *, seed: int = 0, target_party: int = 0, rows: int | None = None) -> Observed:
    """What the curious server receives of the targets (the first test image of each class, or the first `rows`
    test rows of a tabular set) from the trained client (`observed_from`)."""
    config = victim.config
    device = next(victim.trained.client.model.parameters()).device
    targets, _ = targets_of(victim, rows)
    observation = observe(victim.trained.client, targets.to(device), config.arch, config.cut_layer,
                          victim.trained.server.model)
    return observed_from(victim, observation, victim.trained.accuracy, seed=seed, target_party=target_party,
                         rows=rows)


def targets_of(victim: Victim, rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """UnSplit's targets and their labels: the first test image of each class, or on tabular data the first
    `rows` test rows (`TABULAR_ROWS` by default)."""
    if datasets.dataset_spec(victim.config.dataset).tabular is None:
        return datasets.first_of_each_class(victim.test)
    count = rows or TABULAR_ROWS
    return victim.test.images[:count], victim.test.labels[:count]


def attacked_columns(config: SplitCase, party: int) -> list[int]:
    """The columns of a tabular sample the attacked party holds (every column with one party)."""
    return party_columns(config.image_shape[-1], config.parties, config.partition, config.seed, config.dataset,
                         config.data_root)[party]


def tabular_truth(victim: Victim, targets: torch.Tensor, classes: torch.Tensor, party: int) -> Truth:
    """The attacked party's columns of the targets, with what the scoring needs beside them: the training split's
    mean of each of those columns (the trivial answer; its argmax in a one-hot group is the majority category) and
    the one-hot groups among them."""
    config = victim.config
    columns = attacked_columns(config, party)
    source = datasets.dataset_spec(config.dataset).tabular
    root = None if source.package is not None or config.data_root is None else str(config.data_root)
    groups = strip_groups(column_groups(source, root) or (), columns)
    return Truth(targets[:, columns].contiguous(), context={
        "classes": classes, "groups": groups, "train_mean": victim.train.images[:, columns].double().mean(0)})


def observed_from(victim: Victim, observation: CutObservation, accuracy: float, *, seed: int = 0,
                  target_party: int = 0, rows: int | None = None, cut_bytes: dict | None = None) -> Observed:
    """UnSplit's observation of the targets (with K parties, the target party's slice), its truth on [0,1] (the
    clean targets, or the target party's strip of each; on tabular data the attacked party's columns), the
    victim's accuracy and what its defences did in training; with K image parties the strips figure is written
    after the attack."""
    config = victim.config
    check_target_party(target_party, config.parties)
    targets, classes = targets_of(victim, rows)
    observation = party_view(observation, config.parties, target_party)
    tabular = datasets.dataset_spec(config.dataset).tabular is not None
    if tabular:                     # the attacked columns' one-hot groups: part of the architecture the server knows
        observation = dataclasses.replace(observation, groups=party_groups(
            config.arch, config.dataset, config.parties, target_party, config.partition, config.seed,
            config.data_root))
    facts = {"accuracy": accuracy, "arch": config.arch, "cut_layer": config.cut_layer, "defence": config.defence,
             "send_back": config.send_back, "task": config.task}
    found = {} if victim.trained is None else trained_report(victim.trained)
    if found:                                        # what the defences did in training (NoPeek's DCOR, ...)
        facts["defence_report"] = found
    if victim.trained is not None:                 # trained here; over TCP the server's count is given
        cut_bytes = victim.trained.cut_bytes
    if cut_bytes is not None:
        facts["cut_bytes"] = cut_bytes
    title = f"UnSplit on {config.arch} (cut {config.cut_layer}), {config.dataset}"
    truth = Truth(targets, context={"classes": classes})
    if tabular:
        truth = tabular_truth(victim, targets, classes, target_party)
    after = None
    if config.parties > 1:
        start, stop = strip_bounds(targets.shape[-1], config.parties)[target_party]
        if not tabular:
            truth = Truth(take_strip(targets, config.parties, target_party).contiguous(), context={"classes": classes})
        facts.update(parties=config.parties, target_party=target_party, strip_columns=[start, stop - 1])
        title += f", party {target_party} of {config.parties} (columns {start}-{stop - 1})"
    if tabular:
        facts.update(partition=config.partition, attacked_columns=attacked_columns(config, target_party))
    if config.parties > 1 and not tabular:

        def after(outcome: Outcome, run: Run | None) -> None:
            if run is not None:
                run.save_figure("strips.png", strips_figure(targets, outcome, config.parties, target_party))
    return Observed(observation, truth, facts, title, seed, after=after)


def attack_victim(victim: Victim, attack: Any, run: Run | None = None, *, seed: int = 0,
                  lpips: LpipsMetric | Unavailable | None = None, fid: FidMetric | Unavailable | None = None,
                  progress: bool = True, target_party: int = 0, rows: int | None = None) -> Outcome:
    """UnSplit on the first test image of each class (or the first `rows` tabular test rows), as the curious
    server receives them from the trained client, through the one driver (`observe_trained`)."""
    return attack_observed(registered("unsplit"), attack,
                           observe_trained(victim, seed=seed, target_party=target_party, rows=rows),
                           run, lpips=lpips, fid=fid, progress=progress)


def attack_observation(victim: Victim, observation: CutObservation, accuracy: float, attack: Any,
                       run: Run | None = None, *, seed: int = 0, lpips: LpipsMetric | Unavailable | None = None,
                       fid: FidMetric | Unavailable | None = None, progress: bool = True,
                       target_party: int = 0, rows: int | None = None) -> Outcome:
    """UnSplit on what the server received of the targets, through the one driver (`observed_from`): metrics on
    [0,1] against the clean targets, the victim's accuracy, and the spec's evaluation (clone fit, per-class
    errors)."""
    return attack_observed(registered("unsplit"), attack, observed_from(victim, observation, accuracy, seed=seed,
                                                                        target_party=target_party, rows=rows),
                           run, lpips=lpips, fid=fid, progress=progress)


def strips_figure(targets, outcome: Outcome, parties: int, party: int):
    """The targets whole, the attacked party's strip, UnSplit's reconstruction of it (min-max, as the paper shows
    UnSplit's) and, for contrast, the other parties' strips, which the attack neither sees nor produces."""
    spec = registered("unsplit")
    start, stop = strip_bounds(targets.shape[-1], parties)[party]
    rows = [("targets", targets), (f"party {party}'s strip", outcome.targets),
            ("reconstruction", shown(outcome.reconstruction, outcome.metrics, spec.display))]
    rows += [(f"party {k}'s strip\n(not attacked)", take_strip(targets, parties, k)) for k in range(parties) if k != party]
    return image_grid(rows, title=f"UnSplit against party {party} of {parties} (columns {start}-{stop - 1}): only its "
                                  "strip is reconstructed")


def tabular_evaluation(reconstruction, metrics: dict, truth: Truth) -> dict[str, Any]:
    """On tabular targets: the clone fit (MSE Z) over the targets that did not diverge, the categorical accuracy
    of the one-hot groups, and the trivial answer beside both (the training mean of each feature; in a group, its
    argmax, the majority category)."""
    kept = reconstruction.kept
    fit = reconstruction.extras["activation_mse_per_target"].detach().float().cpu()
    answer, x = reconstruction.images.detach().double().cpu(), truth.images.double().cpu()
    mean, groups = truth.context["train_mean"].expand_as(x), truth.context["groups"]
    per_feature = feature_mse(mean, x)
    accuracy, per_group = categorical_accuracy(answer, x, groups)
    majority, majority_per_group = categorical_accuracy(mean, x, groups)
    found = {"activation_mse": float(fit[kept].mean()) if bool(kept.any()) else None,
             "categorical_accuracy": accuracy, "categorical_accuracy_per_group": per_group,
             "groups": [list(g) for g in groups],
             "baselines": {**metrics["baselines"],
                           "mean": {"feature_mse": float(per_feature.mean()),
                                    "feature_mse_per_feature": per_feature.tolist()},
                           "majority": {"categorical_accuracy": majority,
                                        "categorical_accuracy_per_group": majority_per_group}},
             "diverged_targets": torch.nonzero(~kept).flatten().tolist()}
    if accuracy is None:
        found["unavailable"] = {**metrics["unavailable"],
                                "categorical_accuracy": "the attacked columns hold no categorical group"}
    return found


def evaluation(reconstruction, metrics: dict, truth: Truth) -> dict[str, Any]:
    """The spec's `evaluate` hook: the clone fit (MSE Z, final and trajectory mean) over the targets that did
    not diverge, and the errors per class (on tabular targets, `tabular_evaluation`)."""
    if reconstruction.infers_features:
        return tabular_evaluation(reconstruction, metrics, truth)
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
    """The spec's `write` hook: per_class.png (the JAST paper's Figure 8) and the log line (on tabular targets the
    log line only: the driver draws each feature's error beside the training mean's)."""
    m = outcome.metrics
    if outcome.reconstruction.infers_features:
        run.log(f"unsplit: {_tabular_headline(m)}")
        return
    per_class = m["per_class"]
    figure = per_class_bars({"reconstruction MSE (min-max)": [per_class[c].get("image_mse_minmax", float("nan"))
                                                               for c in sorted(per_class)]},
                            "MSE", f"UnSplit per-class error, {m['arch']}")
    run.save_figure("per_class.png", figure)
    if m["image_mse_minmax"] is not None:
        run.log(f"unsplit: image_mse_minmax {m['image_mse_minmax']:.4f} activation_mse {m['activation_mse']:.3g} "
                f"in {outcome.reconstruction.seconds:.1f} s")


class UnsplitFamily:
    """What UnSplit keeps of its own in the one split experiment (`attacks.split.run_split`): its victim (the case
    to train, or a checkpoint), the case trained with the curious server (in process or over TCP) observing the
    targets, its record and its summary line."""

    def load(self, config: UnsplitConfig, attack: Any) -> tuple[Victim, None]:
        """The victim's data (or its checkpoint); nothing written."""
        if config.checkpoint is not None:
            victim = load_victim(Path(config.checkpoint), config.device, config.data_root)
            check_target_party(config.target_party, victim.config.parties)
            config.check_dataset(victim.config.dataset)
            return victim, None
        train, test = load_data(config.training)
        return Victim(config.training, train, test), None

    @contextmanager
    def observe(self, prepared: Prepared, run: Run | None, progress: bool) -> Iterator[Observed]:
        victim, c = prepared.victim, prepared.config
        if c.transport == "tcp":
            if run is None:
                raise SplitlabError("transport tcp keeps its parties' runs in the run directory: give out=")
            observation, accuracy, cut_bytes = observe_over_tcp(victim, run, progress)
            yield observed_from(victim, observation, accuracy, seed=c.seed, target_party=c.target_party,
                                cut_bytes=cut_bytes)
            return
        if victim.trained is None:
            victim = train_victim(victim, run, progress)
        yield observe_trained(victim, seed=c.seed, target_party=c.target_party, rows=c.rows)

    def record(self, prepared: Prepared) -> dict[str, Any]:
        c = prepared.config
        return {"train": prepared.victim.config, "checkpoint": c.checkpoint, "transport": c.transport,
                "target_party": c.target_party, "settings": c.settings, "seed": c.seed,
                "device": str(resolve_device(c.device)), "dataset_provenance": prepared.victim.test.provenance}

    def summary(self, prepared: Prepared, outcome: Outcome, run: Run):
        return summary(prepared, outcome, run)


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, config = outcome.metrics, prepared.victim.config

    def show(console) -> None:
        sent_back = f", send-back {config.send_back}" if config.send_back != "none" else ""
        head = f"UnSplit on {config.arch} cut {config.cut_layer} ({config.dataset}, defence {config.defence}{sent_back})"
        if config.parties > 1:
            head += f" against party {m['target_party']} of {config.parties} (columns {m['strip_columns'][0]}-" \
                    f"{m['strip_columns'][1]})"
        if prepared.config.transport == "tcp":
            head += ", over TCP"
        if outcome.reconstruction.infers_features:
            console.print(f"{head}: {_tabular_headline(m)}; accuracy {m['accuracy']:.4f}; run directory {run.path}")
            return
        if m["image_mse"] is None:
            console.print(f"{head}: every target diverged; accuracy {m['accuracy']:.4f}; run directory {run.path}")
            return
        console.print(f"{head}: MSE X (min-max) {m['image_mse_minmax']:.4f}, plain {m['image_mse']:.4f} (zero-image "
                      f"baseline {m['baselines']['zero']['image_mse']:.4f}), MSE Z {m['activation_mse']:.3g}, "
                      f"PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.3f}, accuracy {m['accuracy']:.4f}; "
                      f"run directory {run.path}")
    return show


def _tabular_headline(m: dict) -> str:
    def share(value):
        return "-" if value is None else f"{value:.3f}"
    return (f"feature MSE {m['feature_mse']:.4f} (training mean {m['baselines']['mean']['feature_mse']:.4f}), "
            f"categorical accuracy {share(m['categorical_accuracy'])} (majority "
            f"{share(m['baselines']['majority']['categorical_accuracy'])}) over {m['n_targets']} rows, MSE Z "
            f"{m['activation_mse']:.3g}")


UNSPLIT = split_experiment(UnsplitConfig, UnsplitFamily())
"""How `splitlab attack unsplit` runs: the case trained (or loaded), the targets' activations observed, UnSplit
through the one driver."""

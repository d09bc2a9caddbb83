"""One HFL attack end to end, as `splitlab hfl` runs it.

`prepare(config)` validates every input, loads the client's batch, builds the global model, lets the
client upload (the observation) and checks that the attack can serve this model and observation; it
writes nothing. `execute(prepared, run)` hands the observation to the one driver
(`attacks.driver.attack_and_score`), which attacks, scores against the private batch (evaluation
only) and writes the run directory.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import torch

from attacks.driver import Outcome, attack_and_score
from attacks.hfl import awa_settings, fedleak_settings, tgias_settings
from attacks.hfl.agic import AGIC
from attacks.hfl.awa import AWA
from attacks.hfl.awa_diagnostics import evaluation, save_figures, upload_diagnostics
from attacks.hfl.awa_settings import AGICSettings, AWASettings
from attacks.hfl.defences import Defence, parse_defence
from attacks.hfl.dlg import DLG
from attacks.hfl.fedleak import FedLeak
from attacks.hfl.fedleak_settings import FedLeakSettings
from attacks.hfl.invgrad import InvertingGradients
from attacks.hfl.observations import Observation, observe_fedavg, observe_fedsgd
from attacks.hfl.options import apply_options, is_given
from attacks.hfl.secagg import observe_clients
from attacks.hfl.settings import DLGSettings, InvGradSettings, Settings
from attacks.hfl.tgias import TGIAsRO
from attacks.hfl.tgias_experiment import TRACE_OPTIONS, TraceOptions, observe_for, validate_trace
from attacks.hfl.tgias_settings import TGIAsSettings
from attacks.hfl.variables import TRIAL_MODES
from attacks.metrics import FidMetric, LpipsMetric, Unavailable
from attacks.presets import preset
from vfl import data as datasets
from vfl.errors import SplitlabError, lookup
from vfl.hfl_training import MAX_EPOCHS, pretrain
from vfl.models.hfl import HFL_MODELS, build_hfl_model, check_hfl_input, hfl_model_spec
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.validate import check_int, check_number

__all__ = ["HFLConfig", "Prepared", "prepare", "execute", "make_attack", "ATTACKS", "OBSERVATIONS", "LABEL_KNOWLEDGE"]

ATTACKS = ("dlg", "idlg", "invgrad", "fedleak", "awa", "agic", "tgias-ro")
ATTACK_OPTIONS = fedleak_settings.OPTIONS + awa_settings.OPTIONS + tgias_settings.OPTIONS
"""The attack-specific options of `splitlab hfl` (`attacks.hfl.options`)."""
ITERATIONS_FIELD = {DLGSettings: "steps", TGIAsSettings: "rounds"}
"""The settings field --iterations sets where it is not `iterations` (L-BFGS steps, global rounds)."""
OBSERVATIONS = ("fedsgd", "fedavg", "rounds")
LABEL_KNOWLEDGE = ("recovered", "known")
KNOWN_LABELS = ("invgrad", "fedleak", "awa", "agic", "tgias-ro")
"""Attacks that can be given the client's labels (--labels known)."""


@dataclass(frozen=True)
class HFLConfig:
    """What `splitlab hfl` runs. Defaults: DLG's paper preset on the sigmoid LeNet, one mnist5k image."""
    attack: str = "dlg"
    arch: str = "lenet"
    dataset: str = "mnist5k"
    batch_size: int = 1
    index: int = 0
    """The client's batch is images index .. index + batch_size - 1 of the dataset's train split."""
    preset: str | None = None
    """None: the attack's default preset (`attacks.presets.DEFAULT_PRESET`)."""
    restarts: int | None = None
    iterations: int | None = None
    """L-BFGS steps for DLG/iDLG, Adam iterations for Inverting Gradients, FedLeak, AWA and AGIC, global
    rounds R_g for TGIAs-RO; None keeps the preset's."""
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
    trials: str = "auto"
    seed: int = 0
    device: str = "auto"
    data_root: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """Attack-specific options by name (`ATTACK_OPTIONS`, e.g. {"ratio": 0.5}); None keeps the preset's."""
    secure_aggregation: int = 1
    """Secure aggregation: the server sees the sum of this many clients' uploads (fedleak only)."""
    pretrain_epochs: int = 0
    """Train the global model this many epochs on the dataset's test split first ("pretrained" weights)."""
    trace: TraceOptions = TraceOptions()
    """--observe rounds: the FL trace the server logs."""

    @classmethod
    def of(cls, **values: Any) -> "HFLConfig":
        """The config from flat option values (as the CLI and sweeps give them): attack options go to
        `options`, the trace's to `trace`. `options` (a mapping) and `trace` (`TraceOptions` or a mapping)
        may also be given whole; flat values override them."""
        values = dict(values)
        options, trace = dict(values.pop("options", None) or {}), values.pop("trace", None) or {}
        trace = dict(vars(trace) if isinstance(trace, TraceOptions) else trace)
        attack_names = {o.name: o for o in ATTACK_OPTIONS}
        options |= {k: values.pop(k) for k in list(values) if k in attack_names}
        trace |= {k: values.pop(k) for k in list(values) if k in TRACE_OPTIONS}
        unknown = set(trace) - set(TRACE_OPTIONS)
        if unknown:
            raise SplitlabError(f"unknown trace option {sorted(unknown)[0]!r}; the trace options are "
                                + ", ".join(TRACE_OPTIONS))
        options = {k: v for k, v in options.items() if k not in attack_names or is_given(attack_names[k], v)}
        return cls(**values, options=options, trace=TraceOptions(**trace))

    def settings(self) -> Settings:
        """The preset with this config's overrides; every name and number checked (SplitlabError)."""
        lookup(dict.fromkeys(ATTACKS), self.attack, "attack")
        settings = preset(self.preset, self.attack).settings()
        if self.restarts is not None:
            check_int("--restarts", self.restarts, low=1, high=10_000)
            if "restarts" not in {f.name for f in fields(settings)}:
                raise SplitlabError(f"--restarts does not apply to {self.attack} (its trials are not restarts)")
            settings = replace(settings, restarts=self.restarts)
        if self.iterations is not None:
            check_int("--iterations", self.iterations, low=1, high=10_000_000)
            settings = replace(settings, **{ITERATIONS_FIELD.get(type(settings), "iterations"): self.iterations})
        if isinstance(settings, InvGradSettings):
            if self.tv is not None:
                settings = replace(settings, tv=check_number("--tv", self.tv, low=0))
            settings = settings.for_dataset(self.dataset)
        elif self.tv is not None:
            raise SplitlabError(f"--tv applies to invgrad only (attack {self.attack} has no prior)")
        unknown = set(self.options) - {o.name for o in ATTACK_OPTIONS}
        if unknown:
            raise SplitlabError(f"unknown attack option {sorted(unknown)[0]!r}; the attack options are "
                                + ", ".join(o.name for o in ATTACK_OPTIONS))
        return apply_options(settings, self.attack, self.options, ATTACK_OPTIONS)

    def validate(self) -> None:
        """Check names and numbers that need no data (before anything is loaded or written)."""
        self.settings()
        hfl_model_spec(self.arch)
        spec = datasets.dataset_spec(self.dataset)
        check_hfl_input(self.arch, spec.image_shape)
        parse_defence(self.defence)
        if self.observe not in OBSERVATIONS:
            raise SplitlabError(f"unknown observation {self.observe!r}; use --observe {' or '.join(OBSERVATIONS)}")
        if self.labels not in LABEL_KNOWLEDGE:
            raise SplitlabError(f"unknown label knowledge {self.labels!r}; use --labels {' or '.join(LABEL_KNOWLEDGE)}")
        if self.labels == "known" and self.attack not in KNOWN_LABELS:
            raise SplitlabError(f"--labels known applies to {', '.join(KNOWN_LABELS)} only "
                                f"({self.attack} finds its labels itself)")
        if self.trials not in TRIAL_MODES:
            raise SplitlabError(f"unknown trials mode {self.trials!r}; use --trials {' or '.join(TRIAL_MODES)}")
        check_int("--batch-size", self.batch_size, low=1, high=100_000)
        check_int("--index", self.index, low=0)
        check_int("--seed", self.seed, low=0, high=2**63 - 1)
        check_number("--local-lr", self.local_lr, low=0, low_open=True)
        check_int("--local-epochs", self.local_epochs, low=1, high=100_000)
        if self.local_batch_size is not None:
            check_int("--local-batch-size", self.local_batch_size, low=1)
        resolve_device(self.device)
        check_int("--secure-aggregation", self.secure_aggregation, low=1, high=10_000)
        if self.secure_aggregation > 1 and self.attack != "fedleak":
            raise SplitlabError("--secure-aggregation applies to fedleak only")
        check_int("--pretrain-epochs", self.pretrain_epochs, low=0, high=MAX_EPOCHS)
        validate_trace(self)
        if self.attack == "awa":
            settings = self.settings()
            if not settings.bo_trials and self.options.get("bo_random") is not None:
                raise SplitlabError("--bo-random applies to a Bayesian optimisation: give --bo-trials too")
            if settings.bo_trials and self.restarts is not None:
                raise SplitlabError("--restarts does not apply with --bo-trials (the BO trials are the restarts)")


ATTACK_CLASSES = {
    DLGSettings: DLG,
    InvGradSettings: InvertingGradients,
    AWASettings: AWA,
    AGICSettings: AGIC,
    FedLeakSettings: FedLeak,
    TGIAsSettings: TGIAsRO,
}
"""Settings type -> attack class: `make_attack` dispatches on it (one line per attack)."""


def make_attack(settings: Settings):
    return ATTACK_CLASSES[type(settings)](settings)


@dataclass(frozen=True, eq=False)
class Prepared:
    """Everything validated, nothing written: the attack, the observation and the private ground truth."""
    config: HFLConfig
    settings: Settings
    attack: Any
    defence: Defence
    observation: Observation
    images: torch.Tensor
    """The client's private batch (evaluation only)."""
    labels: torch.Tensor
    provenance: str
    device: torch.device
    facts: dict[str, Any] = field(default_factory=dict)
    """Facts of the observation for metrics.json (e.g. a trace's rounds and alignment accuracy)."""

    def record(self) -> dict[str, Any]:
        """The resolved config for config.json."""
        return {"hfl": asdict(self.config), "preset": asdict(self.settings), "attack": self.attack.name,
                "defence": self.defence.spec, "observation": self.observation.kind,
                "model_params": sum(p.numel() for p in self.observation.model.params.values()),
                "device": str(self.device), "dataset_provenance": self.provenance,
                "images": list(range(self.config.index, self.config.index + len(self.labels)))}


def prepare(config: HFLConfig, *, dtype: torch.dtype = torch.float32) -> Prepared:
    """Validate, load the batch, build the model, observe the client's upload, check the attack serves it."""
    config.validate()
    settings = config.settings()
    data = datasets.load(config.dataset, "train", config.data_root)
    images = config.secure_aggregation * config.batch_size      # every aggregated client's batch
    if config.index + images > len(data):
        raise SplitlabError(f"--batch-size {config.batch_size} from --index {config.index} needs "
                            f"{config.index + images} images but the {config.dataset} train split "
                            f"has {len(data)}")
    local_batch = config.local_batch_size
    if config.observe == "fedavg" and local_batch is not None and local_batch > config.batch_size:
        raise SplitlabError(f"--local-batch-size {config.local_batch_size} exceeds --batch-size {config.batch_size}")
    device = resolve_device(config.device)
    spec = datasets.dataset_spec(config.dataset)
    model = build_hfl_model(config.arch, spec.image_shape, spec.num_classes, seed=config.seed).to(device, dtype)
    if config.pretrain_epochs:
        pretrain(model, datasets.load(config.dataset, "test", config.data_root), epochs=config.pretrain_epochs,
                 seed=config.seed)
    x = data.images[config.index:config.index + images].to(device, dtype)
    y = data.labels[config.index:config.index + images].to(device)
    defence = parse_defence(config.defence)
    noise = torch.Generator().manual_seed(config.seed + 1)
    reveal = config.labels == "known"
    facts: dict[str, Any] = {}
    if config.observe == "rounds":
        trace, facts = observe_for(config, model, data, defence, reveal, settings.temporal)
        observation = trace.log
    else:
        def upload(x, y):
            if config.observe == "fedsgd":
                return observe_fedsgd(model, x, y, arch=config.arch, defence=defence, generator=noise,
                                      reveal_labels=reveal)
            return observe_fedavg(model, x, y, lr=config.local_lr, epochs=config.local_epochs,
                                  batch_size=config.local_batch_size or config.batch_size, arch=config.arch,
                                  defence=defence, generator=noise, reveal_labels=reveal)

        observation = observe_clients(upload, x, y, config.secure_aggregation)
    attack = make_attack(settings)
    attack.check(observation)
    return Prepared(config, settings, attack, defence, observation, x, y, data.provenance, device, facts)


def execute(prepared: Prepared, run: Run | None = None, *, lpips: LpipsMetric | Unavailable | None = None,
            fid: FidMetric | Unavailable | None = None, progress: bool = True) -> Outcome:
    """Attack, score and write the run directory through the one driver."""
    c = prepared.config
    if run is not None:
        run.log(f"{prepared.attack.name} ({prepared.settings.name}) on {c.arch}, {c.dataset} images "
                f"{c.index}..{c.index + len(prepared.labels) - 1}, defence {prepared.defence.spec}, {c.trials} trials")
    outcome = attack_and_score(prepared.attack, prepared.observation, prepared.images, prepared.labels, run=run,
                               seed=c.seed, mode=c.trials, progress=progress, lpips=lpips, fid=fid,
                               extra={"arch": c.arch, "dataset": c.dataset, "batch_size": c.batch_size,
                                      "secure_aggregation": c.secure_aggregation,
                                      "defence": prepared.defence.spec, "observation": prepared.observation.kind,
                                      **upload_diagnostics(prepared.observation, prepared.settings), **prepared.facts},
                               title=f"{prepared.attack.name} on {c.arch}, {c.dataset}, batch {c.batch_size}, "
                                     f"defence {prepared.defence.spec}", evaluate=evaluation)
    if run is not None:
        save_figures(run, outcome)
    return outcome


def model_names() -> str:
    return ", ".join(HFL_MODELS)

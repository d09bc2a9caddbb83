"""One HFL attack end to end, as `splitlab hfl` runs it; it names no attack (what an attack needs beyond
the generic run comes from its spec's hooks).

`HFLConfig(...)` checks every name and number when it is built (the attack's settings included), before
anything is loaded. `prepare(config)` loads the client's batch, builds the global model, lets the client
upload (the observation) and checks that the attack can serve it; it writes nothing. `execute(prepared,
run)` hands the observation to the one driver, which attacks, scores against the private batch
(evaluation only) and writes the run directory.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import torch

from attacks import registry
from attacks.driver import Outcome, Truth, attack_and_score
from attacks.engine import MODES
from vfl.defences.upload import Defence, parse_defence
from attacks.hfl.observations import Observation, observe_fedavg, observe_fedsgd
from attacks.hfl.secagg import observe_clients
from attacks.metrics import FidMetric, LpipsMetric, Unavailable
from attacks.spec import LABEL_KNOWLEDGE, AttackSpec
from vfl import data as datasets
from vfl.cli_options import Runtime
from vfl.errors import SplitlabError
from vfl.hfl_training import MAX_EPOCHS, pretrain
from vfl.models.hfl import build_hfl_model, check_hfl_input, hfl_model_spec
from vfl.options import build, choice, integer, number, option, optional, options_of, route, text
from vfl.runs import Run
from vfl.runtime import resolve_device

__all__ = ["HFLConfig", "Plan", "Prepared", "prepare", "execute", "OBSERVATIONS"]

OBSERVATIONS = ("fedsgd", "fedavg", "rounds")
IMAGE_DRAWS = ("index", "seed")
FEDAVG_DEFAULTS = {"local_lr": 1e-4, "local_epochs": 1}
"""FedAvg's local hyperparameters when not given (IG's FedAvg CLI default lr 1e-4, one epoch)."""


@dataclass(frozen=True)
class Plan:
    """What a config resolves to: the attack's spec and settings, and the experiment's choices."""
    spec: AttackSpec
    settings: Any
    observe: str
    labels: str
    observation_options: Any
    defence: Defence


@dataclass(frozen=True, kw_only=True)
class HFLConfig(Runtime):
    """What `splitlab hfl` runs. Defaults: DLG's paper preset on the sigmoid LeNet, one mnist5k image."""
    attack: str = option("dlg", "The attack; `--attack NAME --help` lists its own options.", text())
    preset: str | None = option(None, "The attack's preset (default: its own default).", optional(text()))
    arch: str | None = option(None, "Global model (see `splitlab models`; default: the attack's own, e.g. DLG's "
                              "sigmoid LeNet).", optional(text()))
    dataset: str = option("mnist5k", "Dataset (see `splitlab datasets`); the client's batch comes from its train "
                          "split.", text())
    batch_size: int = option(1, "The client's batch size.", integer(low=1, high=100_000))
    index: int = option(0, "First image of the client's batch in the train split.", integer(low=0, high=10**9))
    images: str = option("index", "Which train images the client holds: index (from --index on, the same on every "
                         "seed) or seed (the train split shuffled by --seed first, so each seed attacks other "
                         "images).", choice(IMAGE_DRAWS))
    defence: str = option("none", "Client defence on the upload: none, gaussian:sigma=S[,clip=C], topk:keep=F, "
                          "quant:bits=N (1: the sign, scaled by the mean magnitude), upload-dp:epsilon=E[,delta=D].", text())
    observe: str | None = option(None, "What the server sees: fedsgd (one gradient), fedavg (the update after "
                                 "local SGD) or rounds (a trace of FL rounds); default: the attack's first.",
                                 optional(choice(OBSERVATIONS)))
    local_lr: float | None = option(None, "FedAvg local learning rate (default 1e-4).",
                                    optional(number(low=0, low_open=True, high=1e3)))
    local_epochs: int | None = option(None, "FedAvg local epochs (default 1).", optional(integer(low=1, high=100_000)))
    local_batch_size: int | None = option(None, "FedAvg mini-batch size (default: the whole batch).",
                                          optional(integer(low=1, high=100_000)))
    labels: str | None = option(None, "What the server knows of the labels: recovered (the attack finds them) or "
                                "known (default: the attack's first).", optional(choice(LABEL_KNOWLEDGE)))
    mode: str = option("auto", "How the engine runs the trials (restarts): auto (the faster by its measured rule), "
                       "batched or sequential.", choice(MODES))
    secure_aggregation: int = option(1, "The server sees only the sum of this many clients' uploads (each "
                                     "--batch-size images).", integer(low=1, high=10_000))
    pretrain_epochs: int = option(0, "Train the global model this many epochs on the dataset's test split first "
                                  "(pretrained weights).", integer(low=0, high=MAX_EPOCHS))
    options: Mapping[str, Any] = field(default_factory=dict)
    """The attack's settings fields to override (`{"ratio": 0.3}`); None keeps the preset's."""
    observation_options: Mapping[str, Any] = field(default_factory=dict)
    """The fields of the attack's own observation options (a trace's `clients`, ...)."""

    @classmethod
    def of(cls, **values: Any) -> "HFLConfig":
        """The config from flat values (as the CLI, sweeps and the Python API give them): the attack's settings
        fields go to `options`, its observation options to `observation_options`; `options` and
        `observation_options` may also be given whole (flat values override them). None means not given."""
        spec = registry.spec(values.get("attack") or cls.attack)
        return route(cls, spec.name, {"options": spec.settings, "observation_options": spec.observation_options},
                     **values)

    def __post_init__(self) -> None:
        if self.arch is None:               # the attack's own model (a one-line error names an unknown attack)
            object.__setattr__(self, "arch", registry.spec(self.attack).model or "lenet")
        super().__post_init__()

    def check(self) -> None:
        self.plan                           # every name and number, once, when the config is built

    @functools.cached_property
    def plan(self) -> Plan:
        spec = registry.spec(self.attack)
        if spec.setting != "hfl":
            raise SplitlabError(f"{spec.name} attacks split learning: run `splitlab attack {spec.name}`")
        own = {f.name for f, _ in options_of(spec.settings)}
        unknown = sorted(set(self.options) - own)
        if unknown:
            raise SplitlabError(f"{spec.name} has no option {unknown[0]!r}; its options are {', '.join(sorted(own))}")
        settings = spec.preset(self.preset).settings(**self.options)
        if spec.configure is not None:
            settings = spec.configure(settings, self)
        if spec.observation_options is not None:
            observation_options = build(spec.observation_options, f"{spec.name}'s observation",
                                        **self.observation_options)
        elif self.observation_options:
            raise SplitlabError(f"{spec.name} takes no observation options, got {', '.join(self.observation_options)}")
        else:
            observation_options = None
        observe = self.observe or spec.observes[0]
        if observe not in spec.observes:
            raise SplitlabError(f"{spec.name} observes {' or '.join(spec.observes)}, not {observe}; use --observe "
                                f"{spec.observes[0]}")
        labels = self.labels or spec.labels[0]
        if labels not in spec.labels:
            raise SplitlabError(f"--labels {labels} does not apply to {spec.name} (it takes --labels "
                                f"{' or '.join(spec.labels)})")
        local = [name for name in ("local_lr", "local_epochs", "local_batch_size") if getattr(self, name) is not None]
        if local and observe != "fedavg":
            raise SplitlabError(f"--{local[0].replace('_', '-')} is a FedAvg client's: it applies to --observe "
                                f"fedavg only, not {observe}")
        if self.local_batch_size is not None and self.local_batch_size > self.batch_size:
            raise SplitlabError(f"--local-batch-size {self.local_batch_size} exceeds --batch-size {self.batch_size}")
        if self.secure_aggregation > 1 and not spec.aggregates:
            raise SplitlabError(f"--secure-aggregation does not apply to {spec.name} (it attacks one client's upload)")
        hfl_model_spec(self.arch)
        datasets.require_images(self.dataset, spec.name)
        check_hfl_input(self.arch, datasets.dataset_spec(self.dataset).image_shape)
        defence = parse_defence(self.defence)
        resolve_device(self.device)
        if spec.check is not None:
            spec.check(self, settings, observation_options)
        return Plan(spec, settings, observe, labels, observation_options, defence)

    def local(self, name: str) -> Any:
        """A FedAvg local hyperparameter, its default where not given."""
        value = getattr(self, name)
        return (FEDAVG_DEFAULTS.get(name, self.batch_size) if value is None else value)


@dataclass(frozen=True, eq=False)
class Prepared:
    """Everything validated, nothing written: the attack, the observation and the private ground truth."""
    config: HFLConfig
    attack: Any
    observation: Observation
    truth: Truth
    provenance: str
    device: torch.device
    facts: dict[str, Any] = field(default_factory=dict)
    """Facts of the observation for metrics.json (a trace's rounds and alignment accuracy, diagnostics)."""
    images: list[int] = field(default_factory=list)
    """The train-split indices of the client's batch (the private images the attack is scored on)."""

    @property
    def spec(self) -> AttackSpec:
        return self.config.plan.spec

    @property
    def settings(self) -> Any:
        return self.config.plan.settings

    def record(self) -> dict[str, Any]:
        """The resolved config for config.json."""
        c, plan = self.config, self.config.plan
        config = {k: v for k, v in asdict(c).items()}
        return {"hfl": config, "settings": asdict(plan.settings), "attack": plan.spec.name,
                "attack_origin": registry.origin(plan.spec.name),
                "observation_options": None if plan.observation_options is None else asdict(plan.observation_options),
                "defence": plan.defence.spec, "observation": self.observation.kind, "labels": plan.labels,
                "model_params": sum(p.numel() for p in self.observation.model.params.values()),
                "device": str(self.device), "dataset_provenance": self.provenance,
                "images": self.images}


def prepare(config: HFLConfig, *, dtype: torch.dtype = torch.float32) -> Prepared:
    """Load the batch, build the model, observe the client's upload, check the attack serves it."""
    plan = config.plan
    spec, settings = plan.spec, plan.settings
    data = datasets.load(config.dataset, "train", config.data_root, config.seed, config.data_draw)
    images = config.secure_aggregation * config.batch_size      # every aggregated client's batch
    if config.index + images > len(data):
        raise SplitlabError(f"--batch-size {config.batch_size} from --index {config.index} needs "
                            f"{config.index + images} images but the {config.dataset} train split "
                            f"has {len(data)}")
    order = image_order(config, len(data))
    if config.images == "seed":
        data = data.subset(order)
    device = resolve_device(config.device)
    shape = datasets.dataset_spec(config.dataset)
    model = build_hfl_model(config.arch, shape.image_shape, shape.num_classes, seed=config.seed).to(device, dtype)
    if config.pretrain_epochs:
        pretrain(model, datasets.load(config.dataset, "test", config.data_root, config.seed, config.data_draw), epochs=config.pretrain_epochs,
                 seed=config.seed)
    x = data.images[config.index:config.index + images].to(device, dtype)
    y = data.labels[config.index:config.index + images].to(device)
    noise = torch.Generator().manual_seed(config.seed + 1)
    reveal = plan.labels == "known"
    facts: dict[str, Any] = {}
    if spec.observe is not None:
        observation, facts = spec.observe(config, model, data, plan.defence, reveal, settings,
                                          plan.observation_options)
    else:
        def upload(x, y):
            if plan.observe == "fedsgd":
                return observe_fedsgd(model, x, y, arch=config.arch, defence=plan.defence, generator=noise,
                                      reveal_labels=reveal)
            return observe_fedavg(model, x, y, lr=config.local("local_lr"), epochs=config.local("local_epochs"),
                                  batch_size=config.local("local_batch_size"), arch=config.arch,
                                  defence=plan.defence, generator=noise, reveal_labels=reveal)

        observation = observe_clients(upload, x, y, config.secure_aggregation)
    attack = spec.make(settings)
    attack.check(observation)
    if spec.diagnostics is not None:
        facts |= spec.diagnostics(observation, settings)
    return Prepared(config, attack, observation, Truth(x, y), data.provenance, device, facts,
                    order[config.index:config.index + len(y)].tolist())


def image_order(config: HFLConfig, n: int) -> torch.Tensor:
    """The train split's order the client's batch is cut from: as stored, or shuffled by the seed (its own
    generator, so the model's initialisation and every other draw stay as they were)."""
    if config.images == "index":
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(config.seed))


def execute(prepared: Prepared, run: Run | None = None, *, lpips: LpipsMetric | Unavailable | None = None,
            fid: FidMetric | Unavailable | None = None, progress: bool = True) -> Outcome:
    """Attack, score and write the run directory through the one driver."""
    c, plan = prepared.config, prepared.config.plan
    title = (f"{plan.spec.name} on {c.arch}, {c.dataset}, batch {c.batch_size}, defence {plan.defence.spec}")
    if run is not None:
        run.log(f"{plan.spec.name} ({plan.settings.preset}) on {c.arch}, {c.dataset} images {prepared.images} "
                f"({c.images}), defence {plan.defence.spec}, {c.mode} trials")
    facts = {"arch": c.arch, "dataset": c.dataset, "batch_size": c.batch_size,
             "secure_aggregation": c.secure_aggregation, "defence": plan.defence.spec,
             "observation": prepared.observation.kind, **prepared.facts}
    return attack_and_score(plan.spec, prepared.attack, prepared.observation, prepared.truth, run=run, seed=c.seed,
                            mode=c.mode, progress=progress, lpips=lpips, fid=fid, facts=facts, title=title)

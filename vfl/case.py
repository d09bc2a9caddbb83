"""One split-learning case: the one declaration of a split victim, whatever attacks it.

A case holds the data and the task (the dataset's classes, or one class against the rest: `task`, `positive`),
the model and where it is split (`arch`, `cut_layer`, `top`), the feature parties (`parties`, `partition`) and how
the label party joins them (`aggregate`), the training (epochs, batch size, learning rate, optimiser) and the
defences at every point of the protocol: the feature party's (`defence`) and the label party's (`send_back`).
`splitlab train` trains one; every split attack family attacks one (`vfl.training.train_split` trains it through
the protocol), and a family's own defaults are a mapping over these fields (`attacks.split.experiment`), never
fields declared again.

The label party's model (`top`) is

- `model`: the architecture's layers after `cut_layer` (two-party split learning);
- `linear`: its output layer only, the feature party holding everything before it (U-shaped split learning, as
  UnSplit's label inference attacks assume);
- `none`: no model: the feature party's model computes the class scores and the label party sums them and trains
  nothing (vertical FL without model splitting; with K parties aggVFL, `aggregate sum`, the same thing).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Mapping

from vfl import data as datasets
from vfl.defences import check_send_back, parse_spec
from vfl.errors import SplitlabError
from vfl.models import arch_spec, check_cut_layer, check_input_shape, ends_dense, output_cut, wide_logits
from vfl.options import Runtime, choice, integer, number, option, text
from vfl.parties import (AGGREGATES, MAX_PARTIES, PARTITION_RULES, PARTITIONS, activation_shapes, check_partition,
                         check_parties, party_columns, party_groups, score_model, strip_shape)
from vfl.protocol import OPTIMIZERS
from vfl.runtime import resolve_device
from vfl.tasks import TASKS, check_task, task_classes
from vfl.validate import check_int

__all__ = ["SplitCase", "TOPS", "MAX_EPOCHS", "MAX_BATCH_SIZE", "with_defaults"]

MAX_EPOCHS, MAX_BATCH_SIZE = 100_000, 1_000_000
"""Far above any run here; they catch a typo (an extra digit) before hours of training are queued."""

TOPS = ("model", "linear", "none")


# These two checks build the parties' models (milliseconds each, seeded or on the meta device, so they draw nothing
# from torch's global generator) and their outcome depends only on their arguments; a grid checks thousands of
# cases of a handful of shapes (a matrix's pairs: 1,233 cases, 3,170 CNNs built), so each passed check is
# remembered. A failed one raises and is not remembered.

@functools.lru_cache(maxsize=1024)
def _check_parties_fit(arch: str, parties: int, cut: int, image_shape: tuple[int, ...]) -> None:
    check_parties(parties, arch, cut, image_shape)


@functools.lru_cache(maxsize=1024)
def _check_scores_fit(arch: str, parties: int, image_shape: tuple[int, ...], classes: int) -> None:
    check_int("--parties", parties, low=1, high=min(MAX_PARTIES, image_shape[-1]))
    for party in range(parties):                # raises if a party's columns are too few for the layers
        score_model(arch, 0, parties, party, strip_shape(image_shape, parties, party), classes)


@dataclass(frozen=True, kw_only=True)
class SplitCase(Runtime):
    """Split learning on a labelled task. Defaults are the JAST paper's (Adam 1e-3 amsgrad, batch 64, 10 epochs).
    Every name and number is checked when the case is built, before anything is loaded or written."""
    dataset: str = option("mnist5k", "Dataset (see `splitlab datasets`).", text())
    arch: str = option("cnn", "Architecture (see `splitlab models`).", text())
    cut_layer: int = option(1, "Cut layer: the client holds layers 0..cut (with --top model).",
                            integer(low=0, high=1000))
    top: str = option("model", "The label party's model: model (the layers after --cut-layer), linear (the output "
                      "layer only: U-shaped) or none (no model: it sums the class scores it receives; --aggregate "
                      "sum).", choice(TOPS))
    epochs: int = option(10, "Training epochs.", integer(low=1, high=MAX_EPOCHS))
    batch_size: int = option(64, "Mini-batch size (one protocol round each).", integer(low=1, high=MAX_BATCH_SIZE))
    lr: float = option(1e-3, "Learning rate of client and server.", number(low=0, low_open=True))
    optimizer: str = option("adam-amsgrad", "sgd, momentum, adam or adam-amsgrad.", choice(OPTIMIZERS))
    task: str = option("multiclass", "multiclass (the dataset's classes) or binary (one class, --positive, against "
                       "the rest: the label party's output layer then has two units).", choice(TASKS))
    positive: int = option(0, "The positive class of --task binary (on mnist5k one digit: 10% of the samples).",
                           integer(low=0, high=999))
    defence: str = option("none", "The feature party's defences (input, activations sent, gradient received): none "
                          "or name[:key=value,...] items joined by + (see `splitlab defences`); with --parties K each "
                          "party applies them to its strip.", text())
    send_back: str = option("none", "The label party's defences on the cut gradient it sends back: none or "
                            "name[:key=value,...] items joined by + (see `splitlab defences`), e.g. marvell:scale=1.",
                            text())
    parties: int = option(1, "Feature parties K, each holding a vertical strip of every image (1: classic split "
                          "learning on whole images).", integer(low=1, high=64))
    partition: str = option("contiguous", "How --parties K split the columns: contiguous (party k holds the k-th "
                            "block: an image's vertical strip), random (tabular data only: as many columns each, "
                            "drawn from --seed) or correlation (tabular data only: columns ranked by |correlation "
                            "with the label| on the training split, dealt round-robin).", choice(PARTITIONS))
    aggregate: str = option("concat", "How the label party joins the parties' outputs: concat (its top model, the "
                            "layers after --cut-layer, takes their activations side by side) or sum (aggVFL: each "
                            "party's model is the whole architecture sending class scores, the label party sums them "
                            "and trains nothing; --cut-layer is not used; --top none).", choice(AGGREGATES))

    def __post_init__(self) -> None:
        # `top none` and `aggregate sum` are one setting (the label party sums class scores): each implies the other
        if self.top == "none" or self.aggregate == "sum":
            if self.top == "linear":
                raise SplitlabError("--top linear gives the label party the output layer, --aggregate sum no model: "
                                    "drop one of them")
            object.__setattr__(self, "top", "none")
            object.__setattr__(self, "aggregate", "sum")
        if self.top == "linear" and isinstance(self.arch, str) and isinstance(self.cut_layer, int):
            try:                                    # the cut sits before the output layer
                object.__setattr__(self, "cut_layer", output_cut(self.arch))
            except SplitlabError:
                pass                                # an unknown architecture: refused by `check`, naming it
        super().__post_init__()

    def check(self) -> None:
        spec = arch_spec(self.arch)
        found = datasets.dataset_spec(self.dataset)
        image_shape = found.image_shape
        check_input_shape(spec, image_shape, self.dataset)
        wide = wide_logits(self.arch)
        if wide and self.classes != wide:
            raise SplitlabError(f"--dataset {self.dataset} (--task {self.task}) has {self.classes} classes; "
                                f"{self.arch}'s wide part sends {wide} logits beside its deep part: use tabular-embed "
                                "or tabular-mlp, or --task binary")
        if spec.grouped and found.tabular is not None and not found.tabular.records_groups:
            raise SplitlabError(f"architecture {self.arch} embeds categorical columns, but dataset {self.dataset}'s "
                                "reader does not record its one-hot groups; use --arch tabular-mlp")
        if self.top == "model":
            check_cut_layer(spec, self.cut_layer)
        elif not ends_dense(self.arch):
            raise SplitlabError(f"--top {self.top} takes the output layer from the architecture; {self.arch} does not "
                                "end in a dense layer: use cnn, mlp or small-mlp, or --top model")
        if self.aggregate == "sum":
            _check_scores_fit(self.arch, self.parties, tuple(image_shape), self.classes)
        else:
            _check_parties_fit(self.arch, self.parties, self.cut_layer, tuple(image_shape))
        check_partition(self.partition, image_shape)
        check_task(self.task, self.positive, self.dataset)
        for party in range(self.parties):
            parse_spec(self.defence, strip_shape(image_shape, self.parties, party), flat_input=spec.flat_input,
                       labels_sent=self.parties == 1)
        check_send_back(self.send_back, self.classes, label_model=self.aggregate == "concat")
        resolve_device(self.device)

    @property
    def classes(self) -> int:
        return task_classes(self.task, self.dataset)

    @property
    def image_shape(self) -> tuple[int, ...]:
        return tuple(datasets.dataset_spec(self.dataset).image_shape)

    @property
    def where(self) -> str:
        """The cut in words, for titles."""
        return {"model": f"cut {self.cut_layer}", "linear": "U-shaped (label party: output layer)",
                "none": "no top model"}[self.top]

    def cut_shapes(self) -> list[tuple[int, ...]]:
        """The per-example shape of what each party sends: its cut activations, or its class scores (sum)."""
        if self.aggregate == "sum":
            return [(self.classes,)] * self.parties
        return activation_shapes(self.arch, self.cut_layer, self.image_shape, self.parties)

    def feature_partition(self) -> dict[str, Any]:
        """What a run records of how its parties split the columns (of an image's last axis, or a tabular sample)."""
        record = {"partition": self.partition, "parties": self.parties, "rule": PARTITION_RULES[self.partition],
                  "columns": party_columns(self.image_shape[-1], self.parties, self.partition, self.seed,
                                           self.dataset, self.data_root)}
        if arch_spec(self.arch).grouped:           # what each party's embedding was built for
            record["groups"] = [[list(span) for span in party_groups(self.arch, self.dataset, self.parties, k,
                                                                      self.partition, self.seed, self.data_root)]
                                for k in range(self.parties)]
            record["groups_rule"] = ("[start, stop) of each categorical column's one-hot columns within the party's "
                                     "own columns (the argmax of a group is the category's index), each embedded")
        return record


def with_defaults(case: type, defaults: Mapping[str, Any]) -> type:
    """`case` with a family's defaults in place of its own, for the family's class to subclass: the same fields
    (options, checks, help, order), only other default values, so a family's defaults stay a mapping over the
    case's fields and its class is built with them when a field is not given."""
    fields = {f.name: f for f in dataclasses.fields(case)}
    unknown = sorted(set(defaults) - set(fields))
    if unknown:
        raise ValueError(f"{case.__name__} has no field {unknown[0]!r}")
    namespace: dict[str, Any] = {"__annotations__": {}, "__module__": case.__module__,
                                 "__doc__": f"{case.__name__} with other defaults: {dict(defaults)}."}
    for name, value in defaults.items():
        namespace["__annotations__"][name] = fields[name].type
        namespace[name] = dataclasses.field(default=value, metadata=fields[name].metadata)
    return dataclass(frozen=True, kw_only=True)(type(f"{case.__name__}Defaults", (case,), namespace))

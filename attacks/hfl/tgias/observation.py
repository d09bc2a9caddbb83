"""What TGIAs-RO observes: a trace of FL rounds (`trace.py`), its options, and the spec's hooks that check
them and build the trace for `splitlab hfl --attack tgias-ro`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attacks.kit import (MAX_HFL_EPOCHS, ImageData, SplitlabError, UploadDefence, Validated, choice, integer, number,
                         option, optional)
from attacks.hfl.tgias.trace import (INVALID_KINDS, LOCAL_BATCHES, Trace, align, alignment_accuracy, client_data,
                                     converged_model, flat_gradient, observe_trace, rand_index)

__all__ = ["TraceOptions", "check", "observe", "MAX_TRAINED_IMAGES", "TRAINED_STEPS"]

MAX_TRAINED_IMAGES = 4096
"""The clients' images trained on in one batch for --invalid-kind trained."""
TRAINED_STEPS = 2000


@dataclass(frozen=True, kw_only=True)
class TraceOptions(Validated):
    """The FL trace the server logs: K clients, of which client 0 holds the target batch, the fraction sampled
    per round and the server's SGD lr; the last `invalid` of the T sightings replaced by gradients of
    `invalid_kind`; `trained_steps` full-batch Adam steps train the model behind `trained` ones on the clients'
    data (the paper's "standard settings" are unstated: 2,000 steps take the sigmoid LeNet on 48 images to a
    loss near 5e-4 and the target batch's gradient norm from about 5 at the last valid sighting to about 0.01,
    Prop. 1's converged model)."""
    clients: int = option(4, "FL clients K; client 0 holds the target batch.", integer(low=1, high=10_000))
    local_batches: int = option(LOCAL_BATCHES, "batches each client holds; the target batch comes back about once "
                                "every this many rounds.", integer(low=1, high=10_000))
    sample_fraction: float = option(1.0, "fraction of clients sampled per round.", number(low=0, high=1, low_open=True))
    server_lr: float = option(0.1, "the server's SGD learning rate.", number(low=0, high=1e3))
    invalid: int = option(0, "how many of the T temporal gradients are invalid.", integer(low=0, high=1000))
    invalid_kind: str = option("other-batch", "trained (the batch's gradient at a model converged on the clients' "
                               "data), other-batch or noise.", choice(INVALID_KINDS))
    trained_steps: int | None = option(None, f"--invalid-kind trained: full-batch Adam steps that train that model "
                                       f"on the clients' images (default {TRAINED_STEPS}).",
                                       optional(integer(low=1, high=MAX_HFL_EPOCHS)))

    def check(self) -> None:
        if self.trained_steps is not None and not self.trained:
            raise SplitlabError("--trained-steps applies to --invalid M --invalid-kind trained only")

    @property
    def trained(self) -> bool:
        return bool(self.invalid) and self.invalid_kind == "trained"

    @property
    def steps(self) -> int:
        return TRAINED_STEPS if self.trained_steps is None else self.trained_steps


def check(config, settings, trace: TraceOptions) -> None:
    """The spec's `check` hook: the trace against the batch, the dataset and the attack's settings (before
    anything is loaded)."""
    held = trace.clients * trace.local_batches * config.batch_size
    if trace.trained and held > MAX_TRAINED_IMAGES:
        raise SplitlabError(f"--invalid-kind trained trains on all {held} client images in one batch; at most "
                            f"{MAX_TRAINED_IMAGES}: lower --clients or --batch-size")
    if trace.invalid > settings.temporal:
        raise SplitlabError(f"--invalid {trace.invalid} exceeds the {settings.temporal} temporal gradients")
    if settings.aggregator != "joint" and config.mode == "sequential":
        raise SplitlabError("--mode sequential applies to the joint form only (Algorithm 1 aggregates its copies "
                            "between rounds, so they run together)")


def observe(config, model: nn.Module, data: ImageData, defence: UploadDefence, reveal: bool, settings,
            trace: TraceOptions) -> tuple[Any, dict[str, Any]]:
    """The spec's `observe` hook: the trace the server logs for this config, and facts for metrics.json
    (alignment of client 0's uploads, how large the invalid uploads are against the valid ones)."""
    temporal = settings.temporal
    held = trace.clients * trace.local_batches * config.batch_size
    if held > len(data):                    # the clients' batches are distinct images of the train split
        raise SplitlabError(f"--clients {trace.clients} hold {trace.local_batches} batches of {config.batch_size} "
                            f"each, {held} images, more than the {len(data)} of the {config.dataset} train split; "
                            "lower --clients, --local-batches or --batch-size")
    trained, facts = None, {}
    if trace.trained:
        held = client_data(data, clients=trace.clients, batch_size=config.batch_size, index=config.index,
                           local_batches=trace.local_batches)
        trained, facts["trained_loss"] = converged_model(model, held, steps=trace.steps, seed=config.seed)
    logged: Trace = observe_trace(model, data, batch_size=config.batch_size, temporal=temporal, index=config.index,
                                  clients=trace.clients, sample_fraction=trace.sample_fraction,
                                  server_lr=trace.server_lr, local_batches=trace.local_batches,
                                  invalid=trace.invalid, invalid_kind=trace.invalid_kind,
                                  trained=trained, arch=config.arch, defence=defence, seed=config.seed,
                                  reveal_labels=reveal)
    clusters = align(logged.client_log)
    facts |= {"fl_rounds": logged.rounds, "target_rounds": list(logged.log.round_numbers), "invalid": trace.invalid,
              "invalid_kind": trace.invalid_kind if trace.invalid else None,
              "alignment_accuracy": alignment_accuracy(clusters, logged.client_batches),
              "alignment_rand_index": rand_index(clusters, logged.client_batches),
              "alignment_clusters": len(set(clusters)), "client_batches_seen": len(set(logged.client_batches))}
    if 0 < trace.invalid < temporal:
        norms = torch.stack([flat_gradient(u).norm() for u in logged.log.rounds]).tolist()    # one host read
        valid, invalid = norms[:temporal - trace.invalid], norms[temporal - trace.invalid:]
        facts["invalid_norm_ratio"] = (sum(invalid) / len(invalid)) / max(sum(valid) / len(valid), 1e-30)
    return logged.log, facts

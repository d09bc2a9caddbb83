"""`splitlab hfl --attack tgias-ro --observe rounds`: the config checks and the FL trace
behind it (kept here so `attacks.hfl.experiment` only dispatches)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from attacks.hfl.defences import Defence
from attacks.hfl.trace import (INVALID_KINDS, LOCAL_BATCHES, Trace, align, alignment_accuracy, client_data,
                               converged_model, flat_gradient, observe_trace)
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.hfl_training import MAX_EPOCHS
from vfl.validate import check_choice, check_int, check_number

__all__ = ["TraceOptions", "TRACE_OPTIONS", "validate_trace", "observe_for"]

MAX_TRAINED_IMAGES = 4096           # the clients' images trained on in one batch for --invalid-kind trained


@dataclass(frozen=True)
class TraceOptions:
    """The FL trace `--observe rounds` logs (`HFLConfig.trace`): K clients, of which client 0 holds the
    target batch, the fraction sampled per round and the server's SGD lr; the last `invalid` of the T
    sightings replaced by gradients of `invalid_kind`; `trained_steps` full-batch Adam steps train the model
    behind `trained` ones on the clients' data (the paper's "standard settings" are unstated: 2,000 steps
    take the sigmoid LeNet on 48 images to a loss near 5e-4 and the target batch's gradient norm from
    about 5 at the last valid sighting to about 0.01, Prop. 1's converged model)."""
    clients: int = 4
    sample_fraction: float = 1.0
    server_lr: float = 0.1
    invalid: int = 0
    invalid_kind: str = "other-batch"
    trained_steps: int = 2000


TRACE_OPTIONS = tuple(f.name for f in fields(TraceOptions))


def validate_trace(config) -> None:
    """Numbers of the FL trace (`--observe rounds`), checked before anything is loaded."""
    if (config.attack == "tgias-ro") != (config.observe == "rounds"):
        raise SplitlabError("--attack tgias-ro observes a trace of rounds: use it with --observe rounds "
                            "(and --observe rounds with tgias-ro)")
    trace = config.trace
    if config.observe != "rounds":
        given = [name for name in TRACE_OPTIONS if getattr(trace, name) != getattr(TraceOptions(), name)]
        if given:
            raise SplitlabError(f"--{given[0].replace('_', '-')} describes the FL trace: it applies to "
                                "--observe rounds only")
        return
    check_int("--clients", trace.clients, low=1, high=100_000)
    check_number("--sample-fraction", trace.sample_fraction, low=0, high=1, low_open=True)
    check_number("--server-lr", trace.server_lr, low=0)
    check_int("--invalid", trace.invalid, low=0, high=1000)
    check_choice("--invalid-kind", trace.invalid_kind, INVALID_KINDS)
    check_int("--trained-steps", trace.trained_steps, low=1, high=MAX_EPOCHS)
    trained = trace.invalid and trace.invalid_kind == "trained"
    if trace.trained_steps != TraceOptions.trained_steps and not trained:
        raise SplitlabError("--trained-steps applies to --invalid M --invalid-kind trained only")
    held = trace.clients * LOCAL_BATCHES * config.batch_size
    if trained and held > MAX_TRAINED_IMAGES:
        raise SplitlabError(f"--invalid-kind trained trains on all {held} client images in one batch; at most "
                            f"{MAX_TRAINED_IMAGES}: lower --clients or --batch-size")
    settings = config.settings()
    if trace.invalid > settings.temporal:
        raise SplitlabError(f"--invalid {trace.invalid} exceeds the {settings.temporal} temporal gradients")
    applies = {"trim_beta": settings.aggregator == "trimmed", "krum_f": settings.aggregator == "krum",
               "carry_state": settings.aggregator != "joint"}
    for name, ok in applies.items():
        if config.options.get(name) is not None and not ok:
            raise SplitlabError(f"--{name.replace('_', '-')} does not apply to --aggregator {settings.aggregator}")
    if settings.aggregator == "krum" and settings.krum_f > settings.temporal - 3:
        raise SplitlabError(f"Krum with f = {settings.krum_f} needs T >= f + 3 temporal gradients, not "
                            f"{settings.temporal}; lower --krum-f or raise --temporal")
    if settings.aggregator != "joint" and config.trials == "sequential":
        raise SplitlabError("--trials sequential applies to the joint form only (Algorithm 1 aggregates its copies "
                            "between rounds, so they run together)")


def observe_for(config, model: nn.Module, data: datasets.ImageData, defence: Defence, reveal: bool,
                temporal: int) -> tuple[Trace, dict[str, Any]]:
    """The trace the server logs for this config and facts for metrics.json (alignment of client 0's uploads,
    how large the invalid uploads are against the valid ones)."""
    t = config.trace
    trained, facts = None, {}
    if t.invalid and t.invalid_kind == "trained":
        held = client_data(data, clients=t.clients, batch_size=config.batch_size, index=config.index)
        trained, facts["trained_loss"] = converged_model(model, held, steps=t.trained_steps, seed=config.seed)
    trace = observe_trace(model, data, batch_size=config.batch_size, temporal=temporal, index=config.index,
                          clients=t.clients, sample_fraction=t.sample_fraction, server_lr=t.server_lr,
                          invalid=t.invalid, invalid_kind=t.invalid_kind, trained=trained, arch=config.arch,
                          defence=defence, seed=config.seed, reveal_labels=reveal)
    clusters = align(trace.client_log)
    facts |= {"fl_rounds": trace.rounds, "target_rounds": list(trace.log.round_numbers), "invalid": t.invalid,
              "invalid_kind": t.invalid_kind if t.invalid else None,
              "alignment_accuracy": alignment_accuracy(clusters, trace.client_batches),
              "alignment_clusters": len(set(clusters)), "client_batches_seen": len(set(trace.client_batches))}
    if 0 < t.invalid < temporal:
        norms = torch.stack([flat_gradient(u).norm() for u in trace.log.rounds]).tolist()    # one host read
        valid, invalid = norms[:temporal - t.invalid], norms[temporal - t.invalid:]
        facts["invalid_norm_ratio"] = (sum(invalid) / len(invalid)) / max(sum(valid) / len(valid), 1e-30)
    return trace, facts

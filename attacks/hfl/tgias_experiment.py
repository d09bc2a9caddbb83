"""`splitlab hfl --attack tgias-ro --observe rounds`: the config checks and the FL trace
behind it (kept here so `attacks.hfl.experiment` only dispatches)."""
from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

import torch
from torch import nn

from attacks.hfl.defences import Defence
from attacks.hfl.trace import INVALID_KINDS, Trace, align, alignment_accuracy, observe_trace
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.hfl_training import pretrain
from vfl.validate import check_choice, check_int, check_number

__all__ = ["TRACE_OPTIONS", "validate_trace", "observe_for", "PRETRAIN_EPOCHS"]

PRETRAIN_EPOCHS = 5
"""Epochs of `pretrain` (Adam 1e-3, batch 64, on the test split) for `--invalid-kind trained`: the
paper's "trained" models are trained "with standard settings" (unstated); 5 epochs of mnist5k's
1000 test images bring LeNet's gradient norm down by an order of magnitude or more."""


TRACE_OPTIONS = ("clients", "sample_fraction", "server_lr", "invalid", "invalid_kind")
"""HFLConfig fields that describe the FL trace: they apply to --observe rounds only."""


def validate_trace(config) -> None:
    """Numbers of the FL trace (`--observe rounds`), checked before anything is loaded."""
    if (config.attack == "tgias-ro") != (config.observe == "rounds"):
        raise SplitlabError("--attack tgias-ro observes a trace of rounds: use it with --observe rounds "
                            "(and --observe rounds with tgias-ro)")
    if config.observe != "rounds":
        defaults = {f.name: f.default for f in fields(config)}
        given = [name for name in TRACE_OPTIONS if getattr(config, name) != defaults[name]]
        if given:
            raise SplitlabError(f"--{given[0].replace('_', '-')} describes the FL trace: it applies to "
                                "--observe rounds only")
        return
    check_int("--clients", config.clients, low=1, high=100_000)
    check_number("--sample-fraction", config.sample_fraction, low=0, high=1, low_open=True)
    check_number("--server-lr", config.server_lr, low=0)
    check_int("--invalid", config.invalid, low=0, high=1000)
    check_choice("--invalid-kind", config.invalid_kind, INVALID_KINDS)
    settings = config.settings()
    if config.invalid > settings.temporal:
        raise SplitlabError(f"--invalid {config.invalid} exceeds the {settings.temporal} temporal gradients")
    applies = {"trim_beta": settings.aggregator == "trimmed", "krum_f": settings.aggregator == "krum",
               "carry_state": settings.aggregator != "joint"}
    for name, ok in applies.items():
        if getattr(config, name) is not None and not ok:
            raise SplitlabError(f"--{name.replace('_', '-')} does not apply to --aggregator {settings.aggregator}")
    if settings.aggregator == "krum" and settings.krum_f > settings.temporal - 3:
        raise SplitlabError(f"Krum with f = {settings.krum_f} needs T >= f + 3 temporal gradients, not "
                            f"{settings.temporal}; lower --krum-f or raise --temporal")
    if settings.aggregator != "joint" and config.trials == "sequential":
        raise SplitlabError("--trials sequential applies to the joint form only (Algorithm 1 aggregates its copies "
                            "between rounds, so they run together)")


def observe_for(config, model: nn.Module, data: datasets.ImageData, defence: Defence, reveal: bool,
                temporal: int) -> tuple[Trace, dict[str, Any]]:
    """The trace the server logs for this config and facts for metrics.json (alignment of client 0's uploads)."""
    trained = None
    if config.invalid and config.invalid_kind == "trained":
        trained = _trained(model, config)
    trace = observe_trace(model, data, batch_size=config.batch_size, temporal=temporal, index=config.index,
                          clients=config.clients, sample_fraction=config.sample_fraction, server_lr=config.server_lr,
                          invalid=config.invalid, invalid_kind=config.invalid_kind, trained=trained, arch=config.arch,
                          defence=defence, seed=config.seed, reveal_labels=reveal)
    clusters = align(trace.client_log)
    facts = {"fl_rounds": trace.rounds, "target_rounds": list(trace.log.round_numbers), "invalid": config.invalid,
             "invalid_kind": config.invalid_kind if config.invalid else None,
             "alignment_accuracy": alignment_accuracy(clusters, trace.client_batches),
             "alignment_clusters": len(set(clusters)), "client_batches_seen": len(set(trace.client_batches))}
    return trace, facts


def _trained(model: nn.Module, config) -> nn.Module:
    trained = copy.deepcopy(model)
    held_out = datasets.load(config.dataset, "test", config.data_root)
    device = next(model.parameters()).device
    with torch.enable_grad():
        for p in trained.parameters():
            p.requires_grad_(True)
        pretrain(trained.to(device), held_out, epochs=PRETRAIN_EPOCHS, seed=config.seed)
    return trained

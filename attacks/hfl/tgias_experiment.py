"""`splitlab hfl --attack tgias-ro --observe rounds`: the config checks, settings overrides and FL trace
behind it (kept here so `attacks.hfl.experiment` only dispatches)."""
from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from attacks.hfl.defences import Defence
from attacks.hfl.tgias_settings import FORMS, TGIAsSettings
from attacks.hfl.trace import INVALID_KINDS, Trace, align, alignment_accuracy, observe_trace
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.hfl_training import pretrain
from vfl.validate import check_choice, check_int, check_number

__all__ = ["tgias_settings", "validate_trace", "observe_for", "PRETRAIN_EPOCHS"]

PRETRAIN_EPOCHS = 5
"""Epochs of `pretrain` (Adam 1e-3, batch 64, on the test split) for `--invalid-kind trained`: the
paper's "trained" models are trained "with standard settings" (unstated); 5 epochs of mnist5k's
1000 test images bring LeNet's gradient norm down by an order of magnitude or more."""


def tgias_settings(settings: TGIAsSettings, config) -> TGIAsSettings:
    """The preset with the config's overrides: --temporal, --aggregator, --iterations (R_g), --local-steps (R_l),
    --layer-ramp, --trim-beta, --krum-f, --carry-state."""
    if config.restarts is not None:
        raise SplitlabError("--restarts does not apply to tgias-ro (Algorithm 1's trials are its temporal copies)")
    if config.tv is not None:
        raise SplitlabError("--tv applies to invgrad only (tgias-ro uses no prior)")
    if config.temporal is not None:
        settings = replace(settings, temporal=check_int("--temporal", config.temporal, low=1, high=1000))
    if config.aggregator is not None:
        settings = replace(settings, aggregator=check_choice("--aggregator", config.aggregator, FORMS))
    if config.iterations is not None:
        settings = replace(settings, rounds=config.iterations)
    if config.local_steps is not None:
        settings = replace(settings, local_steps=check_int("--local-steps", config.local_steps, low=1, high=100_000))
    if config.layer_ramp is not None:
        settings = replace(settings, ramp=config.layer_ramp)
    if config.trim_beta is not None:
        settings = replace(settings, beta=check_number("--trim-beta", config.trim_beta, low=0, high=0.5,
                                                       high_open=True))
    if config.krum_f is not None:
        settings = replace(settings, krum_f=check_int("--krum-f", config.krum_f, low=0, high=1000))
    if config.carry_state:
        settings = replace(settings, reset=False)
    if settings.aggregator != "joint" and config.trials == "sequential":
        raise SplitlabError("--trials sequential applies to the joint form only (Algorithm 1 aggregates its copies "
                            "between rounds, so they run together)")
    return settings


def validate_trace(config) -> None:
    """Numbers of the FL trace (`--observe rounds`), checked before anything is loaded."""
    if (config.attack == "tgias-ro") != (config.observe == "rounds"):
        raise SplitlabError("--attack tgias-ro observes a trace of rounds: use it with --observe rounds "
                            "(and --observe rounds with tgias-ro)")
    check_int("--clients", config.clients, low=1, high=100_000)
    check_number("--sample-fraction", config.sample_fraction, low=0, high=1, low_open=True)
    check_number("--server-lr", config.server_lr, low=0)
    check_int("--invalid", config.invalid, low=0, high=1000)
    check_choice("--invalid-kind", config.invalid_kind, INVALID_KINDS)
    if config.attack != "tgias-ro":
        return
    temporal = config.settings().temporal
    if config.invalid > temporal:
        raise SplitlabError(f"--invalid {config.invalid} exceeds the {temporal} temporal gradients")


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

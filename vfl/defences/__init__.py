"""Defences, each one declaration (`DefenceSpec`) at its point of the protocol, in one registry.

The points (`spec.POINTS`): the feature party's input, the activations it sends and the gradient it receives
(its `--defence`) and the extra term of its training loss, the label party's training labels, its layers on
the activations it receives and its send-back (all three its `--send-back`), an HFL client's upload (`splitlab hfl
--defence`). `registry.chain` parses a spec (`none`, or `name[:key=value,...]` items joined by `+`) once, where a
config is built; `registry.build` makes the hooks. The functions here are that for each party.

    parse_defences("orthogonal+activation-noise:sigma=0.1", (1, 28, 28))    # the feature party's hooks
    parse_send_back("marvell:scale=1", classes=2)                            # the label party's
"""
from __future__ import annotations

import torch

from vfl.defences import registry
from vfl.defences.base import ClientDefence, SeededNoise
from vfl.defences.input_dp import DPInputNoise, analytic_gaussian_sigma, estimate_sensitivity
from vfl.defences.noise import ActivationNoise, GradientNoise
from vfl.defences.registry import Chosen, split_list as split_specs
from vfl.defences.spec import FEATURE_POINTS, LABEL_POINTS, DefenceSettings, DefenceSpec, Deviation, Where
from vfl.defences.transforms import (DEFAULT_PATCH, OrthogonalTransform, PatchOrthogonalTransform,
                                     SemiOrthogonalTransform, random_orthogonal)

__all__ = ["ClientDefence", "SeededNoise", "DPInputNoise", "ActivationNoise", "GradientNoise", "OrthogonalTransform",
           "SemiOrthogonalTransform", "PatchOrthogonalTransform", "random_orthogonal", "analytic_gaussian_sigma",
           "estimate_sensitivity", "DEFAULT_PATCH", "DefenceSpec", "DefenceSettings", "Deviation", "Where", "Chosen",
           "parse_spec", "parse_defences", "transformed_shape", "split_specs", "check_send_back", "parse_send_back",
           "report", "feature_reports"]


def parse_spec(spec: str, input_shape: tuple[int, ...] | None = None, flat_input: bool | None = None,
               labels_sent: bool | None = None) -> list[Chosen]:
    """The feature party's chain, checked without building anything; with `input_shape` (and `flat_input`), also
    that each defence fits the inputs it gets (a semi-orthogonal `dim` at least the input size, a patch size
    dividing the image); with `labels_sent`, that a defence changing the labels sent has labels to change."""
    chosen = registry.chain(spec, FEATURE_POINTS, "--defence")
    if input_shape is not None or labels_sent is not None:
        registry.check(chosen, Where(input_shape=None if input_shape is None else tuple(input_shape),
                                     flat_input=flat_input, labels_sent=labels_sent))
    return list(chosen)


def parse_defences(spec: str, input_shape: tuple[int, ...] = (1, 28, 28),
                   train_images: torch.Tensor | None = None) -> list[ClientDefence]:
    """The feature party's defences of a spec for inputs of `input_shape` (DP may estimate its sensitivity on
    `train_images`)."""
    return registry.build(parse_spec(spec), Where(input_shape=tuple(input_shape), train_images=train_images))


def transformed_shape(defences: list[ClientDefence], shape: tuple[int, ...]) -> tuple[int, ...]:
    for d in defences:
        shape = d.input_shape(shape)
    return tuple(shape)


def check_send_back(spec: str, classes: int, label_model: bool | None = None) -> list[Chosen]:
    """The label party's chain (`--send-back`: its labels, label-layers and send-back points), checked against the
    task (Marvell: binary only; layers: a label party with a model); nothing is built."""
    chosen = registry.chain(spec, LABEL_POINTS, "--send-back")
    registry.check(chosen, Where(classes=classes, label_model=label_model))
    return list(chosen)


def parse_send_back(spec: str, classes: int, activation_shape: tuple[int, ...] | None = None) -> list:
    """The label party's defences of a spec, for a task of `classes` classes whose label party receives
    activations of one example's shape `activation_shape` (what its layers are built for)."""
    shape = None if activation_shape is None else tuple(activation_shape)
    return registry.build(check_send_back(spec, classes), Where(input_shape=shape, classes=classes))


def report(*parties) -> dict:
    """What every defence of the given parties did over the run (each one's `report()`, merged), for metrics.json:
    a party is anything with `defences` (a client, a server), or K feature parties (`Parties`, whose reports
    are kept apart by `feature_reports`)."""
    merged: dict = {}
    for party in parties:
        clients = getattr(party, "clients", None)
        merged.update(feature_reports([_own_report(c) for c in clients]) if clients is not None
                      else _own_report(party))
    return merged


def _own_report(party) -> dict:
    merged: dict = {}
    for d in getattr(party, "defences", ()):
        found = getattr(d, "report", None)
        merged.update(found() if found is not None else {})
    return merged


def feature_reports(found: list[dict]) -> dict:
    """The feature parties' reports (party k's at `found[k]`) as one: a single party's as it is, K > 1 each under
    `party-K` (the parties run the same defences under the same names, so merged by key the last party's numbers
    would stand for every party's); a party with nothing to report is left out."""
    if len(found) == 1:
        return dict(found[0])
    return {f"party-{k}": dict(r) for k, r in enumerate(found) if r}

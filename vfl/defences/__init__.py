"""Defences, each one declaration (`DefenceSpec`) at its point of the protocol, in one registry.

The points (`spec.POINTS`): the feature party's input, the activations it sends and the gradient it receives
(its `--defence`), the label party's send-back (`--send-back`), an HFL client's upload (`splitlab hfl
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
from vfl.defences.spec import FEATURE_POINTS, DefenceSettings, DefenceSpec, Deviation, Where
from vfl.defences.transforms import (DEFAULT_PATCH, OrthogonalTransform, PatchOrthogonalTransform,
                                     SemiOrthogonalTransform, random_orthogonal)

__all__ = ["ClientDefence", "SeededNoise", "DPInputNoise", "ActivationNoise", "GradientNoise", "OrthogonalTransform",
           "SemiOrthogonalTransform", "PatchOrthogonalTransform", "random_orthogonal", "analytic_gaussian_sigma",
           "estimate_sensitivity", "DEFAULT_PATCH", "DefenceSpec", "DefenceSettings", "Deviation", "Where", "Chosen",
           "parse_spec", "parse_defences", "transformed_shape", "split_specs", "check_send_back", "parse_send_back"]


def parse_spec(spec: str, input_shape: tuple[int, ...] | None = None, flat_input: bool | None = None) -> list[Chosen]:
    """The feature party's chain, checked without building anything; with `input_shape` (and `flat_input`), also
    that each defence fits the inputs it gets (a semi-orthogonal `dim` at least the input size, a patch size
    dividing the image)."""
    chosen = registry.chain(spec, FEATURE_POINTS, "--defence")
    if input_shape is not None:
        registry.check(chosen, Where(input_shape=tuple(input_shape), flat_input=flat_input))
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


def check_send_back(spec: str, classes: int) -> list[Chosen]:
    """The label party's send-back chain, checked against the task (Marvell: binary only); nothing is built."""
    chosen = registry.chain(spec, ("send-back",), "--send-back")
    registry.check(chosen, Where(classes=classes))
    return list(chosen)


def parse_send_back(spec: str, classes: int) -> list:
    """The label party's send-back defences of a spec, for a task of `classes` classes."""
    return registry.build(check_send_back(spec, classes), Where(classes=classes))

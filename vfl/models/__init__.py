"""The model zoo: every architecture with its input shape, cut layers and activation shapes.

`ARCHITECTURES` is a plain table (no registration by import). `describe()` lists each
architecture's cut layers with client/server/total parameter counts (`splitlab models`).
"""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from vfl.errors import SplitlabError, lookup
from vfl.models.cifar import cifar_cnn, mlp_mixer
from vfl.models.hfl import HFL_MODELS, build_hfl_model, describe_hfl, hfl_model_spec
from vfl.models.mnist import cnn, mlp, small_mlp
from vfl.models.split import SplitNet, count_parameters
from vfl.models.tabular import TABULAR_SHAPES, Groups, tabular_embed, tabular_lr, tabular_mlp, tabular_wide_deep
from vfl.runtime import seeded


@dataclass(frozen=True)
class ArchSpec:
    name: str
    build: Callable[[], SplitNet]
    input_shape: tuple[int, int, int]
    num_classes: int
    activation_shapes: dict[int, tuple[int, ...]]
    """Cut layer -> shape of the activations the client sends (per example)."""
    source: str
    total_params: int | None = None
    """The paper's count for the whole model, checked by the tests, where the paper gives one."""
    notes: str = field(default="")
    flat_input: bool = False
    """Whether the first layer is Flatten + dense, so the client can take any number of input features."""
    tabular: bool = False
    """Whether it takes tabular samples, flat feature vectors of any width (`input_shape` is only its default)."""
    grouped: bool = False
    """Whether it embeds categorical columns: its build takes the one-hot groups of its input (`groups=`), so each
    party's bottom model is built for its own columns."""

    @property
    def cut_layers(self) -> tuple[int, ...]:
        return tuple(self.activation_shapes)


_CNN_SHAPES = {1: (8, 24, 24), 2: (8, 12, 12), 3: (16, 8, 8), 4: (16, 8, 8), 5: (16, 4, 4), 6: (120,)}
_CIFAR_CNN_SHAPES = {1: (64, 32, 32), 2: (64, 32, 32), 3: (64, 32, 32), 4: (64, 16, 16),
                     5: (128, 16, 16), 6: (128, 16, 16)}

ARCHITECTURES: dict[str, ArchSpec] = {
    spec.name: spec for spec in (
        ArchSpec("cnn", cnn, (1, 28, 28), 10, _CNN_SHAPES,
                 "UnSplit MnistNet; JAST Table 2 (45,278)", total_params=45_278),
        ArchSpec("mlp", mlp, (1, 28, 28), 10, {k: (1024,) for k in range(1, 7)},
                 "JAST four-layer MLP, hidden 1024; Table 2 (2,913,290)", total_params=2_913_290, flat_input=True),
        ArchSpec("small-mlp", small_mlp, (1, 28, 28), 10, {1: (10,)},
                 "JAST Appendix C SmallMLP; Table 2's 7,850 read as the client only",
                 notes="client Linear(784,10) = 7,850; server ReLU + Linear(10,10) (our reading)", flat_input=True),
        ArchSpec("cifar-cnn", cifar_cnn, (3, 32, 32), 10, _CIFAR_CNN_SHAPES,
                 "UnSplit CifarNet (1,609,546)", total_params=1_609_546),
        ArchSpec("mlp-mixer", mlp_mixer, (3, 32, 32), 10, {k: (64, 128) for k in range(1, 8)},
                 "MLP-Mixer for CIFAR-10 (omihub777 recipe); client at cut 1 = 146,816 (Table 2)"),
        ArchSpec("tabular-mlp", tabular_mlp, (30,), 2, TABULAR_SHAPES,
                 "dense 64-64-32-16 MLP for tabular data (any number of features); 8,786 parameters on wdbc",
                 total_params=8_786, flat_input=True, tabular=True),
        ArchSpec("tabular-lr", tabular_lr, (30,), 2, {1: (2,)},
                 "logistic regression for tabular data (any number of features); 62 parameters on wdbc",
                 total_params=62, flat_input=True, tabular=True),
        ArchSpec("tabular-embed", tabular_embed, (30,), 2, TABULAR_SHAPES,
                 "embedding-and-MLP for tabular data: categorical columns embedded (fastai widths), numerical ones "
                 "as they are, then tabular-mlp's dense layers; on numerical columns only (wdbc) it is tabular-mlp",
                 total_params=8_786, flat_input=True, tabular=True, grouped=True),
        ArchSpec("tabular-wide-deep", tabular_wide_deep, (30,), 2,
                 {cut: (width + 2,) for cut, (width,) in TABULAR_SHAPES.items()},
                 "wide and deep (Cheng et al. 2016) for tabular data: tabular-embed's deep part beside a dense wide "
                 "part on the raw columns, their logits summed at the output; every cut also sends the party's wide "
                 "logits (2 more values); 8,848 parameters on wdbc",
                 total_params=8_848, flat_input=True, tabular=True, grouped=True),
    )
}


def arch_spec(name: str) -> ArchSpec:
    return lookup(ARCHITECTURES, name, "architecture")


@functools.lru_cache(maxsize=None)
def meta_layers(name: str) -> torch.nn.Sequential:
    """The architecture's layers built on the meta device (nothing allocated, no random draw), once per name and
    shared: read their structure, never change them. Checks read it, and a grid checks thousands of cases of a
    few architectures."""
    with torch.device("meta"):
        return arch_spec(name).build().layers


def output_cut(name: str) -> int:
    """The cut before the output layer (U-shaped split learning: the label party holds the output layer only)."""
    return len(meta_layers(name)) - 2


def ends_dense(name: str) -> bool:
    """Whether the architecture's last layer is a dense one (the task's output layer)."""
    return isinstance(meta_layers(name)[-1], torch.nn.Linear)


def wide_logits(name: str) -> int:
    """How many logits the architecture's wide part sends beside its deep part (0: it has none)."""
    return getattr(meta_layers(name)[-1], "carry", 0)


def check_cut_layer(spec: ArchSpec, cut: int) -> None:
    if cut not in spec.activation_shapes:
        raise SplitlabError(f"architecture {spec.name} has no cut layer {cut}; "
                            f"use --cut-layer one of {', '.join(map(str, spec.cut_layers))}")


def takes(spec: ArchSpec, image_shape: tuple[int, ...]) -> bool:
    """Whether the architecture takes samples of this shape: its own, or any flat vector for a tabular one."""
    return tuple(image_shape) == spec.input_shape or (spec.tabular and len(image_shape) == 1)


def check_input_shape(spec: ArchSpec, image_shape: tuple[int, ...], dataset: str) -> None:
    if not takes(spec, image_shape):
        fits = [a.name for a in ARCHITECTURES.values() if takes(a, image_shape)]
        if len(image_shape) == 1:
            found = f"tabular samples of {image_shape[0]} features"
        else:
            found = f"{'x'.join(map(str, image_shape))} images"
        wants = "tabular samples" if spec.tabular else "x".join(map(str, spec.input_shape))
        raise SplitlabError(f"dataset {dataset} has {found} but architecture {spec.name} takes {wants}; "
                            f"use --arch {' or '.join(fits) or '<another>'}")


def build_split(name: str, cut: int, seed: int | None = None, input_shape: tuple[int, ...] | None = None,
                groups: Groups = ()) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Build the architecture (seeded if asked) and return (client, server) at the given cut layer.

    `input_shape` other than the architecture's own is allowed for flat-input (dense) architectures
    only: a defence such as a semi-orthogonal transform can change how many features the client takes.
    `groups`: the one-hot groups of the input's categorical columns, for an architecture that embeds them
    (`ArchSpec.grouped`; refused by any other).
    """
    spec = arch_spec(name)
    if cut != output_cut(name):
        check_cut_layer(spec, cut)
    if groups and not spec.grouped:
        raise SplitlabError(f"architecture {spec.name} takes no categorical groups; use tabular-embed or "
                            "tabular-wide-deep")
    if spec.grouped:
        width = spec.input_shape[0] if input_shape is None else math.prod(input_shape)
        build = functools.partial(spec.build, in_features=width, groups=tuple(groups))
    elif input_shape is None or tuple(input_shape) == spec.input_shape:
        build = spec.build
    elif spec.flat_input:
        build = functools.partial(spec.build, in_features=math.prod(input_shape))
    else:
        raise SplitlabError(f"architecture {spec.name} takes {'x'.join(map(str, spec.input_shape))} inputs and cannot "
                            f"take {'x'.join(map(str, input_shape))}; use a dense client (mlp, small-mlp)")
    with seeded(seed) if seed is not None else contextlib.nullcontext():
        net = build()
    return net.client(cut), net.server(cut)


def describe() -> list[dict]:
    """One row per (architecture, cut layer): parameter counts and the activation shape."""
    rows = []
    for spec in ARCHITECTURES.values():
        net = spec.build()
        total = count_parameters(net)
        for cut, shape in spec.activation_shapes.items():
            client = count_parameters(net.client(cut))
            rows.append({"arch": spec.name, "cut_layer": cut, "input": list(spec.input_shape),
                         "activation": list(shape), "client_params": client,
                         "server_params": total - client, "total_params": total, "source": spec.source})
    return rows

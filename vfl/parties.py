"""K feature parties (vertical federated learning proper): each holds a vertical strip of every image.

Party k of K holds columns `strip_bounds(W, K)[k]` of every image (torch.tensor_split's rule: the first
W % K strips are one column wider), e.g. K=2 on 28x28 MNIST: columns 0-13 and 14-27, the left and right
halves. Each party has its own bottom model, the architecture's client layers fitted to its strip, and
its own defences (an orthogonal transform then mixes the pixels of that party's strip only).

The server joins the parties' cut activations by concatenation along their last dimension: the width of
convolutional activations (the strips side by side, as in the image), the features of dense ones. Its
top model's first dense layer takes the joined size. The gradient it returns is split the same way,
and each party receives its own slice.

With K=1 nothing changes: one `Client` on whole images, built exactly as before.

Tabular samples (shape (features,)) are split by columns the same way: `--partition contiguous` gives party k the
k-th block of columns (`strip_bounds`), `--partition random` a set of columns of the same size drawn from the run's
seed (`party_columns`; the stream "feature partition"), each party's columns kept in their original order.
`--partition correlation` ranks the columns by how strongly they go with the label on the run's training split
(|Pearson correlation| with the label, the largest over one-vs-rest indicators on a multiclass set) and deals them
round-robin, so every party holds columns of every strength (the same sizes again). Images are split into
contiguous strips only (a convolution needs neighbouring columns).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from vfl.errors import SplitlabError
from vfl.models import arch_spec, build_split, meta_layers
from vfl.models.tabular import GatherWide, Groups, carried_dense
from vfl.protocol import Activations, Client, CutGradient, InferenceQuery, Prediction
from vfl.runtime import seeded, stream_seed
from vfl.validate import check_int

MAX_PARTIES = 64
"""Far above any split studied here; it catches a typo before K processes are asked for."""


def check_parties(parties: int, arch: str, cut: int, image_shape: tuple[int, ...], option: str = "--parties") -> None:
    """K must be a whole number from 1 to the image width (and to `MAX_PARTIES`), the architecture one whose
    layers can be fitted to a strip, and each strip wide enough for the layers it meets."""
    check_int(option, parties, low=1, high=min(MAX_PARTIES, image_shape[-1]))
    if parties == 1:
        return
    if not _plain_layers(meta_layers(arch)):
        raise SplitlabError(f"architecture {arch} cannot be split between feature parties (its blocks fix the "
                            f"input layout); use {option} 1 or a cnn, mlp, small-mlp or cifar-cnn")
    top_model(arch, cut, 0, activation_shapes(arch, cut, image_shape, parties))     # raises if a strip is too narrow


def _plain_layers(module: nn.Module) -> bool:
    """Whether the network is nested `nn.Sequential`s of leaf layers (so each layer's input can be seen)."""
    return all(isinstance(m, nn.Sequential) or not list(m.children()) for m in module.modules())


def strip_bounds(width: int, parties: int) -> list[tuple[int, int]]:
    """[start, stop) columns of each party's strip."""
    sizes = [width // parties + (k < width % parties) for k in range(parties)]
    starts = [sum(sizes[:k]) for k in range(parties)]
    return [(start, start + size) for start, size in zip(starts, sizes)]


def strip_shape(image_shape: tuple[int, ...], parties: int, party: int) -> tuple[int, ...]:
    """The shape of party `party`'s part of a sample (the same under every partition: only which columns differ)."""
    start, stop = strip_bounds(image_shape[-1], parties)[party]
    return (*image_shape[:-1], stop - start)


PARTITIONS = ("contiguous", "random", "correlation")
PARTITION_RULES = {
    "contiguous": "party k holds the k-th block of columns",
    "random": "as many columns per party, drawn by a permutation from the run's seed",
    "correlation": "columns ranked by |correlation with the label| on the run's training split (one-vs-rest, the "
                   "largest, on a multiclass set), dealt round-robin: party k holds ranks k, k+K, k+2K, ...",
}
"""What a run records of its partition rule, beside the columns it gave."""


def check_partition(partition: str, image_shape: tuple[int, ...], option: str = "--partition") -> None:
    """Random and correlation partitions take tabular samples only: an image is split into contiguous strips."""
    if partition not in PARTITIONS:
        raise SplitlabError(f"{option} {partition!r}: use one of {', '.join(PARTITIONS)}")
    if partition != "contiguous" and len(image_shape) != 1:
        raise SplitlabError(f"{option} {partition} deals tabular samples' columns; images are split into "
                            f"contiguous strips: use {option} contiguous")


def party_columns(width: int, parties: int, partition: str = "contiguous", seed: int = 0,
                  dataset: str | None = None, data_root: Path | str | None = None) -> list[list[int]]:
    """Each party's columns, in their original order: contiguous blocks (`strip_bounds`); under `random` as many
    columns per party, drawn by a permutation from the stream "feature partition" of `seed`; under `correlation`
    the columns of `dataset`'s training split (of split seed `seed`, read from `data_root`, the run's data root, else
    the default one) ranked by `label_correlation` and dealt round-robin. Every column goes to exactly one party."""
    bounds = strip_bounds(width, parties)
    if partition == "contiguous":
        return [list(range(start, stop)) for start, stop in bounds]
    if partition == "correlation":
        order = correlation_ranking(dataset, seed, None if data_root is None else str(data_root))
        return [sorted(order[k::parties]) for k in range(parties)]
    order = torch.randperm(width, generator=torch.Generator().manual_seed(stream_seed(seed, "feature partition")))
    return [sorted(order[start:stop].tolist()) for start, stop in bounds]


def strip_groups(groups: Groups, columns: Sequence[int]) -> Groups:
    """The one-hot groups of a party holding `columns` (sorted), in its own column positions: each group's columns
    that the party holds (a partition may deal a group's categories to several parties; each embeds its own)."""
    local = {c: i for i, c in enumerate(columns)}
    spans = []
    for start, stop in groups:
        held = [local[c] for c in range(start, stop) if c in local]
        if held:
            spans.append((held[0], held[-1] + 1))
    return tuple(spans)


def party_groups(arch: str, dataset: str, parties: int, party: int, partition: str = "contiguous", seed: int = 0,
                 data_root: Path | str | None = None) -> Groups:
    """The one-hot groups in party `party`'s columns of `dataset`, for an architecture that embeds categorical
    columns (() for any other, and for a dataset without categorical columns)."""
    if not arch_spec(arch).grouped:
        return ()
    from vfl import data as datasets
    from vfl.tabular import column_groups

    source = datasets.dataset_spec(dataset).tabular
    root = None if source is None or source.package is not None or data_root is None else str(data_root)
    groups = () if source is None else column_groups(source, root)
    if groups is None:
        raise SplitlabError(f"architecture {arch} embeds categorical columns, but dataset {dataset}'s reader does not "
                            "record its one-hot groups; use --arch tabular-mlp")
    width = datasets.dataset_spec(dataset).image_shape[-1]
    return strip_groups(groups, party_columns(width, parties, partition, seed, dataset, data_root)[party])


def label_correlation(features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per column, |Pearson correlation| with the label: with the 0/1 indicator of each class, the largest (on two
    classes both indicators give the same); 0 for a constant column. Computed in float64."""
    x = features.double() - features.double().mean(0)
    x_norm = x.norm(dim=0)
    scores = torch.zeros(features.shape[1], dtype=torch.float64)
    for c in labels.unique():
        y = (labels == c).double()
        y = y - y.mean()
        corr = (x * y[:, None]).sum(0) / (x_norm * y.norm()).clamp_min(1e-300)
        scores = torch.maximum(scores, torch.where(x_norm > 0, corr.abs(), torch.zeros_like(corr)))
    return scores


@functools.lru_cache(maxsize=16)
def correlation_ranking(dataset: str | None, seed: int, data_root: str | None = None) -> list[int]:
    """`dataset`'s columns, strongest first by `label_correlation` on its training split of split seed `seed` (ties
    in column order), read from `data_root` (a string, so the cache tells one copy of the data from another; None:
    the default root). The dataset's own classes, whatever the task: every party can be told the ranking before
    training. It takes no --data-draw: the partition ranks tabular sets only (`check_partition`), whose split is
    drawn from the run's seed under either draw (`vfl.data.split_seed`), so it is the run's own training split."""
    if dataset is None:
        raise SplitlabError("--partition correlation needs the dataset whose training split ranks the columns")
    from vfl import data as datasets

    train = datasets.load(dataset, "train", data_root, seed=seed)
    scores = label_correlation(train.images, train.labels)
    return sorted(range(len(scores)), key=lambda c: (-float(scores[c]), c))


def take_strip(images: torch.Tensor, parties: int, party: int, partition: str = "contiguous",
               seed: int = 0, dataset: str | None = None, data_root: Path | str | None = None) -> torch.Tensor:
    """Party `party`'s columns of a batch of images or tabular samples (a view for a contiguous partition)."""
    if partition == "contiguous":
        start, stop = strip_bounds(images.shape[-1], parties)[party]
        return images[..., start:stop]
    columns = party_columns(images.shape[-1], parties, partition, seed, dataset, data_root)[party]
    return images[..., torch.tensor(columns, device=images.device)]


def fit_first_dense(layers: nn.Sequential, input_shape: tuple[int, ...], seed: int, what: str) -> nn.Sequential:
    """`layers` with their first dense layer replaced, when inputs of `input_shape` reach it with another
    size, by a fresh one (initialised from `seed`) that takes that size; every later layer then sees the
    shapes it was built for. Raises `SplitlabError` (naming `what`) when the input is too small for a layer."""
    x = torch.zeros(1, *input_shape)
    try:
        with torch.no_grad():
            _fit(layers, x, seed)
    except RuntimeError:
        raise SplitlabError(f"{what} cannot take inputs of {'x'.join(map(str, input_shape))} (too small for its "
                            "layers); use fewer --parties or an earlier --cut-layer") from None
    return layers


def _fit(container: nn.Sequential, x: torch.Tensor, seed: int) -> tuple[torch.Tensor, bool]:
    """Run `x` through `container` up to its first dense layer (fitting it); (output, reached a dense layer)."""
    for index, layer in enumerate(container):
        if isinstance(layer, nn.Sequential):
            x, done = _fit(layer, x, seed)
            if done:
                return x, True
        elif isinstance(layer, nn.Linear):
            width = x.shape[-1] - getattr(layer, "carry", 0)        # wide and deep: the wide logits pass by it
            if width != layer.in_features:
                with seeded(seed):
                    container[index] = carried_dense(layer, width)
            return x, True
        else:
            x = layer(x)
    return x, False


def _output_shape(layers: nn.Module, input_shape: tuple[int, ...]) -> tuple[int, ...]:
    with torch.no_grad():
        return tuple(layers(torch.zeros(1, *input_shape)).shape[1:])


def bottom_model(arch: str, cut: int, seed: int, parties: int, party: int,
                 input_shape: tuple[int, ...], groups: Groups = ()) -> nn.Module:
    """Party `party`'s bottom model for inputs of `input_shape` (its strip, after its defences).

    K=1: the architecture's client layers seeded with `seed`, as `build_split` gives them. K>1: each
    party's from a stream of its own derived from `seed`, the first dense layer fitted to the strip. An
    architecture that embeds categorical columns is built for the strip and its one-hot `groups` directly."""
    if parties == 1:
        return build_split(arch, cut, seed=seed, input_shape=input_shape, groups=groups)[0]
    strip = {"input_shape": input_shape, "groups": groups} if arch_spec(arch).grouped else {}
    client, _ = build_split(arch, cut, seed=stream_seed(seed, "party bottom", party), **strip)
    return fit_first_dense(client, input_shape, stream_seed(seed, "party first dense", party),
                           f"{arch}'s client layers at cut {cut}")


def activation_shapes(arch: str, cut: int, image_shape: tuple[int, ...], parties: int) -> list[tuple[int, ...]]:
    """The per-example shape of each party's cut activations (defences keep it: they act on the input)."""
    spec = arch_spec(arch)
    if parties == 1 and cut in spec.activation_shapes:
        return [tuple(spec.activation_shapes[cut])]
    shapes = []
    for party in range(parties):
        shape = strip_shape(image_shape, parties, party)
        shapes.append(_output_shape(bottom_model(arch, cut, 0, parties, party, shape), shape))
    return shapes


def top_model(arch: str, cut: int, seed: int, shapes: Sequence[tuple[int, ...]]) -> nn.Module:
    """The server's top model for the joined activations of parties with activation `shapes`."""
    _, server = build_split(arch, cut, seed=seed)
    if len(shapes) == 1:
        return server
    carry = getattr(server[0], "carry", 0)
    if carry:                       # wide and deep: the parties' wide logits summed, their deep activations joined
        server = nn.Sequential(GatherWide([s[-1] for s in shapes], carry), *server)
    return fit_first_dense(server, CutLayout(shapes).joined_shape, stream_seed(seed, "top first dense"),
                           f"{arch}'s server layers after cut {cut}")


AGGREGATES = ("concat", "sum")


def score_model(arch: str, seed: int, parties: int, party: int, input_shape: tuple[int, ...],
                classes: int, groups: Groups = ()) -> nn.Sequential:
    """aggVFL: party `party`'s bottom model is the whole architecture, its first dense layer fitted to the party's
    columns and its output layer sized to the task's classes, so it sends class scores. K=1 is seeded with `seed`,
    K>1 from the party's stream, as `bottom_model`'s; an architecture that embeds categorical columns is built for
    the party's columns and their one-hot `groups`."""
    from vfl.tasks import task_output

    party_seed = seed if parties == 1 else stream_seed(seed, "party bottom", party)
    spec = arch_spec(arch)
    strip = {"in_features": math.prod(input_shape), "groups": tuple(groups)} if spec.grouped else {}
    with seeded(party_seed):
        layers = spec.build(**strip).layers
    try:
        fit_first_dense(layers, input_shape, stream_seed(seed, "party first dense", party), arch)
    except SplitlabError:
        raise SplitlabError(f"architecture {arch} cannot take a party's inputs of {'x'.join(map(str, input_shape))} "
                            "whole (too small for its layers); use fewer --parties or a dense architecture") from None
    return task_output(layers, classes, party_seed)


class SumScores(nn.Module):
    """aggVFL's label party: the sum of the parties' class scores (joined side by side), nothing to train. Every
    party receives the same gradient, dL/d(sum)."""

    def __init__(self, parties: int, classes: int):
        super().__init__()
        self.parties, self.classes = parties, classes

    def forward(self, joined: torch.Tensor) -> torch.Tensor:
        return joined.reshape(len(joined), self.parties, self.classes).sum(1)


@dataclass(frozen=True)
class CutLayout:
    """Where each party's activations sit in the joined tensor: slices of the last dimension."""
    shapes: tuple[tuple[int, ...], ...]

    def __init__(self, shapes: Sequence[tuple[int, ...]]):
        object.__setattr__(self, "shapes", tuple(tuple(s) for s in shapes))
        leading = {s[:-1] for s in self.shapes}
        if len(leading) != 1:
            raise SplitlabError(f"parties' activations {self.shapes} differ before their last dimension; "
                                "they cannot be joined")

    @property
    def widths(self) -> list[int]:
        return [s[-1] for s in self.shapes]

    @property
    def joined_shape(self) -> tuple[int, ...]:
        return (*self.shapes[0][:-1], sum(self.widths))

    def join(self, parts: Sequence[torch.Tensor]) -> torch.Tensor:
        return parts[0] if len(parts) == 1 else torch.cat(list(parts), dim=-1)

    def split(self, joined: torch.Tensor) -> list[torch.Tensor]:
        if len(self.shapes) == 1:
            return [joined]
        return [part.contiguous() for part in torch.split(joined, self.widths, dim=-1)]


class Parties:
    """K in-process feature parties behind the one client interface the protocol's loops take: `send`
    joins their activations, `receive` hands each its slice of the gradient. Inputs are whole images;
    each party sees only its strip."""

    def __init__(self, clients: Sequence[Client], image_shape: tuple[int, ...], layout: CutLayout,
                 partition: str = "contiguous", seed: int = 0, dataset: str | None = None,
                 data_root: Path | str | None = None):
        self.clients = list(clients)
        self.image_shape = tuple(image_shape)
        self.layout = layout
        self.partition, self.seed, self.dataset, self.data_root = partition, seed, dataset, data_root
        self.model = nn.ModuleList([c.model for c in self.clients])    # state_dict of all bottoms, in order
        self.last_prediction: Prediction | None = None

    @property
    def defences(self) -> tuple:
        return tuple(d for c in self.clients for d in c.defences)

    def _strips(self, x: torch.Tensor) -> list[torch.Tensor]:
        # contiguous, as a party holding only its strip has it (and computes on it) in its own process
        return [take_strip(x, len(self.clients), k, self.partition, self.seed, self.dataset,
                           self.data_root).contiguous()
                for k in range(len(self.clients))]

    def send(self, x: torch.Tensor, step: int) -> Activations:
        sent = [c.send(strip, step) for c, strip in zip(self.clients, self._strips(x))]
        return Activations(step, self.layout.join([m.tensor for m in sent]))

    def receive(self, message: CutGradient) -> None:
        for c, part in zip(self.clients, self.layout.split(message.tensor)):
            c.receive(CutGradient(message.step, part))

    def infer(self, x: torch.Tensor) -> torch.Tensor:
        return self.layout.join([c.infer(strip) for c, strip in zip(self.clients, self._strips(x))])

    def query(self, x: torch.Tensor, step: int) -> InferenceQuery:
        return InferenceQuery(step, self.infer(x).detach())

    def receive_prediction(self, message: Prediction) -> None:
        self.last_prediction = message
        for c in self.clients:
            c.receive_prediction(message)


def _columns_text(columns: list[int]) -> str:
    contiguous = columns == list(range(columns[0], columns[-1] + 1))
    return f"{columns[0]}-{columns[-1]}" if contiguous else ",".join(map(str, columns))


def describe_split(arch: str, cut: int, image_shape: tuple[int, ...], parties: int, partition: str = "contiguous",
                   seed: int = 0, dataset: str | None = None, data_root: Path | str | None = None) -> str:
    """One line: each party's strip and activation shape, and the joined shape the top model takes."""
    shapes = activation_shapes(arch, cut, image_shape, parties)
    columns = party_columns(image_shape[-1], parties, partition, seed, dataset, data_root)
    strips = ", ".join(f"party {k}: columns {_columns_text(c)} -> {'x'.join(map(str, s))}"
                       for k, (c, s) in enumerate(zip(columns, shapes)))
    joined = "x".join(map(str, CutLayout(shapes).joined_shape))
    return f"{strips}; joined {joined} ({math.prod(CutLayout(shapes).joined_shape)} values per example)"

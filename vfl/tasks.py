"""The task a split model is trained on: the dataset's classes (multiclass), or one class against the rest (binary:
on mnist5k one digit is 10% of the samples, an imbalanced task like the label-leakage papers' click data).

One definition for every split victim (training, the label attacks', FSHA's): the labels relabelled for the task,
and the output layer sized to it (two units on a binary task, drawn from a stream of its own so the rest of the
model keeps the weights the seed gives it)."""
from __future__ import annotations

import torch
from torch import nn

from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.runtime import seeded, stream_seed

__all__ = ["TASKS", "check_task", "task_classes", "for_task", "task_output", "output_layer"]

TASKS = ("multiclass", "binary")


def check_task(task: str, positive: int, dataset: str) -> None:
    found = datasets.dataset_spec(dataset)
    if task == "binary" and positive >= found.num_classes:
        raise SplitlabError(f"--positive {positive}: {dataset} has classes 0 to {found.num_classes - 1}")
    if task == "multiclass" and positive != 0:
        raise SplitlabError(f"--positive {positive} names the positive class of --task binary; this task is "
                            "multiclass (give --task binary, or leave --positive out)")


def task_classes(task: str, dataset: str) -> int:
    return 2 if task == "binary" else datasets.dataset_spec(dataset).num_classes


def for_task(data: datasets.ImageData, task: str, positive: int) -> datasets.ImageData:
    """The split relabelled for the task (binary: 1 for the positive class, 0 for the rest)."""
    if task != "binary":
        return data
    return datasets.ImageData(data.name, data.split, data.images, (data.labels == positive).long(), data.provenance)


def output_layer(last: nn.Linear, classes: int, seed: int) -> nn.Linear:
    """`last` where it has `classes` units, else a new dense layer of that many, from the stream "task output layer"
    of `seed`."""
    if last.out_features == classes:
        return last
    if getattr(last, "carry", 0):
        raise SplitlabError(f"a task of {classes} classes: this architecture's wide part sends {last.out_features} "
                            "logits beside its deep part; use tabular-embed or tabular-mlp")
    with seeded(stream_seed(seed, "task output layer")):
        return nn.Linear(last.in_features, classes, bias=last.bias is not None)


def task_output(top: nn.Module, classes: int, seed: int) -> nn.Module:
    """The label party's model with its output layer sized to the task (`output_layer`)."""
    if not isinstance(top, nn.Sequential) or not len(top) or not isinstance(top[-1], nn.Linear):
        if classes == 2:
            raise SplitlabError("a binary task needs a label party's model that ends in a dense layer; use cnn, mlp "
                                "or small-mlp")
        return top
    top[-1] = output_layer(top[-1], classes, seed)
    return top

"""A bottom/top MLP for tabular data (flat feature vectors of any width), the model the label-leakage papers split on
tabular sets (VFLAIR's MLP bottoms; Fu et al.'s fully connected models on Breast Cancer Wisconsin)."""
from __future__ import annotations

from torch import nn

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

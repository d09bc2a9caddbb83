"""The MNIST/Fashion-MNIST models of the JAST paper (arXiv 2412.11689, Table 2 and Appendix C)."""
from __future__ import annotations

from torch import nn

from vfl.models.split import Flatten, SplitNet


def cnn() -> SplitNet:
    """UnSplit's MnistNet (45,278 parameters): the paper's "CNN-based" client.

    Layer indices: 0 conv1, 1 ReLU, 2 pool, 3 conv2, 4 ReLU, 5 pool, 6 flatten+fc1, 7 ReLU, 8 fc2,
    9 ReLU, 10 fc3. Cut 1 = conv1 + ReLU (8x24x24); cut 6 = through fc1 before its ReLU (120).
    """
    return SplitNet([
        nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Sequential(Flatten(), nn.Linear(16 * 4 * 4, 120)), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    ], cut_layers=range(1, 7))


def mlp(in_features: int = 784) -> SplitNet:
    """The four-layer MLP with ReLU (2,913,290 parameters): the paper's "MLP-based" client.

    Indices: 0 Flatten, 1 Linear(784,1024), 2 ReLU, 3 Linear, 4 ReLU, 5 Linear, 6 ReLU, 7 Linear(1024,10).
    Cut 1 = Flatten + the first Linear with its bias and no activation: H = XW + b, the Lemma 1 setting.
    """
    return SplitNet([
        Flatten(), nn.Linear(in_features, 1024), nn.ReLU(),
        nn.Linear(1024, 1024), nn.ReLU(),
        nn.Linear(1024, 1024), nn.ReLU(),
        nn.Linear(1024, 10),
    ], cut_layers=range(1, 7))


def small_mlp(in_features: int = 784) -> SplitNet:
    """SmallMLP of Appendix C: client = one Linear(784,10) (7,850 parameters), server = ReLU + Linear(10,10).

    Ambiguity: the paper calls it a "two-layer linear model with a ReLU" whose client holds one
    linear layer, and Table 2 gives 7,850 parameters. No two-layer 784-h-10 MLP has 7,850 parameters
    in total, but 784*10 + 10 = 7,850 is exactly one Linear(784,10). We read Table 2 as counting the
    client only (as it does for the Mixer) and give the server the remaining ReLU + Linear(10,10)
    (110 parameters; 7,960 in total).
    """
    return SplitNet([Flatten(), nn.Linear(in_features, 10), nn.ReLU(), nn.Linear(10, 10)], cut_layers=(1,))

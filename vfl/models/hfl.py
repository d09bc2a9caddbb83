"""Whole-model architectures for horizontal FL (every client trains the full model), adapting to the
dataset's channels, image size and number of classes.

- `lenet`: DLG's LeNet: three 5x5 convs (stride 2, 2, 1; 12 channels; padding 2), Sigmoid after
  each, one Linear; every weight and bias ~ U(-0.5, 0.5). Zhu et al., DLG (NeurIPS 2019),
  `models/vision.py`, and iDLG's copy (hidden 588 for 1x28x28, 768 for 3x32x32).
- `lenet-relu`: TGIAs-RO's LeNet (its Table XI: 2 convs of kernel 5, 4 ReLUs, 2 max-pools, 3 fully
  connected layers, no BatchNorm): the LeNet-5 of LeCun et al. with ReLU, conv(C,6,5)-pool-conv(6,16,5)-pool,
  Linear 120-84-classes (44,426 parameters on 1x28x28). PyTorch's default initialisation (the paper does
  not state its own).
- `lenet-relu-uniform`: the same LeNet with DLG's initialisation, every weight and bias ~ U(-0.5, 0.5)
  (Zhu et al.'s `weights_init`), for comparing the two readings of the paper's unstated initialisation.
- `alexnet-bn`: TGIAs-RO's AlexNet (its Table XI: 5 convs of kernel 3 each followed by BatchNorm and ReLU, 4
  max-pools, 2 dropouts (inactive in eval mode), 3 fully connected layers with 2 ReLUs). The table gives no
  widths; these are the common CIFAR AlexNet's: 64-192-384-256-256 channels, Linear 4096-4096-classes.
- `convnet`: a small VGG-like ConvNet: conv-BN-ReLU stages of width w, 2w, 4w, 4w (w = 16), 2x2
  max-pools after stages 2-4, one Linear (66,170 parameters on 1x28x28). After Inverting Gradients'
  `ConvNet` family (width 64 there); ours is narrower so CPU runs finish in seconds.
- `resnet18`: CIFAR-style ResNet-18: 3x3 stem, no max-pool, BasicBlocks [2,2,2,2], widths 64-512,
  BN, bias-free convs, global average pool, Linear (He et al. 2016, as the IG/breaching zoos use it
  for CIFAR): 11,173,962 parameters for 3x32x32 and 10 classes.
- `resnet10`: the same with BasicBlocks [1,1,1,1]: 4,902,090 parameters for 1-channel 10-class input.
- `resnet10x3`: ResNet10 with every width times 3 (FedLeak, Table 8, "ResNet10_x3"; `ResNet(width=)`
  takes any multiplier).

Attacks run these models with BatchNorm in eval mode (running statistics fixed; at initialisation
mean 0, variance 1), for the client that computes the upload and for the attacker alike, as
Inverting Gradients does (`model.eval()`): the simulated and the observed gradient are then the same
function of the input.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from vfl.errors import SplitlabError, lookup
from vfl.runtime import seeded


# --- BatchNorm with cheap second derivatives ------------------------------------------------------

class BatchNorm2d(nn.BatchNorm2d):
    """nn.BatchNorm2d whose eval mode is written as the per-channel affine map it is,
    x * gamma / sqrt(var + eps) + (beta - mean * gamma / sqrt(var + eps)).

    Same parameters, buffers and values. Gradient-inversion attacks differentiate the model's
    gradient again; through `F.batch_norm` that second derivative is a general, costly kernel
    (about a fifth of an Inverting Gradients step on the ConvNet), through the affine map it is a
    few elementwise products. Training mode is the stock layer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or self.running_mean is None:
            return super().forward(x)
        self._check_input_dim(x)
        scale = torch.rsqrt(self.running_var + self.eps)
        if self.weight is not None:
            scale = scale * self.weight
        shift = -self.running_mean * scale
        if self.bias is not None:
            shift = shift + self.bias
        return x * scale[:, None, None] + shift[:, None, None]


# --- LeNet (DLG) -----------------------------------------------------------------------------------

class LeNet(nn.Module):
    """DLG's sigmoid LeNet: conv(C,12,5,s2) - conv(12,12,5,s2) - conv(12,12,5,s1), Sigmoid after each,
    flatten, Linear(12 * ceil(H/4) * ceil(W/4), classes). No pooling, so every pixel reaches the
    gradient of the first layer."""

    def __init__(self, channels: int = 1, size: tuple[int, int] = (28, 28), num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 12, 5, padding=2, stride=2), nn.Sigmoid(),
            nn.Conv2d(12, 12, 5, padding=2, stride=2), nn.Sigmoid(),
            nn.Conv2d(12, 12, 5, padding=2, stride=1), nn.Sigmoid(),
        )
        h, w = (_conv_out(_conv_out(s, 5, 2, 2), 5, 2, 2) for s in size)
        self.hidden = 12 * h * w
        self.fc = nn.Linear(self.hidden, num_classes)
        for p in self.parameters():          # DLG's weights_init: U(-0.5, 0.5) for weights and biases
            nn.init.uniform_(p, -0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).flatten(1))


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


# --- ConvNet ---------------------------------------------------------------------------------------

def _conv_bn_relu(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), BatchNorm2d(cout), nn.ReLU()]


class ConvNet(nn.Module):
    """conv(C,w)-BN-ReLU, conv(w,2w)-BN-ReLU, pool, conv(2w,4w)-BN-ReLU, pool, conv(4w,4w)-BN-ReLU,
    pool, flatten, Linear. 3x3 convolutions (padding 1, no bias: BN follows), 2x2 max-pools; width
    w = 16 gives 66,170 parameters for 1x28x28 input and 10 classes. Torch's default init."""

    def __init__(self, channels: int = 1, size: tuple[int, int] = (28, 28), num_classes: int = 10,
                 width: int = 16):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            *_conv_bn_relu(channels, w), *_conv_bn_relu(w, 2 * w), nn.MaxPool2d(2),
            *_conv_bn_relu(2 * w, 4 * w), nn.MaxPool2d(2),
            *_conv_bn_relu(4 * w, 4 * w), nn.MaxPool2d(2),
        )
        h, v = (s // 8 for s in size)
        self.fc = nn.Linear(4 * w * h * v, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).flatten(1))


# --- CIFAR-style ResNets ----------------------------------------------------------------------------

class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with a ReLU between, an identity (or 1x1 conv-BN) shortcut, ReLU after the sum."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    """CIFAR-style ResNet: conv3x3(C,64)-BN-ReLU stem (stride 1, no max-pool), four stages of
    BasicBlocks with widths 64, 128, 256, 512 (stride 1, 2, 2, 2), global average pool, Linear.
    Convolutions are bias-free (BN follows); Kaiming-normal (fan_out) conv init as torchvision."""

    def __init__(self, blocks: tuple[int, int, int, int], channels: int = 3, num_classes: int = 10, width: int = 1):
        super().__init__()
        widths = tuple(width * w for w in (64, 128, 256, 512))          # FedLeak's ResNet10_x3, _x5
        self.stem = nn.Sequential(nn.Conv2d(channels, widths[0], 3, padding=1, bias=False), BatchNorm2d(widths[0]),
                                  nn.ReLU())
        stages, cin = [], widths[0]
        for i, (n, cout) in enumerate(zip(blocks, widths)):
            layers = []
            for j in range(n):
                layers.append(BasicBlock(cin, cout, stride=2 if (i > 0 and j == 0) else 1))
                cin = cout
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[-1], num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.stages(self.stem(x))).flatten(1))


# --- TGIAs-RO's LeNet and AlexNet (its Table XI) ----------------------------------------------------------

class LeNetReLU(nn.Module):
    """LeNet-5 with ReLU and max-pooling: conv(C,6,5)-ReLU-pool-conv(6,16,5)-ReLU-pool, Linear 120-84-classes."""

    def __init__(self, channels: int = 1, size: tuple[int, int] = (28, 28), num_classes: int = 10,
                 uniform: bool = False):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        h, w = (((s - 4) // 2 - 4) // 2 for s in size)
        self.classifier = nn.Sequential(nn.Linear(16 * h * w, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                        nn.Linear(84, num_classes))
        if uniform:                          # DLG's weights_init: U(-0.5, 0.5) for weights and biases
            for p in self.parameters():
                nn.init.uniform_(p, -0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class AlexNetBN(nn.Module):
    """AlexNet for small images with BatchNorm after every conv: 5 convs of kernel 3 (64-192-384-256-256),
    max-pools after convs 1, 2, 4 and 5, dropout and Linear 4096-4096-classes."""

    def __init__(self, channels: int = 3, size: tuple[int, int] = (32, 32), num_classes: int = 10):
        super().__init__()
        widths, pooled = (64, 192, 384, 256, 256), (True, True, False, True, True)
        layers, cin = [], channels
        for width, pool in zip(widths, pooled):
            layers += [nn.Conv2d(cin, width, 3, padding=1), BatchNorm2d(width), nn.ReLU()]
            layers += [nn.MaxPool2d(2)] if pool else []
            cin = width
        self.features = nn.Sequential(*layers)
        h, w = (s // 16 for s in size)
        self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(cin * h * w, 4096), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


# --- the table -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HFLModelSpec:
    name: str
    build: Callable[[tuple[int, int, int], int], nn.Module]
    """(input shape C x H x W, number of classes) -> model in eval mode."""
    min_size: int
    """Smallest image side the model takes."""
    source: str
    total_params: int | None = None
    """Expected count for 1x28x28 input and 10 classes, checked by the tests where given."""


HFL_MODELS: dict[str, HFLModelSpec] = {
    spec.name: spec for spec in (
        HFLModelSpec("lenet", lambda shape, k: LeNet(shape[0], shape[1:], k), 1,
                     "DLG's sigmoid LeNet, U(-0.5, 0.5) init (Zhu et al. 2019; iDLG: hidden 588 on MNIST)"),
        HFLModelSpec("lenet-relu", lambda shape, k: LeNetReLU(shape[0], shape[1:], k), 16,
                     "TGIAs-RO's LeNet (Table XI): LeNet-5 with ReLU and max-pooling", total_params=44_426),
        HFLModelSpec("lenet-relu-uniform", lambda shape, k: LeNetReLU(shape[0], shape[1:], k, uniform=True), 16,
                     "TGIAs-RO's LeNet with DLG's U(-0.5, 0.5) init of every weight and bias", total_params=44_426),
        HFLModelSpec("alexnet-bn", lambda shape, k: AlexNetBN(shape[0], shape[1:], k), 16,
                     "TGIAs-RO's AlexNet with BatchNorm (Table XI; the common CIFAR widths)",
                     total_params=20_127_690),
        HFLModelSpec("convnet", lambda shape, k: ConvNet(shape[0], shape[1:], k), 8,
                     "small ConvNet, width 16 (after Inverting Gradients' ConvNet family)", total_params=66_170),
        HFLModelSpec("resnet18", lambda shape, k: ResNet((2, 2, 2, 2), shape[0], k), 8,
                     "CIFAR-style ResNet-18 (He et al. 2016)"),
        HFLModelSpec("resnet10", lambda shape, k: ResNet((1, 1, 1, 1), shape[0], k), 8,
                     "CIFAR-style ResNet10, BasicBlocks [1,1,1,1]", total_params=4_902_090),
        HFLModelSpec("resnet10x3", lambda shape, k: ResNet((1, 1, 1, 1), shape[0], k, width=3), 8,
                     "ResNet10 at 3x width, 192-1536 channels (FedLeak's ResNet10_x3)", total_params=44_049_994),
    )
}


def hfl_model_spec(name: str) -> HFLModelSpec:
    return lookup(HFL_MODELS, name, "HFL model")


def check_hfl_input(name: str, input_shape: tuple[int, int, int]) -> None:
    """Refuse images the model cannot take, with a one-line message."""
    spec = hfl_model_spec(name)
    if len(input_shape) != 3 or min(input_shape[1:]) < spec.min_size:
        raise SplitlabError(f"model {name} needs C x H x W images with sides of at least {spec.min_size}, "
                            f"got {'x'.join(map(str, input_shape))}")


def build_hfl_model(name: str, input_shape: tuple[int, int, int] = (1, 28, 28), num_classes: int = 10,
                    seed: int | None = None) -> nn.Module:
    """Build an HFL model (seeded with a local generator state if asked) in eval mode."""
    check_hfl_input(name, tuple(input_shape))
    spec = hfl_model_spec(name)
    if seed is None:
        return spec.build(tuple(input_shape), num_classes).eval()
    with seeded(seed):
        return spec.build(tuple(input_shape), num_classes).eval()


def final_linear(model: nn.Module) -> str | None:
    """Name of the weight of the model's last parameterised layer if that layer is an nn.Linear, else None.

    Analytic label recovery (iDLG and the count rule) reads the gradient of this layer.
    """
    last = None
    for name, module in model.named_modules():
        if any(True for _ in module.parameters(recurse=False)):
            last = (name, module)
    if last is None or not isinstance(last[1], nn.Linear):
        return None
    return f"{last[0]}.weight" if last[0] else "weight"


def describe_hfl() -> list[dict]:
    """One row per HFL model for 1x28x28 input and 10 classes (the `splitlab models` listing)."""
    rows = []
    for spec in HFL_MODELS.values():
        total = sum(p.numel() for p in spec.build((1, 28, 28), 10).parameters())
        rows.append({"arch": spec.name, "setting": "hfl", "input": [1, 28, 28], "total_params": total,
                     "source": spec.source})
    return rows

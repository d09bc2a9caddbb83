"""Settings of the HFL attacks, with where every number comes from. The named presets built from them
are in the one registry, `attacks.presets`."""
from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DLGSettings", "InvGradSettings", "Settings", "TV_WEIGHT_BY_DATASET"]


@dataclass(frozen=True)
class DLGSettings:
    """Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019) and iDLG (Zhao, Mopuri, Bilen, 2020).

    Find dummy data x' (and, for DLG, dummy label logits l') whose gradient matches the observed one:

        x'*, l'* = argmin_{x', l'}  sum_layers || grad_theta CE(F(x'; theta), softmax(l')) - g ||^2

    optimised with L-BFGS from x' ~ N(0, 1), l' ~ N(0, 1). iDLG replaces the free labels with the
    label read off the final layer's gradient (argmin of its row sums, exact at batch size 1) and
    optimises x' alone with hard-label CE.

    Sources (mit-han-lab/dlg `main.py`, PatrickZH/iDLG `iDLG.py`; notes/references/hfl_anchors.md
    section 4.2): `torch.optim.LBFGS` with torch's defaults, lr 1, max_iter 20 inner iterations per
    step, history 100, no line search; 300 outer steps; summed squared differences with no 0.5 factor;
    no prior, no box; randn init; model = the sigmoid LeNet with U(-0.5, 0.5) init, inputs in [0,1]
    unnormalised. iDLG's early stop at loss < 1e-6 is not used (the best iterate is kept instead).
    """
    name: str
    steps: int = 300
    """L-BFGS `.step()` calls (each up to `max_iter` inner iterations)."""
    lr: float = 1.0
    max_iter: int = 20
    history_size: int = 100
    labels: str = "joint"
    """joint: optimise label logits with the images (DLG); analytic: iDLG / counting rule."""
    restarts: int = 1
    """DLG and iDLG ran one trial per image."""

    @property
    def attack(self) -> str:
        return "dlg" if self.labels == "joint" else "idlg"

    @property
    def iterations(self) -> int:
        return self.steps


TV_WEIGHT_BY_DATASET = {
    # IG's `reconstruct_image.py --tv` default is 1e-4; its ConvNet CIFAR-10 notebooks use 1e-6, and
    # its ImageNet ResNet notebooks 1e-1 (hfl_anchors.md 3.2). MNIST-like data are not in the IG
    # paper: we use the CLI default. Our images are unnormalised [0,1], IG's normalised by the
    # dataset std (about 0.25-0.3), so the same weight is a few times stronger relative to IG's.
    "mnist5k": 1e-4, "mnist": 1e-4, "fashion-mnist": 1e-4,
    "cifar10": 1e-6,
    "imagenet": 1e-1,
}


@dataclass(frozen=True)
class InvGradSettings:
    """Inverting Gradients (Geiping, Bauermeister, Droege, Moeller, NeurIPS 2020).

        x* = argmin_{x in [0,1]^n}  1 - <grad L(x, y), g> / (||grad L(x, y)|| ||g||)  +  alpha_TV TV(x)

    the cosine distance taken over all layers jointly, TV(x) = mean|dx| + mean|dy| (anisotropic), Adam
    on sign(grad) ("signed gradients"), projection onto the box [0,1] after every step, the learning
    rate multiplied by 0.1 at 3/8, 5/8 and 7/8 of the run, x ~ N(0, 1) init, several restarts of
    which the one with the lowest loss is kept. Labels are given (the paper's setting) or, when the
    server does not know them, recovered analytically (iDLG at batch size 1, counting above it).

    Sources (JonasGeiping/invertinggradients `reconstruct_image.py --optim ours` and notebooks;
    hfl_anchors.md 3.2 and 5.2): cost `sim` over indices `def` (all layers), Adam lr 0.1, `signed`
    True (the CLI default), `boxed` True, MultiStepLR at max_it // 2.667, // 1.6, // 1.142 with gamma
    0.1, 24,000 iterations, init randn, scoring by loss; TV weight per dataset (`TV_WEIGHT_BY_DATASET`:
    1e-4 CLI default, 1e-6 ConvNet CIFAR-10 notebooks, 1e-1 ImageNet notebooks); 8 restarts as in the
    paper's ImageNet ResNet runs (its notebooks also use 4, 32, and 1 for the ConvNet).
    BatchNorm in eval mode (`model.eval()`), as IG does.
    """
    name: str
    iterations: int = 24_000
    lr: float = 0.1
    signed: bool = True
    boxed: bool = True
    tv: float | None = None
    """None: the dataset's weight from TV_WEIGHT_BY_DATASET."""
    decay: tuple[float, ...] = (3 / 8, 5 / 8, 7 / 8)
    gamma: float = 0.1
    restarts: int = 8

    attack = "invgrad"

    def for_dataset(self, dataset: str) -> "InvGradSettings":
        """Fill in the TV weight for the dataset (1e-4 where the table has no entry, IG's CLI default)."""
        return self if self.tv is not None else replace(self, tv=TV_WEIGHT_BY_DATASET.get(dataset, 1e-4))


Settings = DLGSettings | InvGradSettings

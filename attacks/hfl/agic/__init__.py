"""AGIC as the AWA paper's baseline: approximate the whole FedAvg update by one full-batch step."""
from attacks.hfl.agic.attack import AGIC
from attacks.hfl.agic.settings import AGICSettings
from attacks.kit import (AttackSpec, Deviation, Preset, trajectory_evaluation, trajectory_figure,
                         upload_diagnostics)

__all__ = ["SPEC", "AGIC", "AGICSettings"]

SPEC = AttackSpec(
    name="agic", setting="hfl", title="AGIC: one combined full-batch step matched by a layer-weighted cosine",
    paper="Xu, Hong, Wang, Zhou. AGIC: Approximate Gradient Inversion Attack on Federated Learning. arXiv "
          "2204.13784, as the AWA paper runs it",
    observes=("fedavg",), settings=AGICSettings, attack=AGIC, default="agic.quick", labels=("known",),
    diagnostics=upload_diagnostics, evaluate=trajectory_evaluation, write=trajectory_figure,
    presets=(
        Preset("agic.paper", "AWA Section 5's AGIC baseline: one combined full-batch step, layer-weighted cosine, "
                             "Adam 0.1, 1,000 iterations (weights: ours)"),
        Preset("agic.quick", "ours: agic.paper with 300 iterations",
                             {"iterations": 300}),
    ),
    model="convnet",
    smoke={"iterations": 5},
    deviations=(
        Deviation("model and data", "ResNet-18 on CIFAR-10", "a width-16 ConvNet on mnist5k digits", "CPU time"),
        Deviation("layer weights", "not given by the AWA paper", "conv and FC layers rising linearly 1..K, BN 1",
                  "AGIC's weighting as the lab reads it"),
        Deviation("iterations", "1,000 Adam steps", "300", "a CPU budget", ("agic.quick",)),
    ),
)

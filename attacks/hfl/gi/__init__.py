"""GradInversion (GI): gradient matching with BatchNorm-statistics priors, Langevin updates and group consistency."""
from attacks.hfl.gi.attack import GradInversion
from attacks.hfl.gi.settings import GISettings
from attacks.kit import AttackSpec, Deviation, Preset

__all__ = ["SPEC", "GradInversion", "GISettings"]

SPEC = AttackSpec(
    name="gi", setting="hfl", title="GradInversion: gradient matching with BatchNorm-statistics and image priors",
    paper="Yin, Mallya, Vahdat, Alvarez, Kautz, Molchanov. See through Gradients: Image Batch Recovery via "
          "GradInversion. CVPR 2021; as FedLeak's Table 3 baseline",
    observes=("fedsgd",), settings=GISettings, attack=GradInversion, default="gi.quick", labels=("recovered", "known"),
    model="convnet",
    presets=(
        Preset("gi.paper", "Yin et al. 2021 as breaching's seethroughgradients records it: Adam 0.1, warm-up 50, "
                           "cosine decay, 20,000 iterations, TV 1e-4, L2 1e-6, BN 0.1 (first layer x10), Langevin "
                           "0.2 (the paper's)"),
        Preset("gi.quick", "ours: gi.paper for 600 iterations with breaching's Langevin scale 0.01 (a CPU budget, "
                           "equal to fedleak.quick's)",
               {"iterations": 600, "langevin": 0.01}),
    ),
    smoke={"iterations": 20},
    deviations=(
        Deviation("model and data", "ResNet-50 pretrained on ImageNet at batch 8-48", "a width-16 ConvNet from random "
                  "weights on mnist5k digits", "CPU time; its BN statistics are those of an untrained model"),
        Deviation("group consistency", "several seeds, each registered to their consensus image", "an optional pull "
                  "toward the restarts' mean, without registration; off in the presets (one restart)",
                  "registration is not described closely enough to reproduce"),
        Deviation("iterations", "20,000", "600", "a CPU budget, equal to FedLeak's quick preset", ("gi.quick",)),
    ),
)

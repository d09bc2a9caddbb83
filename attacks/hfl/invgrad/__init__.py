"""Inverting Gradients: cosine gradient matching with a TV prior, signed Adam, box [0,1], step decay."""
from attacks.hfl.invgrad.attack import InvertingGradients
from attacks.hfl.invgrad.settings import InvGradSettings, for_dataset
from attacks.kit import AttackSpec, Deviation, Preset

__all__ = ["SPEC", "InvertingGradients", "InvGradSettings"]

SPEC = AttackSpec(
    name="invgrad", setting="hfl", title="Inverting Gradients: cosine gradient matching, TV prior, signed Adam",
    paper="Geiping, Bauermeister, Droege, Moeller. Inverting Gradients: How easy is it to break privacy in "
          "federated learning? NeurIPS 2020",
    observes=("fedsgd", "fedavg"), settings=InvGradSettings, attack=InvertingGradients, default="invgrad.quick",
    labels=("recovered", "known"), configure=for_dataset,
    presets=(
        Preset("invgrad.paper", "JonasGeiping/invertinggradients: cosine, signed Adam 0.1, box, x0.1 at 3/8, 5/8, "
                                "7/8, 24,000 iterations, 8 restarts"),
        Preset("invgrad.quick", "ours: 200 iterations x 2 restarts (recognisable digits on the ConvNet at batch 1)",
                                {"iterations": 200, "restarts": 2}),
    ),
    model="convnet",
    smoke={"iterations": 10, "restarts": 1},
    deviations=(
        Deviation("model and data", "ResNet-18/ResNet-32 on ImageNet and CIFAR-10, a width-64 ConvNet on CIFAR-10",
                  "a width-16 ConvNet on mnist5k digits", "CPU time; MNIST-like data are not in the paper"),
        Deviation("TV weight", "per dataset (1e-4 CLI, 1e-6 CIFAR ConvNet, 1e-1 ImageNet)", "1e-4 for the digits",
                  "the paper has no MNIST setting: its command-line default"),
        Deviation("image scale", "images normalised by the dataset's mean and std", "unnormalised [0, 1] images",
                  "the lab's one reporting scale; the same TV weight is a few times stronger here"),
        Deviation("iterations and restarts", "24,000 Adam steps, 8 restarts", "200 steps x 2 restarts",
                  "recognisable digits on the ConvNet at batch 1 within seconds", ("invgrad.quick",)),
    ),
)
